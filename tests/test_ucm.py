"""Rank change (RC) and UCM metrics against hand-computed numbers and a naive loop."""

import math
import random

import pytest

from probekit import metrics
from probekit.errors import ProbekitError

# One triple worked by hand. O_t = T, O_cor = {A, B}, O_incor = {X}; A is added twice.
RANKS = [
    {"T": 10, "A": 7, "B": 3, "X": 5},  # input_0: the prompt alone
    {"T": 4, "A": 7, "B": 3, "X": 5},  # + S1 (holds T itself)
    {"T": 2, "A": 1, "B": 3, "X": 6},  # + A (cor)
    {"T": 2, "A": 3, "B": 4, "X": 1},  # + X (incor)
    {"T": 5, "A": 2, "B": 1, "X": 3},  # + B (cor)
    {"T": 5, "A": 1, "B": 2, "X": 3},  # + A again (cor)
]
ADDED = [None, "T", "A", "X", "B", "A"]


def _rows():
    return metrics.rank_changes(RANKS, ADDED, target="T", correct=["A", "B", "T"])


def test_rank_changes_by_hand():
    rows = _rows()
    got = [(r["step"], r["added_role"], r["rank_target"], r["rank_added"], r["mean_rank_cor"], r["mean_rank_incor"],
            r["rc_target"], r["rc_added"], r["rc_cor"], r["rc_incor"]) for r in rows]
    assert got == [
        (0, None, 10, None, None, None, None, None, None, None),
        (1, "target", 4, 4, None, None, -6, -6, None, None),
        (2, "cor", 2, 1, 1, None, -2, -6, None, None),  # no O_cor present before step 2
        (3, "incor", 2, 1, 3, 1, 0, -5, 2, None),  # A: 1 -> 3
        (4, "cor", 5, 1, 1.5, 3, 3, -3, -1, 2),  # A: 3 -> 2; X: 1 -> 3
        (5, "cor", 5, 1, 1.5, 3, 0, -1, 0, 0),  # A: 2 -> 1, B: 1 -> 2 (mean 0); X: 3 -> 3
    ]


def test_ucm_by_hand_and_ties():
    # cor steps: 2 (RC -2: U), 4 (+3: M), 5 (0, a tie in rank: C)
    assert metrics.ucm(_rows()) == {"U": 1 / 3, "C": 1 / 3, "M": 1 / 3, "n": 3}
    # two entities tied at the same rank before and after: RC 0 counts as Confuse
    tied = metrics.rank_changes([{"t": 2, "a": 2}, {"t": 2, "a": 2}], [None, "a"], target="t", correct=["a"])
    assert tied[1]["rc_target"] == 0 and metrics.ucm(tied) == {"U": 0.0, "C": 1.0, "M": 0.0, "n": 1}


def test_ucm_k_and_ucm_m_micro_macro():
    r1 = [{**r, "relation": "r1"} for r in _rows()]
    r2 = [{"relation": "r2", "added_role": role, "rc_target": rc}
          for role, rc in (("cor", -1), ("cor", -4), ("incor", 7), (None, None))]
    k = metrics.ucm_k(r1 + r2)
    assert k == {"r1": {"U": 1 / 3, "C": 1 / 3, "M": 1 / 3, "n": 3}, "r2": {"U": 1.0, "C": 0.0, "M": 0.0, "n": 2}}
    assert metrics.ucm_m(r1 + r2) == {"U": 3 / 5, "C": 1 / 5, "M": 1 / 5, "n": 5}
    macro = metrics.ucm_m(r1 + r2, average="macro")
    assert macro["U"] == pytest.approx(2 / 3) and macro["C"] == pytest.approx(1 / 6)
    assert macro["M"] == pytest.approx(1 / 6) and macro["n"] == 5
    with pytest.raises(ProbekitError, match="average"):
        metrics.ucm_m(r1, average="mean")


def test_no_kept_step_gives_nan():
    u = metrics.ucm([{"added_role": "incor", "rc_target": -1}])
    assert u["n"] == 0 and all(math.isnan(u[x]) for x in "UCM")
    assert metrics.ucm_m([], average="macro")["n"] == 0


def test_names_compared_normalised_and_length_checked():
    rows = metrics.rank_changes([{"Heart  Failure": 3, "Edema": 4}, {"heart failure": 1, "edema": 2}],
                                [None, "EDEMA"], target="heart failure", correct=["Edema"])
    assert rows[1]["added_role"] == "cor" and rows[1]["rc_target"] == -2 and rows[1]["rc_added"] == -2
    with pytest.raises(ProbekitError, match="same length"):
        metrics.rank_changes(RANKS, ADDED[:-1], target="T", correct=[])
    assert metrics.rank_changes([], [], target="T", correct=[]) == []


def _naive(ranks, added, target, correct):
    """Straight from the definitions (Yao et al.), one entity at a time."""
    out = []
    for n in range(1, len(ranks)):
        before = set(added[1:n])
        cor_before = [e for e in before if e in correct and e != target]
        inc_before = [e for e in before if e not in correct and e != target]
        rc_cor = [ranks[n][e] - ranks[n - 1][e] for e in cor_before]
        rc_inc = [ranks[n][e] - ranks[n - 1][e] for e in inc_before]
        role = "target" if added[n] == target else "cor" if added[n] in correct else "incor"
        out.append((ranks[n][target] - ranks[n - 1][target], ranks[n][added[n]] - ranks[n - 1][added[n]],
                    sum(rc_cor) / len(rc_cor) if rc_cor else None, sum(rc_inc) / len(rc_inc) if rc_inc else None,
                    role))
    return out


def test_against_naive_loop_on_random_sequences():
    """Yao et al.: O_cor are the entities that "also satisfy the same relation with S", and "O_t belongs to
    O_{cor}": a step re-adding O_t after S1 (step 1, O_t's own segment) is an O_cor step, unless
    ``target_mentions=False``."""
    rng = random.Random(7)
    all_rows, naive_counts, cor_only = [], {"U": 0, "C": 0, "M": 0}, {"U": 0, "C": 0, "M": 0}
    for _trial in range(40):
        ents = ["t"] + [f"e{i}" for i in range(rng.randint(1, 6))]
        correct = {e for e in ents[1:] if rng.random() < 0.5}
        added = [None, "t"] + [rng.choice(ents) for _ in range(rng.randint(0, 7))]
        ranks = [{e: rng.randint(1, 4) for e in ents} for _ in added]  # small range: many ties
        rows = metrics.rank_changes(ranks, added, target="t", correct=correct)
        got = [(r["rc_target"], r["rc_added"], r["rc_cor"], r["rc_incor"], r["added_role"]) for r in rows[1:]]
        want = _naive(ranks, added, "t", correct)
        for step, (g, w) in enumerate(zip(got, want), start=1):
            assert g[:2] == w[:2] and g[4] == w[4]
            assert (g[2] is None) == (w[2] is None) and (g[2] is None or g[2] == pytest.approx(w[2]))
            assert (g[3] is None) == (w[3] is None) and (g[3] is None or g[3] == pytest.approx(w[3]))
            cell = "U" if w[0] < 0 else "C" if w[0] == 0 else "M"
            if w[4] == "cor" or (w[4] == "target" and step > 1):
                naive_counts[cell] += 1
            if w[4] == "cor":
                cor_only[cell] += 1
        all_rows += rows
    n = sum(naive_counts.values())
    assert n > 0
    assert metrics.ucm(all_rows) == {**{k: v / n for k, v in naive_counts.items()}, "n": n}
    m = sum(cor_only.values())
    assert 0 < m < n  # the random sequences re-add O_t
    assert metrics.ucm(all_rows, target_mentions=False) == {**{k: v / m for k, v in cor_only.items()}, "n": m}
