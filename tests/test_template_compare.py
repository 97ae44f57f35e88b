"""Stored per-prompt perplexities and the comparison of stored runs (template-based vs template-free)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import save_tiny_bert
from scipy import stats

from probekit import models
from probekit.bench import runs
from probekit.datasets import freetext
from probekit.errors import ProbekitError
from probekit.metrics import compare as run_metrics
from probekit.probes import get_probe
from probekit.templates import compare, frequency, stored

FREE = """prompt,object,subject,relation
aspirin is often taken for [MASK] and fever,pain,aspirin,may_treat
metformin lowers glucose in [MASK],type 2 diabetes,metformin,may_treat
insulin is needed in [MASK],type 1 diabetes,insulin,may_treat
warfarin lowers the risk of [MASK] in atrial fibrillation,stroke,warfarin,may_prevent
statins reduce the rate of [MASK],heart attack,statin,may_prevent
vitamin d deficiency causes [MASK],rickets,vitamin d,may_prevent
"""


@pytest.fixture(scope="module")
def three_mlms(tmp_path_factory):
    return [models.load(str(save_tiny_bert(tmp_path_factory.mktemp(f"mlm{s}"), mlm=True, seed=s)), device="cpu")
            for s in range(3)]


def _run(model, dataset):
    rankings = get_probe("mask_average").rank(model, dataset.queries, dataset.candidates(), k=5)
    return runs.save_run(rankings, model=model, dataset=dataset, probe="mask_average", k=5)


def test_score_run_stores_per_prompt_perplexity(three_mlms, tiny_dataset):
    """Per prompt, stored with the run; scoring again with the same scorer and fill replaces the rows."""
    model = three_mlms[0]
    run_id = _run(model, tiny_dataset)
    scores = stored.score_run(run_id, model, batch_size=16)
    assert len(scores) == len(tiny_dataset)
    texts = dict(zip(scores.query_id, scores.text))
    assert texts["may_treat:0000"] == "metformin may treat type 2 diabetes ."  # first gold filled into the template
    back = stored.load_scores([run_id])
    assert len(back) == len(tiny_dataset) and set(back.method) == {"pseudo"} and set(back.fill) == {"gold"}
    np.testing.assert_allclose(back.sort_values("query_id").perplexity,
                               scores.sort_values("query_id").perplexity, rtol=1e-9)
    stored.score_run(run_id, model, batch_size=3)  # again: replaced, not duplicated
    stored.score_run(run_id, model, fill="mask")
    assert len(stored.load_scores([run_id])) == 2 * len(tiny_dataset)
    means = stored.mean_perplexity([run_id]).set_index("fill")
    assert means.loc["gold", "mean_perplexity"] == pytest.approx(scores.perplexity.mean())
    assert means.loc["gold", "prompts"] == len(tiny_dataset)


def test_encoder_without_mlm_head_cannot_score(tiny_encoder, tiny_dataset):
    with pytest.raises(ProbekitError, match="has no MLM head, so it has no pseudo-perplexity"):
        stored.score_queries(tiny_encoder, tiny_dataset.queries)


def test_compare_runs_of_three_models_on_both_kinds(three_mlms, tiny_dataset):
    free = freetext.parse(FREE, label="free.csv", name="free")
    ids = {}
    for m in three_mlms:
        for ds in (tiny_dataset, free):
            ids[m.id, ds.name] = rid = _run(m, ds)
            stored.score_run(rid, m, batch_size=32)
    cmp = compare.compare_runs(list(ids.values()), metric="acc@1")
    table = cmp.runs.set_index("run_id")
    assert len(table) == 6
    for (model_id, ds_name), rid in ids.items():
        row = table.loc[rid]
        assert row.kind == ("template-free" if ds_name == "free" else "template-based")
        frame = runs.load_run(rid).frame
        assert row["acc@1"] == run_metrics.accuracy(frame, k=1, average="macro")
        depth = min(len(n) for n in frame.top_names)
        assert row["frequency k"] == min(10, depth)  # the paper's top 10, or as deep as the run stored
        assert row["top object"] == frequency.prediction_frequency(frame, k=row["frequency k"]).object.iloc[0]
        assert row.scorer == model_id
        scores = stored.load_scores([rid])
        assert row["mean perplexity"] == pytest.approx(scores.perplexity.mean())
        assert row["corpus perplexity"] == pytest.approx(math.exp(scores.nll.sum() / scores.n_tokens.sum()))
    assert len(cmp.rankings) == 3 and cmp.correlation["n"] == 3
    assert sorted(cmp.rankings["template-based rank"]) in ([1, 2, 3], [1, 1, 3], [1, 2, 2], [1, 1, 1])
    assert list(cmp.perplexity_fit.kind) == ["template-based", "template-free"]
    assert list(cmp.perplexity_fit.models) == [3, 3]
    assert set(cmp.perplexity_fit["perplexity aggregate"]) == {"prompt-mean"}
    by_corpus = compare.compare_runs(list(ids.values()), metric="acc@1", perplexity_aggregate="corpus")
    assert by_corpus.to_dict()["perplexity_aggregate"] == "corpus" and by_corpus.to_dict()["counting"] == "query"
    tb = by_corpus.runs[by_corpus.runs.kind == "template-based"]
    r = by_corpus.perplexity_fit.pearson_r.iloc[0]  # the fit uses the chosen aggregate's column
    if tb["acc@1"].nunique() > 1 and tb["corpus perplexity"].nunique() > 1:
        assert r == pytest.approx(stats.pearsonr(tb["corpus perplexity"], tb["acc@1"]).statistic)
    else:
        assert math.isnan(r)
    assert cmp.to_dict()["runs"][0]["run_id"] in ids.values()
    # one kind only: no rankings, still frequencies
    only_free = compare.compare_runs([ids[m.id, "free"] for m in three_mlms])
    assert only_free.rankings is None and len(only_free.frequency) == 3


def test_compare_refuses_two_runs_of_one_model_and_kind(three_mlms, tiny_dataset):
    a, b = _run(three_mlms[0], tiny_dataset), _run(three_mlms[0], tiny_dataset)
    with pytest.raises(ProbekitError, match="has two template-based runs"):
        compare.compare_runs([a, b])
    with pytest.raises(ProbekitError, match="give at least one stored run id"):
        compare.compare_runs([" "])
    with pytest.raises(ProbekitError, match="no stored run"):
        compare.compare_runs(["run-nope"])
    assert math.isnan(compare.compare_runs([a]).runs["mean perplexity"].iloc[0])
