"""AppTest of the Compare page: two stored runs -> per-relation differences, hit/miss lists, rank agreement."""

import pytest
from apptest_utils import errors, open_app

from probekit import models
from probekit.bench import runs
from probekit.datasets import load_dataset
from probekit.metrics import compare as rm


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture
def two_runs(tiny_encoder_dir):
    model = models.load(str(tiny_encoder_dir), device="cpu")
    ds = load_dataset("demo")
    a = runs.run_benchmark(model, ds, k=10)
    b = runs.run_benchmark(model, ds, k=10, options={"similarity": "dot", "pooling": "mean"})
    return a, b


def test_needs_two_runs(tiny_encoder_dir):
    at = open_app("compare", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert any("at least two finished runs" in i.value for i in at.info)


def test_compare_two_runs(tiny_encoder_dir, two_runs):
    a, b = two_runs
    at = open_app("compare", model=str(tiny_encoder_dir), state={"cmp_sel": [a.run_id, b.run_id]})
    assert errors(at) == []
    diff = _frame(at, "relation")
    assert diff.relation.iloc[-1] == "macro" and len(diff) == len(load_dataset("demo").relations) + 1
    delta = [c for c in diff.columns if c.startswith("Δ ")]
    assert len(delta) == 1
    expected = rm.relation_differences({"a": a.frame, "b": b.frame}, k=10)
    assert list(diff[delta[0]].round(6)) == list((expected["Δ b"] * 100).round(6))
    agree = _frame(at, "spearman")
    assert len(agree) == 1 and agree.n[0] == len(a.frame)
    only_a = rm.hit_miss(a.frame, b.frame, k=10)
    assert any(f"A gets, B misses ({len(only_a)})" in t.label for t in at.tabs)
    assert len(at.get("plotly_chart")) == 1
    at.segmented_control(key="cmp_k").set_value(1).run()
    at.segmented_control(key="cmp_set").set_value("hard").run()
    assert errors(at) == []
    at.selectbox(key="cmp_a").set_value(at.selectbox(key="cmp_b").value).run()
    assert errors(at) == []  # a run against itself: nothing differs
    assert any("(0)" in t.label for t in at.tabs)
