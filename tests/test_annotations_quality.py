"""Ordinal agreement and rater quality of a stored session: `annotations stats` (text and JSON) and ann.stats on a
real DuckDB store."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_annotations import rankings

from probekit import annotations as ann
from probekit import cli
from probekit.metrics import agreement, agreement_ordinal, raters


@pytest.fixture
def rated():
    """Four queries × top-5 rated by three experts: alice and bob close to a shared truth, carol at random."""
    sid = ann.from_rankings(rankings(), name="quality", k=5, seed=3)
    rng = np.random.default_rng(11)
    items = ann.items_frame(sid)
    truth = dict(zip(items.item_id, np.where(items["rank"] <= 2, 5, rng.integers(1, 4, len(items)))))
    for name in ("alice", "bob", "carol"):
        who = ann.join(sid, name)
        for item in items.item_id:
            score = int(rng.integers(1, 6)) if name == "carol" else int(np.clip(truth[item] - (name == "bob"), 1, 5))
            ann.rate(sid, item, who, score)
    return sid


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_show_ordinal_agreement_rater_quality_and_adjusted_accuracy(rated, capsys):
    result = ann.stats(rated)
    ratings = ann.ratings_frame(rated)
    table = result["ordinal"].set_index("measure")
    assert table.loc["ICC(2,1) absolute agreement, one rater", "value"] == \
        pytest.approx(agreement_ordinal.icc(ratings)["ICC(2,1)"])
    assert table.loc["ICC(2,1) absolute agreement, one rater", "answers"] == 20
    quality = result["raters"].set_index("annotator")
    assert quality.reliability.idxmin() == "carol"  # the random one
    assert quality.loc["bob", "bias"] < 0 < quality.loc["alice", "bias"]  # bob scores a point lower
    acc = result["adjusted_accuracy"].set_index(["k", "relation"])
    assert list(acc.columns) == ["n", "gold acc", "expert acc (≥5)", "reliability-weighted expert acc (≥5)"]
    items = ann.items_frame(rated).rename(columns={"query_index": "query"})
    queries = items.drop_duplicates("query")[["query", "relation", "best_gold_rank"]]
    weighted = raters.weighted_consensus(ratings, quality.reliability)
    want = agreement.expert_accuracy(queries, items, weighted, ks=[1]).set_index("relation")
    assert acc.loc[(1, "all"), "reliability-weighted expert acc (≥5)"] == want.loc["all", "expert acc (≥5)"]
    code, out, _ = run(capsys, "annotations", "stats", "--session", rated)
    assert code == 0 and "Ordinal agreement" in out and "ICC(2,k) absolute agreement" in out
    assert "Rater quality" in out and "reliability-weighted expert acc" in out
    code, out, _ = run(capsys, "annotations", "stats", "--session", rated, "--format", "json")
    data = json.loads(out)
    assert [r["measure"] for r in data["ordinal"]] == list(table.index)
    assert {r["annotator"] for r in data["raters"]} == {"alice", "bob", "carol"}
    assert data["adjusted_accuracy"][0]["k"] == 1
