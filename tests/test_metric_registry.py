"""The metric registry's contract, checked for every entry: each metric is a pure function of gold ranks, equal to a
naive loop of its stated rule under both countings and both averages, NaN on no items and above the depth it
needs; and a metric added by one registration reaches summaries, run tables and the bench command.

The rules (probekit.metrics.registry): an item scores ``1 if r <= k`` for acc@k and ``1 / r`` for MRR, a gold
without a rank scoring 0; "query" counting scores a query by its best gold, "triple" counting scores each gold;
macro is the mean over relations of each relation's mean item score, micro the mean over all items."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from conftest import TINY_TRIPLES

from probekit import metrics
from probekit.errors import ProbekitError, UnknownNameError
from probekit.metrics import compare
from probekit.metrics.registry import METRICS, Metric, register, unregister
from probekit.types import Query, Ranking


def naive_item(name: str, rank) -> float:
    """One item's score by the rule the registry's docstring states, written out."""
    if rank is None:
        return 0.0
    if name == "MRR":
        return 1.0 / rank
    if name.startswith("acc@"):
        return 1.0 if rank <= int(name[4:]) else 0.0
    raise AssertionError(f"no naive rule written for {name!r}: add one with the metric")


def naive(name: str, queries: list[tuple[str, list]], *, average: str, counting: str) -> float:
    per_rel: dict[str, list[float]] = {}
    for rel, golds in queries:
        if counting == "query":
            ranked = [g for g in golds if g is not None]
            per_rel.setdefault(rel, []).append(naive_item(name, min(ranked) if ranked else None))
        else:
            for g in golds:
                per_rel.setdefault(rel, []).append(naive_item(name, g))
    if average == "micro":
        every = [s for scores in per_rel.values() for s in scores]
        return sum(every) / len(every) if every else math.nan
    means = [sum(s) / len(s) for s in per_rel.values() if s]
    return sum(means) / len(means) if means else math.nan


def random_queries(seed: int, n: int = 200) -> list[tuple[str, list]]:
    rng = random.Random(seed)
    return [(f"r{rng.randrange(5)}", [rng.choice([None, rng.randrange(1, 30), rng.randrange(1, 4)])
                                      for _ in range(rng.randrange(0, 4))]) for _ in range(n)]


@pytest.mark.parametrize("name", list(METRICS))
@pytest.mark.parametrize("counting", list(metrics.COUNTINGS))
@pytest.mark.parametrize("average", ["macro", "micro"])
def test_every_metric_equals_its_naive_loop(name, counting, average):
    for seed in range(3):
        queries = random_queries(seed)
        got = metrics.metric_value([g for _, g in queries], [r for r, _ in queries], metric=name, average=average,
                                   counting=counting)
        assert got == pytest.approx(naive(name, queries, average=average, counting=counting), rel=1e-12)


@pytest.mark.parametrize("name", list(METRICS))
def test_every_metric_is_nan_on_nothing_and_above_its_depth(name):
    m = METRICS[name]
    assert isinstance(m, Metric) and m.name == name and m.description
    assert math.isnan(metrics.metric_value([], [], metric=name))
    assert math.isnan(metrics.metric_value([[]], ["r"], metric=name, counting="triple"))  # no triple to count
    one_answer = metrics.metric_value([[1]], ["r"], metric=name, depth=1)
    if m.depth is not None and m.depth > 1:
        assert math.isnan(one_answer)  # needs more answers than the method gives
    else:
        assert one_answer == 1.0
    scores = m.score(np.array([1.0, 2.0, 50.0, np.nan]))
    assert ((0 <= scores) & (scores <= 1)).all() and scores[0] == 1.0 and scores[3] == 0.0  # a rank-1 gold scores 1


@pytest.mark.parametrize("name", list(METRICS))
def test_every_metric_reaches_summaries_and_tables(name):
    q = [Query(f"q{i}", "s", rel, "[X] [Y]", golds=("g",)) for i, rel in enumerate("aab")]
    rankings = [Ranking(qq, (0,), ("g",), (1.0,), (rank,)) for qq, rank in zip(q, (1, 3, None))]
    s = metrics.summary(rankings)
    assert name in s["metrics"] and name in s["macro"] and name in s["relations"]["a"]
    frame = compare.pd.DataFrame({"relation": list("aab"), "best_gold_rank": [1, 3, None]})
    assert s["micro"][name] == pytest.approx(compare.value(frame, metric=name, average="micro"))
    assert f"full {name}" in compare.full_hard_table({"x": frame}).columns


def test_unknown_metrics_say_what_exists():
    with pytest.raises(UnknownNameError, match="unknown metric 'MMR'; did you mean 'MRR'; available: "):
        metrics.get_metric("MMR")
    assert metrics.get_metric("mrr").name == "MRR" and metrics.get_metric("acc@3").depth == 3
    with pytest.raises(ProbekitError, match="unknown metric 'acc@0'"):
        metrics.get_metric("acc@0")


def test_a_new_metric_is_one_registration(capsys, tmp_path, tiny_encoder_dir):
    """Registering a metric (here hits among the top 2, under a new name) is all it takes for the summary, the
    run tables and ``bench`` to show it."""
    from probekit.cli.main import main

    triples_file = tmp_path / "facts.csv"
    triples_file.write_text(TINY_TRIPLES)
    register(Metric("top2", "gold within the top 2", lambda r: (r <= 2).astype(float), depth=2))
    try:
        assert "top2" in metrics.metric_names() and "top2" not in metrics.metric_names(depth=1)
        code = main(["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(triples_file),
                     "--probe", "retrieval", "--format", "json", "--quiet"])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and "top2" in out["metrics"]
        for avg in ("macro", "micro"):  # hits within 2 lie between hits at 1 and hits within 5
            assert out[avg]["acc@1"] <= out[avg]["top2"] <= out[avg]["acc@5"]
    finally:
        unregister("top2")
    assert "top2" not in metrics.metric_names()
