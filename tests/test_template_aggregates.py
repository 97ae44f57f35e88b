"""Shaier et al.'s prediction frequency at the paper's depth with one name normalisation, and the two per-run
perplexity aggregates (the mean of per-prompt perplexities, and Salazar et al.'s corpus-level one)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from probekit.templates import frequency, stored


def test_prediction_frequency_counts_the_top_10_by_default():
    """§5.4: "we calculate the number of times each entity appears in each model's top-10 predictions"."""
    names = [f"e{i}" for i in range(12)]
    frame = pd.DataFrame({"top_names": [names, names[2:] + names[:2]], "golds": [["e0"], ["e11"]]})
    default = frequency.prediction_frequency(frame)
    assert default.equals(frequency.prediction_frequency(frame, k=10))
    assert set(default.object) == {f"e{i}" for i in range(12)}  # e0, e1 from row 0's top 10; e10, e11 from row 1's
    assert default.set_index("object").prompts.to_dict()["e5"] == 2
    assert frequency.top_share(frame) == frequency.top_share(frame, k=10)


def test_prediction_and_gold_counts_share_one_normalisation():
    """A prediction "esr1" and a gold "ESR1" are one object in both columns (case and spacing folded)."""
    frame = pd.DataFrame({"top_names": [["ESR1"], ["esr1"], ["Tp53"], ["ESR1 "]],
                          "golds": [["esr1"], ["TP53"], ["tp53"], ["BRCA1"]]})
    f = frequency.prediction_frequency(frame, k=1).set_index("object")
    assert f.prompts.to_dict() == {"ESR1": 3, "Tp53": 1}  # shown in the spelling predicted most often
    assert f.loc["ESR1", "prompts"] == 3 and f.loc["ESR1", "gold_share"] == 0.25
    assert f.loc["Tp53", "gold_share"] == 0.5
    assert frequency.top_share(frame, k=1, n=1) == 0.75
    assert frequency.distinct_predictions(frame, ks=(1,))[1]["distinct"] == 2


def test_corpus_perplexity_beside_the_per_prompt_mean(monkeypatch):
    """Salazar et al. 2020: "PPPL(W) := exp(−1/N Σ_{W∈W} PLL(W))", N the corpus's tokens; the per-prompt mean
    averages exp(−PLL(W)/|W|) instead, which one odd prompt can dominate."""
    scores = pd.DataFrame({"run_id": ["r"] * 3, "query_id": ["a", "b", "c"], "scorer": ["m"] * 3,
                           "method": ["pseudo"] * 3, "fill": ["gold"] * 3, "n_tokens": [10, 10, 2],
                           "nll": [10.0, 12.0, 12.0]})
    scores["perplexity"] = [math.exp(n / t) for n, t in zip(scores.nll, scores.n_tokens, strict=True)]
    monkeypatch.setattr(stored, "load_scores", lambda run_ids=None: scores)
    row = stored.mean_perplexity(["r"]).iloc[0]
    naive_mean = sum(math.exp(n / t) for n, t in [(10, 10), (12, 10), (12, 2)]) / 3
    naive_corpus = math.exp((10 + 12 + 12) / (10 + 10 + 2))
    assert row.mean_perplexity == pytest.approx(naive_mean)  # 136.6: the 2-token prompt's 403 dominates
    assert row.corpus_perplexity == pytest.approx(naive_corpus)  # 4.69



@pytest.mark.parametrize("name", sorted(stored.PERPLEXITY_AGGREGATES))
def test_every_perplexity_aggregate_is_a_column_of_the_per_run_table(monkeypatch, name):
    scores = pd.DataFrame({"run_id": ["r"], "query_id": ["a"], "scorer": ["m"], "method": ["pseudo"],
                           "fill": ["gold"], "n_tokens": [4], "nll": [4.0], "perplexity": [math.e]})
    monkeypatch.setattr(stored, "load_scores", lambda run_ids=None: scores)
    column, label = stored.PERPLEXITY_AGGREGATES[name]
    assert stored.mean_perplexity(["r"])[column].iloc[0] == pytest.approx(math.e) and label
