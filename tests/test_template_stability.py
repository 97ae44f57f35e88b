"""Does a model ranking hold (probekit.templates.stability)? Planted rankings: one that holds by a wide margin, one
that flips, and one whose change is within the noise of the prompts; the resampling against its rule (prompts
resampled within relations, the same draw for every model of a kind, Kendall's tau-b between the kinds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from probekit.errors import ProbekitError
from probekit.templates.stability import ranking_stability


def runs(rates: dict[str, float], *, n: int = 600, seed: int = 0, relations: int = 3) -> dict[str, pd.DataFrame]:
    """One results frame per model over the same ``n`` prompts, each a hit (rank 1) with the model's rate."""
    rng = np.random.default_rng(seed)
    ids, rels = [f"q{i}" for i in range(n)], [f"r{i % relations}" for i in range(n)]
    return {m: pd.DataFrame({"query_id": ids, "relation": rels,
                             "best_gold_rank": np.where(rng.random(n) < rate, 1, 40)}) for m, rate in rates.items()}


def test_a_wide_ranking_holds_and_a_reversed_one_flips():
    a = runs({"x": 0.7, "y": 0.45, "z": 0.2})
    same = runs({"x": 0.65, "y": 0.4, "z": 0.15}, seed=1)
    held = ranking_stability(a, same, n_boot=300, seed=0)
    assert held["tau"] == pytest.approx(1.0) and held["lo"] == pytest.approx(1.0)
    assert set(held["pairs"]["verdict"]) == {"holds"} and (held["pairs"]["holds"] == 1.0).all()
    reversed_ = runs({"x": 0.15, "y": 0.4, "z": 0.65}, seed=2)
    flipped = ranking_stability(a, reversed_, n_boot=300, seed=0)
    assert flipped["tau"] == pytest.approx(-1.0) and set(flipped["pairs"]["verdict"]) == {"flips"}


def test_a_change_within_the_noise_is_uncertain():
    a = runs({"x": 0.52, "y": 0.50}, n=200, seed=3)
    b = runs({"x": 0.50, "y": 0.52}, n=200, seed=4)
    held = ranking_stability(a, b, n_boot=400, seed=0)
    assert held["pairs"]["verdict"].tolist() == ["uncertain"]
    assert 0.05 < held["pairs"]["holds"].iloc[0] < 0.95
    assert np.isnan(held["tau"])  # two models: tau-b is not defined


def test_the_full_data_tau_is_scipys_and_resampling_is_seeded():
    a = runs({"x": 0.6, "y": 0.5, "z": 0.4, "w": 0.3}, seed=5)
    b = runs({"x": 0.45, "y": 0.55, "z": 0.35, "w": 0.3}, seed=6)
    held = ranking_stability(a, b, average="micro", n_boot=200, seed=7)
    acc = lambda frames: [float((f["best_gold_rank"] == 1).mean()) for f in frames.values()]  # noqa: E731
    assert held["tau"] == pytest.approx(stats.kendalltau(acc(a), acc(b)).statistic)
    again = ranking_stability(a, b, average="micro", n_boot=200, seed=7)
    pd.testing.assert_frame_equal(held["pairs"], again["pairs"])
    assert (held["lo"], held["hi"]) == (again["lo"], again["hi"]) and held["lo"] <= held["tau"] <= held["hi"]


def test_only_models_on_both_kinds_and_shared_prompts():
    a, b = runs({"x": 0.5}), runs({"x": 0.4, "y": 0.3})
    with pytest.raises(ProbekitError, match="at least two models"):
        ranking_stability(a, b)
    other = {m: f.assign(query_id="p" + f["query_id"]) for m, f in runs({"x": 0.5, "y": 0.4}).items()}
    mixed = {"x": runs({"x": 0.5})["x"], "y": other["y"]}
    with pytest.raises(ProbekitError, match="share no query"):
        ranking_stability(mixed, runs({"x": 0.4, "y": 0.3}))
