"""acc@k's two counting conventions, each against a naive loop of the rule its source states.

``query`` (MedLAMA, cambridgeltl/medlama @ 8a314d1, probers/utils/run_retrieval_prediction.py lines 188-205): a
query is one item, a hit when any of its golds is in the top k:

    for jj in range(len(nn_indices[j])):
        if all_names[nn_indices[j][jj]] in answers[j]:
            correct_at_k += 1 ... break

and "micro acc@1: %.4f, macro acc@10" divide by the number of queries (lines 214-225).

``triple`` (LAMA, facebookresearch/LAMA @ 5cba81b, scripts/batch_eval_KB_completion.py lines 405-409, 616-617;
lama/evaluation_metrics.py lines 87-97): every distinct (sub, obj) fact is one sample, scored by its own
label's rank: "if rank >= 0 and rank <= P_AT: P_AT_X = 1.", "Precision += sample_P", averaged over samples.
"""

from __future__ import annotations

import json
import math
import random

import pandas as pd
import pytest

from probekit import metrics
from probekit.errors import ProbekitError
from probekit.metrics import compare
from probekit.types import Query, Ranking


def _rankings(seed: int = 0, n: int = 60) -> list[Ranking]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        golds = tuple(f"g{i}_{j}" for j in range(rnd.randint(1, 4)))
        ranks = tuple(rnd.choice([None, 1, 2, 3, 5, 7, 10, 11, 40]) for _ in golds)
        q = Query(f"q{i}", "s", rnd.choice(["r1", "r2", "r3"]), "[X] [Y]", golds=golds)
        out.append(Ranking(q, (), (), (), ranks))
    return out


def naive(rankings, *, k, average, counting):
    """The two scripts' loops: per relation, items and hits; macro = mean of relation accuracies."""
    per: dict[str, list[int]] = {}
    for r in rankings:
        items = [1] if counting == "query" else [1] * len(r.gold_ranks)
        if counting == "query":
            got = [any(x is not None and x <= k for x in r.gold_ranks)]
        else:
            got = [x is not None and x <= k for x in r.gold_ranks]
        n_h = per.setdefault(r.query.relation, [0, 0])
        n_h[0] += sum(items)
        n_h[1] += sum(got)
    if average == "micro":
        return sum(h for _, h in per.values()) / sum(n for n, _ in per.values())
    return sum(h / n for n, h in per.values()) / len(per)


@pytest.mark.parametrize("counting", list(metrics.COUNTINGS))
@pytest.mark.parametrize("average", ["macro", "micro"])
@pytest.mark.parametrize("k", [1, 5, 10])
def test_acc_at_k_equals_the_naive_loop(counting, average, k):
    rs = _rankings()
    assert metrics.acc_at_k(rs, k=k, average=average, counting=counting) == pytest.approx(
        naive(rs, k=k, average=average, counting=counting), abs=1e-12)


def test_triple_counting_gives_less_on_multi_gold_queries():
    """A query with several golds is one MedLAMA item but several LAMA triples, most of them missed."""
    q = Query("q", "s", "r", "[X] [Y]", golds=("a", "b", "c"))
    r = [Ranking(q, (), (), (), (1, 50, None))]
    assert metrics.acc_at_k(r, k=10, counting="query") == 1.0
    assert metrics.acc_at_k(r, k=10, counting="triple") == pytest.approx(1 / 3)


def test_summary_says_which_counting():
    s = metrics.summary(_rankings(), counting="triple")
    assert s["counting"] == "triple" and s["n_items"] == sum(len(r.gold_ranks) for r in _rankings())
    assert metrics.summary(_rankings())["counting"] == "query"
    with pytest.raises(ProbekitError, match="did you mean 'triple'"):
        metrics.summary(_rankings(), counting="triples")


def test_frames_and_compare_tables_count_the_same_way():
    rs = _rankings(1)
    frame = pd.DataFrame({"relation": [r.query.relation for r in rs], "best_gold_rank": [r.best_gold_rank for r in rs],
                          "gold_ranks": [list(r.gold_ranks) for r in rs]})
    for counting in metrics.COUNTINGS:
        table = compare.full_hard_table({"a": frame}, metrics=("acc@1", "acc@10"), counting=counting)
        assert set(table["counting"]) == {counting}  # one table, one rule
        micro = table[table.average == "micro"].iloc[0]
        assert micro["full acc@10"] == pytest.approx(naive(rs, k=10, average="micro", counting=counting))
        per = compare.relation_accuracy({"a": frame}, metric="acc@10", counting=counting).set_index("relation")
        for rel in per.index:
            mine = [r for r in rs if r.query.relation == rel]
            assert per.loc[rel, "value"] == pytest.approx(naive(mine, k=10, average="micro", counting=counting))


def test_depth_leaves_acc_above_it_undefined():
    q = Query("q", "s", "r", "[X] [Y]", golds=("a",))
    r = [Ranking(q, (0,), ("a",), (0.0,), (1,), depth=1)]
    assert metrics.acc_at_k(r, k=1) == 1.0 and math.isnan(metrics.acc_at_k(r, k=10))
    frame = pd.DataFrame({"relation": ["r"], "best_gold_rank": [1], "gold_ranks": [[1]]})
    table = compare.full_hard_table({"x": frame}, depths={"x": 1})
    assert table["full acc@1"].tolist() == [1.0, 1.0] and table["full acc@10"].isna().all()
    assert table["full MRR"].tolist() == [1.0, 1.0]  # MRR needs no depth: a one-answer method's MRR is its acc@1


def test_a_stored_run_records_its_counting(tiny_encoder, tiny_dataset, tmp_path, capsys):
    """Every stored run says which counting its numbers use: the listing, `runs show` and the export."""
    from probekit.bench import runs
    from probekit.cli.main import main
    from probekit.probes import get_probe

    rankings = get_probe("retrieval").rank(
        tiny_encoder, tiny_dataset.queries, tiny_dataset.candidates("heads+tails"), k=10)
    rid = runs.save_run(rankings, model=tiny_encoder, dataset=tiny_dataset, probe="retrieval", counting="triple")
    listed = runs.list_runs()
    row = listed[listed.run_id == rid].iloc[0]
    assert row["counting"] == "triple"
    assert row["micro acc@10"] == pytest.approx(metrics.acc_at_k(rankings, k=10, average="micro", counting="triple"))
    assert runs.load_run(rid).summary()["counting"] == "triple"
    assert main(["runs", "show", rid]) == 0
    assert "counting: triple" in capsys.readouterr().out
    assert main(["runs", "show", rid, "--counting", "query", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["counting"] == "query"
    out = runs.export_run(rid, tmp_path / "r.csv")
    assert set(pd.read_csv(out)["counting"]) == {"triple"}
