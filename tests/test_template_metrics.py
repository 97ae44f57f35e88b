"""Prediction frequency, model rankings, perplexity-accuracy correlation and parallel sets on hand-made examples."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats

from probekit.datasets import freetext, triples
from probekit.errors import ProbekitError
from probekit.templates import frequency, parallel, rankings

# eight prompts: ESR1 is the top answer of four, NR1I2 of two
TOPS = [["ESR1", "NR1I2", "TP53"], ["ESR1", "TP53", "NR1I2"], ["NR1I2", "ESR1", "BRCA1"], ["ESR1", "BRCA1", "TP53"],
        ["TP53", "ESR1", "NR1I2"], ["ESR1", "NR1I2", "APOE"], ["NR1I2", "APOE", "ESR1"], ["BRCA1", "TP53", "ESR1"]]
GOLDS = [["TP53"], ["ESR1"], ["BRCA1"], ["BRCA1"], ["TP53"], ["APOE"], ["NR1I2"], ["BRCA1"]]


@pytest.fixture
def run():
    return pd.DataFrame({"top_names": TOPS, "golds": GOLDS})


def test_prediction_frequency_counts_top_k_per_prompt(run):
    """Shaier et al. §5.4: "we calculate the number of times each entity appears in each model's top-10
    predictions" (k = 10 there; here k is a parameter): an object counts once per prompt."""
    top1 = frequency.prediction_frequency(run, k=1)
    assert top1[["object", "prompts"]].values.tolist() == [["ESR1", 4], ["NR1I2", 2], ["BRCA1", 1], ["TP53", 1]]
    assert top1.share.tolist() == [0.5, 0.25, 0.125, 0.125]
    assert top1.gold_share.tolist() == [0.125, 0.125, 0.375, 0.25]
    top3 = frequency.prediction_frequency(run, k=3).set_index("object")
    assert top3.prompts.to_dict() == {"ESR1": 8, "NR1I2": 6, "TP53": 5, "BRCA1": 3, "APOE": 2}
    with pytest.raises(ProbekitError, match="stored only 3 predictions per prompt; cannot count the top 10"):
        frequency.prediction_frequency(run, k=10)


def test_top_share_and_distinct_predictions(run):
    """The share of predictions taken by the top-n objects ("share of top-10 slots taken by the
    15 most frequent entities"), and Figure 1's "percentage of unique entities it predicts over all prompts"."""
    assert frequency.top_share(run, k=1, n=1) == 4 / 8
    assert frequency.top_share(run, k=1, n=2) == 6 / 8
    assert frequency.top_share(run, k=1, n=5) == 1.0
    assert frequency.top_share(run, k=3, n=2) == (8 + 6) / 24
    assert frequency.distinct_predictions(run, ks=(1, 3, 10)) == {1: {"distinct": 4, "share": 4 / 8},
                                                                  3: {"distinct": 5, "share": 5 / 24}}


def test_flags_name_the_object_and_the_share(run):
    assert frequency.flags(run, label="BERT", threshold=0.25, k=1) == [
        "BERT answers ESR1 to 50.0 % of prompts (it is the gold answer of 12.5 %)",
        "BERT answers NR1I2 to 25.0 % of prompts (it is the gold answer of 12.5 %)"]
    assert frequency.flags(run, threshold=0.9, k=3) == [
        "this model has in its top 3 ESR1 to 100.0 % of prompts (it is the gold answer of 12.5 %)"]
    assert frequency.flags(run, threshold=0.6, k=1) == []
    table = frequency.frequency_table({"a": run}, k=1, n=2)
    assert table.iloc[0][["top object", "top object share", "top-2 share", "distinct"]].tolist() == ["ESR1", 0.5,
                                                                                                      0.75, 4]


TB = {"PubMedBERT": 0.30, "BERT": 0.10, "RoBERTa": 0.20, "ALBERT": 0.05, "BlueBERT": 0.15}
TF = {"PubMedBERT": 0.40, "BERT": 0.35, "RoBERTa": 0.10, "ALBERT": 0.20, "BlueBERT": 0.25}


def test_model_rankings_side_by_side():
    """RQ1: "Do model rankings differ between template-based and template-free probing?" — rank 1 = best."""
    t = rankings.model_rankings(TB, TF).set_index("model")
    assert t["template-based rank"].to_dict() == {"PubMedBERT": 1, "RoBERTa": 2, "BlueBERT": 3, "BERT": 4,
                                                  "ALBERT": 5}
    assert t["template-free rank"].to_dict() == {"PubMedBERT": 1, "RoBERTa": 5, "BlueBERT": 3, "BERT": 2,
                                                 "ALBERT": 4}
    assert t.loc["RoBERTa", "rank change"] == 3 and t.loc["BERT", "rank change"] == -2
    assert rankings.ranks({"a": 1, "b": 1, "c": 0}) == {"a": 1, "b": 1, "c": 3}
    with pytest.raises(ProbekitError, match="no model has results on both"):
        rankings.model_rankings({"a": 1}, {"b": 1})


def test_rank_correlation_by_hand():
    """Kendall's tau from concordant/discordant pairs counted by hand; Spearman's rho = 1 - 6 sum d^2 / n(n^2-1)
    (no ties); p-values from scipy."""
    models = list(TB)
    conc = disc = 0
    for i in range(len(models)):
        for j in range(i + 1, len(models)):
            s = (TB[models[i]] - TB[models[j]]) * (TF[models[i]] - TF[models[j]])
            conc += s > 0
            disc += s < 0
    tb_r, tf_r = rankings.ranks(TB), rankings.ranks(TF)
    d2 = sum((tb_r[m] - tf_r[m]) ** 2 for m in models)
    n = len(models)
    out = rankings.rank_correlation(TB, TF)
    assert out["n"] == 5
    assert out["kendall_tau"] == pytest.approx((conc - disc) / (n * (n - 1) / 2))
    assert out["spearman_rho"] == pytest.approx(1 - 6 * d2 / (n * (n * n - 1)))
    assert out["kendall_p"] == pytest.approx(stats.kendalltau(list(TB.values()), list(TF.values())).pvalue)
    assert 0 <= out["spearman_p"] <= 1
    assert math.isnan(rankings.rank_correlation({"a": 1, "b": 2}, {"a": 2, "b": 1})["kendall_tau"])


def test_perplexity_accuracy_pearson():
    """Figure 2: "Average Acc@1 vs average Perplexity per model ... Pearson's correlation coefficient", per
    approach; r computed here from its definition."""
    pts = pd.DataFrame({"model": list("abcd") * 2, "kind": ["template-based"] * 4 + ["template-free"] * 4,
                        "perplexity": [10, 20, 30, 40, 5, 6, 7, 9],
                        "accuracy": [0.1, 0.3, 0.2, 0.4, 0.5, 0.4, 0.3, 0.1]})
    out = rankings.perplexity_accuracy(pts).set_index("kind")
    for kind, g in pts.groupby("kind"):
        x, y = g.perplexity - g.perplexity.mean(), g.accuracy - g.accuracy.mean()
        r = (x * y).sum() / math.sqrt((x * x).sum() * (y * y).sum())
        assert out.loc[kind, "pearson_r"] == pytest.approx(r)
        assert out.loc[kind, "models"] == 4
    assert out.loc["template-free", "pearson_r"] < 0 < out.loc["template-based", "pearson_r"]
    assert math.isnan(rankings.perplexity_accuracy(pts.iloc[:2]).pearson_r.iloc[0])


TRIPLES = """subject,relation,object,template
Aspirin,may_prevent,Stroke,[X] may help to prevent [Y] .
Aspirin,may_prevent,Myocardial infarction,[X] may help to prevent [Y] .
Folic acid,may_prevent,Neural tube defects,[X] may help to prevent [Y] .
Levodopa,may_treat,Parkinson disease,[X] might treat [Y] .
Insulin,may_treat,Diabetes,[X] might treat [Y] .
"""
SENTENCES = """prompt,object,subject,relation,source
aspirin lowers the risk of [MASK] in adults,myocardial infarction,aspirin,may_prevent,pubmed_0:12
aspirin after [MASK] is standard care,myocardial infarction,aspirin,may_prevent,pubmed_0:13
prevention of [MASK] by folic acid,neural tube defects,folic acid,may_prevent,pubmed_1:7
levodopa remains the best drug for [MASK],parkinson disease,levodopa,may_treat,pubmed_2:9
insulin deficiency causes [MASK],ketoacidosis,insulin,may_treat,pubmed_3:1
[MASK] is a kinase,mtor,,gene,pubmed_3:2
"""


def test_pair_datasets_shares_ids_golds_and_vocabulary():
    """Parallel sets (Shaier et al. §4): "each template has a corresponding template-free text" and "the number
    of entities stays the same and the only different variable is the probing method"."""
    tb = triples.parse(TRIPLES, label="t.csv", name="t")
    tf = freetext.parse(SENTENCES, label="s.csv", name="s")
    par = parallel.pair_datasets(tb, tf)
    assert par.stats == {"sentences": 6, "no_subject": 1, "no_template_fact": 0, "not_gold": 1, "pairs": 3,
                         "facts": 3}
    assert [q.id for q in par.template.queries] == [q.id for q in par.free.queries]
    tq, fq = par.template.query("may_prevent:00000"), par.free.query("may_prevent:00000")
    assert (tq.subject, tq.golds, tq.text()) == ("Aspirin", ("Myocardial infarction",),
                                                 "Aspirin may help to prevent [MASK] .")
    assert (fq.golds, fq.text()) == (("Myocardial infarction",), "aspirin lowers the risk of [MASK] in adults")
    names = ["Myocardial infarction", "Neural tube defects", "Parkinson disease"]
    assert list(par.template.candidates().names) == list(par.free.candidates().names) == names
    assert len(parallel.pair_datasets(tb, tf, per_fact=2).pairs) == 4
    wide = parallel.pair_datasets(tb, tf, vocab="template")
    assert len(wide.free.candidates()) == len(tb.candidates())
    with pytest.raises(ProbekitError, match="no sentence of 's' matches a fact of 't'"):
        parallel.pair_datasets(tb, freetext.parse(SENTENCES.splitlines()[0] + "\n" + SENTENCES.splitlines()[-1],
                                                  label="s.csv", name="s"))


def test_parallel_drop_per_relation():
    """The drop in acc@k between the two sides of a parallel set, per relation, macro and micro."""
    tb = pd.DataFrame({"query_id": ["a:0", "a:1", "b:0", "x:9"], "relation": ["a", "a", "b", "x"],
                       "best_gold_rank": pd.array([1, 7, 2, 1], dtype="Int64")})
    tf = pd.DataFrame({"query_id": ["a:0", "a:1", "b:0"], "relation": ["a", "a", "b"],
                       "best_gold_rank": pd.array([3, None, 1], dtype="Int64")})
    out = parallel.parallel_drop(tb, tf, metrics=("acc@1", "acc@5", "MRR"))
    assert out.loc["a", ["pairs", "template acc@1", "free acc@1", "template acc@5", "free acc@5"]].tolist() == \
        [2, 0.5, 0.0, 0.5, 0.5]
    assert out.loc["b", "Δ acc@1"] == 1.0 and out.loc["b", "Δ acc@5"] == 0.0
    assert out.loc["macro", "Δ acc@1"] == pytest.approx(((0 - 0.5) + (1 - 0)) / 2)
    assert out.loc["micro", "template acc@1"] == pytest.approx(1 / 3)
    assert out.loc["micro", "pairs"] == 3
    assert out.loc["a", "template MRR"] == pytest.approx((1 + 1 / 7) / 2) and out.loc["a", "free MRR"] == pytest.approx(
        (1 / 3 + 0) / 2)  # a pair without a gold rank scores 0
    with pytest.raises(ProbekitError, match="share no query id"):
        parallel.parallel_drop(tb.iloc[3:], tf)
