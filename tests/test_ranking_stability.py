"""Does a model ranking hold across conditions (probekit.metrics.stability)? The rule: each condition's queries
resampled with replacement within each relation, one draw shared by the condition's models; Kendall's tau-b
(Kendall 1945's tie correction of Kendall 1938's tau; scipy.stats.kendalltau's default variant) averaged over the
compared condition pairs; a pair of models "holds" when every condition keeps its reference order in at least
1 - alpha of the resamples. Checked against a naive loop over resamples and on planted rankings."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from probekit.errors import ProbekitError
from probekit.metrics.stability import kendall_tau_b, ranking_stability


def planted(rates: dict[str, list[float]], *, n: int = 300, relations: int = 3, seed: int = 0) -> pd.DataFrame:
    """One row per (model, condition, query): a hit (score 1) with the model's rate in that condition."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(len(next(iter(rates.values())))):
        for model, per_condition in rates.items():
            hit = rng.random(n) < per_condition[c]
            rows.append(pd.DataFrame({"model": model, "condition": f"c{c}", "query_id": [f"q{i:04d}" for i in range(n)],
                                      "relation": [f"r{i % relations}" for i in range(n)], "score": hit.astype(float)}))
    return pd.concat(rows, ignore_index=True)


def naive(table: pd.DataFrame, *, n_boot: int, seed: int, alpha: float, average: str = "macro") -> dict:
    """The rule written as loops: the same draws (per condition, per relation, one (n_boot, n_r) block), then every
    score, tau and verdict computed resample by resample."""
    rng = np.random.default_rng(seed)
    conditions, models = list(dict.fromkeys(table.condition)), list(dict.fromkeys(table.model))
    boot = np.zeros((len(conditions), n_boot, len(models)))
    full = np.zeros((len(conditions), len(models)))
    for ci, c in enumerate(conditions):
        part = table[table.condition == c]
        ids = sorted(set(part.query_id))
        rel = part[part.model == models[0]].set_index("query_id").loc[ids, "relation"].tolist()
        hit = {m: part[part.model == m].set_index("query_id").loc[ids, "score"].tolist() for m in models}
        groups = {r: [i for i, x in enumerate(rel) if x == r] for r in dict.fromkeys(rel)}
        draws = {r: rng.integers(0, len(idx), size=(n_boot, len(idx))) for r, idx in groups.items()}

        def score(m, picks, hit=hit):  # picks: relation -> query indices
            per = [sum(hit[m][i] for i in p) / len(p) for p in picks.values()]
            return sum(per) / len(per) if average == "macro" else (
                sum(sum(hit[m][i] for i in p) for p in picks.values()) / sum(len(p) for p in picks.values()))

        for mi, m in enumerate(models):
            full[ci, mi] = score(m, groups)
            for b in range(n_boot):
                boot[ci, b, mi] = score(m, {r: [idx[j] for j in draws[r][b]] for r, idx in groups.items()})

    def tau(x, y):
        if len(x) < 3 or len(set(x)) == 1 or len(set(y)) == 1:
            return float("nan")
        return float(stats.kendalltau(x, y).statistic)

    pairs_c = list(itertools.combinations(range(len(conditions)), 2))
    taus = []
    for b in range(n_boot):
        got = [tau(boot[a, b], boot[c, b]) for a, c in pairs_c]
        got = [t for t in got if t == t]
        taus.append(sum(got) / len(got) if got else float("nan"))
    mean = full.mean(axis=0)
    verdicts, held = [], []
    for i, j in itertools.combinations(range(len(models)), 2):
        base = np.sign(mean[i] - mean[j])
        h = sum(all(np.sign(boot[c, b, i] - boot[c, b, j]) == base for c in range(len(conditions)))
                for b in range(n_boot))
        kept = [sum(np.sign(boot[c, b, i] - boot[c, b, j]) == base for b in range(n_boot)) / n_boot
                for c in range(len(conditions))]
        held.append(h)
        verdicts.append("holds" if h >= (1 - alpha) * n_boot else "flips" if min(kept) <= alpha else "uncertain")
    return {"taus": np.array(taus), "full": full, "held": held, "verdicts": verdicts}


@pytest.mark.parametrize("average", ["macro", "micro"])
def test_the_resampling_is_the_naive_loops(average):
    table = planted({"x": [0.6, 0.5, 0.55], "y": [0.5, 0.55, 0.4], "z": [0.3, 0.45, 0.5]}, n=60, seed=1)
    got = ranking_stability(table, n_boot=40, seed=3, alpha=0.1, average=average)
    want = naive(table, n_boot=40, seed=3, alpha=0.1, average=average)
    np.testing.assert_allclose(got["scores"].to_numpy(), want["full"])
    defined = want["taus"][~np.isnan(want["taus"])]
    assert got["defined"] == len(defined)
    assert (got["lo"], got["hi"]) == pytest.approx(tuple(np.quantile(defined, [0.05, 0.95])))
    assert got["pairs"]["held"].tolist() == want["held"]
    assert got["pairs"]["verdict"].tolist() == want["verdicts"]
    assert got["tau"] == pytest.approx(np.mean([stats.kendalltau(want["full"][a], want["full"][b]).statistic
                                                for a, b in itertools.combinations(range(3), 2)]))


def test_a_clear_ranking_holds_in_19_of_20_resamples_and_a_coin_flip_does_not():
    clear = planted({"x": [0.8, 0.75, 0.85, 0.8], "y": [0.5, 0.5, 0.55, 0.45], "z": [0.2, 0.25, 0.15, 0.2]})
    held = ranking_stability(clear, n_boot=200, seed=0)
    assert set(held["pairs"]["verdict"]) == {"holds"} and (held["pairs"]["holds"] >= 19 / 20).all()
    assert held["tau"] == pytest.approx(1.0) and held["lo"] == pytest.approx(1.0)
    assert held["pairs"]["in resamples"].str.fullmatch(r"order kept in \d+/200 resamples").all()
    coin = planted({"x": [0.5] * 4, "y": [0.5] * 4, "z": [0.5] * 4}, seed=2)
    tossed = ranking_stability(coin, n_boot=200, seed=0)
    assert "holds" not in set(tossed["pairs"]["verdict"]) and (tossed["pairs"]["holds"] < 19 / 20).all()
    assert tossed["lo"] < 0 < tossed["hi"]


def test_a_condition_that_reverses_the_ranking_flips_against_a_reference():
    table = planted({"x": [0.8, 0.2], "y": [0.2, 0.8]}, seed=4)
    held = ranking_stability(table, reference="c0", n_boot=100, seed=0)
    pair = held["pairs"].iloc[0]
    assert pair["verdict"] == "flips" and pair["flips in"] == "c1" and pair["kept in c0"] == 1.0
    assert held["taus"]["condition a"].tolist() == ["c0"] and np.isnan(held["tau"])  # two models: undefined


def test_tau_b_is_scipys_with_ties():
    rng = np.random.default_rng(0)
    for _ in range(50):
        x, y = rng.integers(0, 4, size=6), rng.integers(0, 4, size=6)
        want = stats.kendalltau(x, y).statistic
        got = float(kendall_tau_b(x, y))
        assert (np.isnan(got) and np.isnan(want)) or got == pytest.approx(want)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.drop(columns="relation"), "needs a 'relation' column"),
    (lambda t: t[t.condition == "c0"], "at least two conditions"),
    (lambda t: t[t.model == "x"], "at least two models"),
])
def test_bad_tables_get_one_clear_line(change, message):
    table = planted({"x": [0.5, 0.5], "y": [0.4, 0.4]}, n=20)
    with pytest.raises(ProbekitError, match=message):
        ranking_stability(change(table))
    with pytest.raises(ProbekitError, match="unknown reference condition 'c9'.*available: c0, c1"):
        ranking_stability(table, reference="c9")
