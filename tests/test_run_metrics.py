"""run_metrics: every table against a naive loop on hand-made frames, and against probekit.metrics."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest

from probekit import metrics
from probekit.bench import runs
from probekit.errors import ProbekitError
from probekit.metrics import compare as rm
from probekit.types import Query, Ranking

NAMES = [f"e{i}" for i in range(12)]


def make_frame(seed: int, n: int = 60, relations=("r1", "r2", "r3"), rank_pool=None) -> pd.DataFrame:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        rel = relations[i % len(relations)]
        rank = rnd.choice(rank_pool or [None, 1, 1, 2, 3, 5, 6, 9, 10, 11, 40])
        golds = [f"gold {rnd.randint(0, 9)}" * rnd.randint(1, 8)]
        rows.append({"query_id": f"{rel}:{i:03d}", "relation": rel, "subject": f"s{i}", "template": "[X] is [Y].",
                     "golds": golds, "best_gold_rank": rank, "hard": rnd.random() < 0.5,
                     "gold_length": float(np.mean([len(g) for g in golds])), "top_names": rnd.sample(NAMES, 10)})
    frame = pd.DataFrame(rows)
    frame["best_gold_rank"] = frame["best_gold_rank"].astype("Int64")
    return frame


def naive_acc(rows, k, average):
    hit = lambda r: r["best_gold_rank"] is not None and not pd.isna(r["best_gold_rank"]) and r["best_gold_rank"] <= k
    if not rows:
        return math.nan
    if average == "micro":
        return sum(hit(r) for r in rows) / len(rows)
    rels = sorted({r["relation"] for r in rows})
    per = [sum(hit(r) for r in rows if r["relation"] == rel) / sum(1 for r in rows if r["relation"] == rel)
           for rel in rels]
    return sum(per) / len(per)


def records(frame):
    return frame.to_dict("records")


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_accuracy_and_table4_shape(seed):
    frame = make_frame(seed)
    rows = records(frame)
    for k in (1, 5, 10):
        for avg in ("macro", "micro"):
            assert same(rm.accuracy(frame, k=k, average=avg), naive_acc(rows, k, avg))
    table = rm.full_hard_table({"A": frame, "B": make_frame(seed + 10)})
    names = metrics.metric_names()
    assert list(table.columns) == ["run", "average", "counting", *[f"full {n}" for n in names],
                                   *[f"hard-in-full {n}" for n in names], "n full", "n hard-in-full"]
    assert len(table) == 4
    row = table[(table.run == "A") & (table.average == "macro")].iloc[0]
    hard_rows = [r for r in rows if r["hard"]]
    for k in (1, 5, 10):
        assert same(row[f"full acc@{k}"], naive_acc(rows, k, "macro"))
        assert same(row[f"hard-in-full acc@{k}"], naive_acc(hard_rows, k, "macro"))
    assert row["n hard-in-full"] == len(hard_rows) and row["n full"] == len(rows)


def test_subsets_label_the_experiment():
    """The rule: "A full run's 'hard' block is a different experiment (hard queries ranked in the full
    vocabulary): keep it only if it is labelled so everywhere (tables, exports, charts)." Full-set runs have
    ``full`` and ``hard-in-full``; a hard-set run has ``hard`` only, and the two never share a column."""
    full, hard = make_frame(4), make_frame(5)
    assert rm.SUBSETS == ("full", "hard-in-full", "hard")
    n_hard = int(full["hard"].sum())
    assert len(rm.subset(full, "hard-in-full")) == n_hard and rm.subset(full, "hard").empty
    assert len(rm.subset(hard, "hard", hard_set=True)) == len(hard)  # every query of the hard set
    assert rm.subset(hard, "full", hard_set=True).empty and rm.subset(hard, "hard-in-full", hard_set=True).empty
    table = rm.full_hard_table({"F": full, "H": hard}, hard_set={"H"}).set_index(["run", "average"])
    assert table.loc[("F", "micro"), "n hard-in-full"] == n_hard and pd.isna(table.loc[("F", "micro"), "n hard"])
    assert table.loc[("H", "micro"), "n hard"] == len(hard) and pd.isna(table.loc[("H", "micro"), "full acc@1"])
    assert same(table.loc[("H", "macro"), "hard acc@10"], naive_acc(records(hard), 10, "macro"))
    per = rm.relation_accuracy({"F": full, "H": hard}, metric="acc@10", which="hard", hard_set={"H"})
    assert set(per.run) == {"H"}
    with pytest.raises(ProbekitError, match="unknown subset"):
        rm.subset(full, "hardest")


def test_agrees_with_probekit_metrics():
    frame = make_frame(3)
    rankings = []
    for r in records(frame):
        q = Query(r["query_id"], r["subject"], r["relation"], r["template"], golds=tuple(r["golds"]))
        rank = None if pd.isna(r["best_gold_rank"]) else int(r["best_gold_rank"])
        rankings.append(Ranking(q, tuple(range(10)), tuple(r["top_names"]), (0.0,) * 10, (rank,)))
    s = metrics.summary(rankings)
    for avg in ("macro", "micro"):
        for k in (1, 5, 10):
            assert rm.accuracy(frame, k=k, average=avg) == pytest.approx(s[avg][f"acc@{k}"])
    # and a frame built from the same rankings by runs.rankings_frame gives the same numbers
    again = runs.rankings_frame(rankings)
    assert rm.accuracy(again, k=5) == pytest.approx(s["macro"]["acc@5"])
    for name in metrics.metric_names():
        per = rm.relation_accuracy({"x": frame}, metric=name).set_index("relation")
        for rel, v in s["relations"].items():
            assert per.loc[rel, "value"] == pytest.approx(v[name]) and per.loc[rel, "n"] == v["n"]


def test_empty_and_bad_input():
    empty = make_frame(0).iloc[0:0]
    assert math.isnan(rm.accuracy(empty, k=1))
    with pytest.raises(ProbekitError, match="k must be"):
        rm.accuracy(make_frame(0), k=0)
    with pytest.raises(ProbekitError, match="average"):
        rm.accuracy(make_frame(0), k=1, average="weighted")
    with pytest.raises(ProbekitError, match="best_gold_rank"):
        rm.accuracy(pd.DataFrame({"relation": ["a"]}), k=1)
    with pytest.raises(ProbekitError, match="at least one run"):
        rm.full_hard_table({})
    with pytest.raises(ProbekitError, match="edges"):
        rm.length_bins([1], (10, 5))
    with pytest.raises(ProbekitError, match="no relation"):
        rm.relation_queries(make_frame(0), "nope", k=1)


def test_accuracy_by_length_against_naive_bins():
    frame = make_frame(4, n=90)
    edges = (0, 10, 20, 40)
    out = rm.accuracy_by_length({"A": frame}, edges=edges)
    assert list(out["bin"]) == ["0–10", "10–20", "20–40", "40+"]
    bounds = list(edges) + [math.inf]
    for i, row in out.iterrows():
        inside = [r for r in records(frame) if bounds[i] <= r["gold_length"] < bounds[i + 1]]
        assert row["n"] == len(inside)
        for k in (1, 5, 10):
            assert same(row[f"acc@{k}"], naive_acc(inside, k, "micro"))


def test_relation_queries_lists_hits():
    frame = make_frame(5)
    out = rm.relation_queries(frame, "r2", k=5)
    mine = [r for r in records(frame) if r["relation"] == "r2"]
    assert list(out.query_id) == [r["query_id"] for r in mine]
    assert list(out["hit@5"]) == [not pd.isna(r["best_gold_rank"]) and r["best_gold_rank"] <= 5 for r in mine]
    assert list(out["top-1"]) == [r["top_names"][0] for r in mine]


def naive_spearman(x, y):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        out = [0.0] * len(v)
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for t in range(i, j + 1):
                out[order[t]] = (i + j) / 2 + 1
            i = j + 1
        return out

    return float(np.corrcoef(ranks(x), ranks(y))[0, 1])


def naive_kendall_b(x, y):
    conc = disc = tx = ty = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            tx += 1
        elif dy == 0:
            ty += 1
        elif dx == dy:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / math.sqrt((conc + disc + tx) * (conc + disc + ty))


def test_compare_two_runs_against_naive_loops():
    a, b = make_frame(6), make_frame(7)
    b = b.iloc[5:].copy()  # b lacks some queries
    b["subject"] = a["subject"].iloc[5:].to_numpy()
    b["golds"] = list(a["golds"].iloc[5:])
    shared = list(zip(records(a)[5:], records(b)))
    hit = lambda r, k: not pd.isna(r["best_gold_rank"]) and r["best_gold_rank"] <= k
    k = 5
    hm = rm.hit_miss(a, b, k=k)
    assert list(hm.query_id) == [x["query_id"] for x, y in shared if hit(x, k) and not hit(y, k)]
    agree = rm.rank_agreement(a, b, k=k)
    assert agree["n"] == len(shared)
    assert agree["both"] == sum(hit(x, k) and hit(y, k) for x, y in shared)
    assert agree["only_a"] == len(hm)
    assert agree["only_b"] == sum(hit(y, k) and not hit(x, k) for x, y in shared)
    assert agree["both"] + agree["only_a"] + agree["only_b"] + agree["neither"] == len(shared)
    ranked = [(x["best_gold_rank"], y["best_gold_rank"]) for x, y in shared
              if not pd.isna(x["best_gold_rank"]) and not pd.isna(y["best_gold_rank"])]
    xs, ys = [float(p) for p, _ in ranked], [float(q) for _, q in ranked]
    assert agree["n_ranked"] == len(ranked)
    assert agree["spearman"] == pytest.approx(naive_spearman(xs, ys))
    assert agree["kendall"] == pytest.approx(naive_kendall_b(xs, ys))
    assert agree["top1_agreement"] == pytest.approx(np.mean([x["top_names"][0] == y["top_names"][0]
                                                             for x, y in shared]))
    jac = [len(set(x["top_names"][:k]) & set(y["top_names"][:k])) / len(set(x["top_names"][:k]) |
                                                                        set(y["top_names"][:k])) for x, y in shared]
    assert agree["jaccard"] == pytest.approx(np.mean(jac))
    table = rm.agreement_table({"A": a, "B": b, "C": a}, k=k)
    assert list(zip(table.a, table.b)) == [("A", "B"), ("A", "C"), ("B", "C")]
    self_row = table.iloc[1]
    assert self_row.spearman == pytest.approx(1.0) and self_row.only_a == 0 and self_row.jaccard == 1.0


def test_relation_differences():
    a, b = make_frame(8), make_frame(9, relations=("r1", "r2", "r4"))
    out = rm.relation_differences({"A": a, "B": b}, metric="acc@10")
    assert list(out.index) == ["r1", "r2", "r3", "r4", "macro"]
    for rel in ("r1", "r2"):
        na = naive_acc([r for r in records(a) if r["relation"] == rel], 10, "micro")
        nb = naive_acc([r for r in records(b) if r["relation"] == rel], 10, "micro")
        assert out.loc[rel, "A"] == pytest.approx(na) and out.loc[rel, "Δ B"] == pytest.approx(nb - na)
    assert math.isnan(out.loc["r3", "B"]) and math.isnan(out.loc["r4", "A"])
    assert out.loc["macro", "A"] == pytest.approx(naive_acc(records(a), 10, "macro"))


def test_short_labels():
    labels = {"a": "M · d · cosine [1]", "b": "M · d · l2 [2]", "c": "M · e · l2 [3]"}
    assert rm.short_labels(labels) == {"a": "d · cosine [1]", "b": "d · l2 [2]", "c": "e · l2 [3]"}
    assert rm.short_labels({"a": "x · y"}) == {"a": "x · y"}
    same = {"a": "M · d", "b": "M · d"}  # nothing tells them apart: keep the full labels
    assert rm.short_labels(same) == same
