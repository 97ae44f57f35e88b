"""Intervals on every score (probekit.metrics.intervals), each rule against its definition: Wilson's closed form
(centre (p + z²/2n) / (1 + z²/n), half-width z / (1 + z²/n) · sqrt(p(1-p)/n + z²/4n²)) and its coverage; the
bootstrap resamples queries within relations, is seeded, and holds the score it brackets."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import TINY_TRIPLES
from scipy import stats

from probekit import metrics
from probekit.metrics import intervals as iv


def naive_wilson(x: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    p = x / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


@pytest.mark.parametrize("x, n", [(0, 10), (5, 10), (10, 10), (3, 113), (1, 1), (400, 19000)])
def test_wilson_is_its_closed_form(x, n):
    lo, hi = iv.wilson(x, n)
    want = naive_wilson(x, n)
    assert lo == pytest.approx(max(0.0, want[0]), abs=1e-12) and hi == pytest.approx(min(1.0, want[1]), abs=1e-12)
    assert 0 <= lo <= x / n <= hi <= 1
    assert all(math.isnan(v) for v in iv.wilson(0, 0))


def test_wilson_covers_about_as_often_as_it_says():
    """p = 0.3, n = 200, 2,000 draws: the 95 % interval holds p in 93-97 % of them (Wilson is close to nominal)."""
    rng = np.random.default_rng(0)
    hits = rng.binomial(200, 0.3, size=2000)
    covered = np.mean([lo <= 0.3 <= hi for lo, hi in (iv.wilson(int(h), 200) for h in hits)])
    assert 0.93 <= covered <= 0.97


def test_every_metric_gets_an_interval_that_holds_its_score():
    rng = np.random.default_rng(1)
    ranks = [[int(r)] if r < 60 else [None] for r in rng.integers(1, 80, 600)]
    rels = [f"r{i % 4}" for i in range(600)]
    got = iv.intervals(ranks, rels, n_boot=400, seed=3)
    for name in metrics.metric_names():
        for average in ("macro", "micro"):
            value = metrics.metric_value(ranks, rels, metric=name, average=average)
            lo, hi = got[average][name]
            assert lo <= value <= hi and hi - lo < 0.2, (name, average, lo, value, hi)
    assert got == iv.intervals(ranks, rels, n_boot=400, seed=3)  # seeded
    one = iv.intervals([[1]], ["r"], metrics=["acc@10"], depth=1)  # a one-answer method has no acc@10
    assert all(math.isnan(v) for v in one["micro"]["acc@10"])


def test_the_bootstrap_matches_the_normal_approximation_on_many_queries():
    """One relation, 3,000 queries: the percentile interval of MRR is close to mean ± 1.96 sd / sqrt(n)."""
    rng = np.random.default_rng(2)
    r = rng.integers(1, 40, 3000)
    got = iv.intervals([[int(x)] for x in r], ["r"] * 3000, metrics=["MRR"], n_boot=2000, seed=0)
    rr = 1 / r
    half = 1.96 * rr.std(ddof=1) / math.sqrt(len(rr))
    lo, hi = got["micro"]["MRR"]
    assert lo == pytest.approx(rr.mean() - half, abs=0.1 * half) and hi == pytest.approx(rr.mean() + half,
                                                                                           abs=0.1 * half)


def test_bench_and_runs_show_state_the_intervals(capsys, tmp_path, tiny_encoder_dir):
    from probekit.cli.main import main

    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    base = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts), "--quiet"]
    assert main([*base, "--format", "json", "--save"]) == 0
    data = json.loads(capsys.readouterr().out)
    ci = data["intervals"]
    assert set(ci["micro"]) == set(data["micro"]) and ci["confidence"] == 0.95 and "Wilson" in ci["method"]
    for name, (lo, hi) in ci["micro"].items():
        assert lo <= data["micro"][name] <= hi
    assert main(["runs", "show", data["run_id"]]) == 0
    out = capsys.readouterr().out
    assert "95 % interval, macro: acc@1 [" in out and "Wilson for a share of items" in out


def test_a_binary_metric_resamples_hit_counts_as_queries_resampled():
    """Resampling a relation's n one-item 0/1 queries with replacement makes its hit count Binomial(n, hits/n):
    the shortcut's quantiles are those of the resampled queries (drawn as indices, 4,000 resamples each)."""
    rng = np.random.default_rng(4)
    hits = (rng.random(300) < 0.3).astype(float)
    rels = np.array([f"r{i % 3}" for i in range(300)], dtype=object)
    fast = iv._resampled(np.ones(300), hits, rels, average="macro", n_boot=4000, rng=np.random.default_rng(0))
    draw = np.random.default_rng(1)
    naive = np.mean([hits[idx][draw.integers(0, len(idx), size=(4000, len(idx)))].mean(axis=1)
                     for idx in (np.flatnonzero(rels == r) for r in ("r0", "r1", "r2"))], axis=0)
    assert np.quantile(fast, [0.025, 0.5, 0.975]) == pytest.approx(np.quantile(naive, [0.025, 0.5, 0.975]), abs=0.006)


def test_a_rank_table_gets_each_groups_interval():
    """A layer sweep's table (one row per layer and relation: its queries' best ranks) gives each layer the
    intervals of its queries; a table stored before ranks were kept gives acc@k's from its hit counts, the same."""
    import pandas as pd

    rng = np.random.default_rng(5)
    rows = [{"layer": layer, "relation": rel, "subset": "full", "n": 40,
             "ranks": [int(r) if r < 30 else None for r in rng.integers(1, 40 - 10 * layer, 40)]}
            for layer in (1, 2) for rel in ("a", "b")]
    table = pd.DataFrame(rows)
    table["hits@5"] = [sum(r is not None and r <= 5 for r in ranks) for ranks in table["ranks"]]
    got = iv.rank_table_intervals(table, by="layer", metric="acc@5", n_boot=300, subset="full").set_index("layer")
    for layer, part in table.groupby("layer"):
        ranks = [[r] for rs in part["ranks"] for r in rs]
        rels = [rel for rel, rs in zip(part["relation"], part["ranks"]) for _ in rs]
        want = iv.intervals(ranks, rels, metrics=["acc@5"], n_boot=300)
        for a in ("macro", "micro"):
            assert (got.loc[layer, f"{a} lo"], got.loc[layer, f"{a} hi"]) == tuple(want[a]["acc@5"])
            assert got.loc[layer, f"{a} [lo, hi]"] == iv.bracket(*want[a]["acc@5"])
    old = iv.rank_table_intervals(table.drop(columns="ranks"), by="layer", metric="acc@5", n_boot=300)
    assert old.drop(columns="layer").equals(got.reset_index().drop(columns="layer"))
    mrr = iv.rank_table_intervals(table.drop(columns="ranks"), by="layer", metric="MRR")
    assert mrr["macro [lo, hi]"].tolist() == ["–", "–"]  # no ranks: MRR cannot be said


def _frame(seed: int, n: int = 90):
    import pandas as pd

    rng = np.random.default_rng(seed)
    ranks = [int(r) if r < 30 else None for r in rng.integers(1, 40, n)]
    return pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "relation": [f"r{i % 3}" for i in range(n)],
                         "best_gold_rank": pd.array(ranks, dtype="Int64"), "hard": rng.random(n) < 0.4})


def test_the_benchmark_tables_get_their_intervals_in_their_shape():
    """Each value of the Table 4 shape (full_hard_table) and of the per-relation bars (relation_accuracy) has its
    interval in the same row; a relation's acc@k interval is Wilson's of its hits (one relation, micro)."""
    from probekit.metrics import compare as rm

    runs = {"A": _frame(0), "B": _frame(1)}
    table = rm.full_hard_table(runs, metrics=["acc@10", "MRR"]).set_index(["run", "average"])
    got = iv.full_hard_intervals(runs, metrics=["acc@10", "MRR"], n_boot=200).set_index(["run", "average"])
    assert list(got.index) == list(table.index)
    for s in ("full", "hard-in-full"):
        for name in ("acc@10", "MRR"):
            for key in table.index:
                lo, hi = map(float, got.loc[key, f"{s} {name} [lo, hi]"].strip("[]").split(", "))
                assert lo - 0.05 <= 100 * table.loc[key, f"{s} {name}"] <= hi + 0.05, (key, s, name)
    per = rm.relation_accuracy(runs, metric="acc@10")
    bars = iv.relation_intervals(runs, metric="acc@10")
    assert bars[["run", "relation"]].equals(per[["run", "relation"]])
    for r, b in zip(per.itertuples(), bars.itertuples()):
        assert (b.lo, b.hi) == iv.wilson(round(r.value * r.n), r.n)


def test_expert_accuracy_gets_its_intervals_in_its_rows():
    """The Results page's per-query acc@k (gold, expert, either): each value in its interval, a relation's and
    all queries' share by Wilson's rule, the macro one by the bootstrap."""
    from test_agreement import _paper_set

    from probekit.metrics import agreement

    answers, scores, queries = _paper_set()
    table = agreement.expert_accuracy(queries, answers, scores).set_index(["k", "relation"])
    got = agreement.expert_accuracy_intervals(queries, answers, scores, n_boot=300).set_index(["k", "relation"])
    assert list(got.index) == list(table.index)
    for key, row in table.iterrows():
        for col in ("gold acc", "expert acc (≥5)", "gold or expert acc"):
            lo, hi = map(float, got.loc[key, f"{col} [lo, hi]"].strip("[]").split(", "))
            assert lo - 0.05 <= 100 * row[col] <= hi + 0.05, (key, col)
            if key[1] != "macro":
                assert got.loc[key, f"{col} [lo, hi]"] == iv.bracket(*iv.wilson(round(row[col] * row["n"]), row["n"]))
