"""AppTest of the Compare page: two stored runs -> per-relation differences, hit/miss lists, rank agreement."""

import json

import pandas as pd
import pytest
from apptest_tables import shown, table_with
from apptest_utils import downloads, errors, immediate, open_app
from conftest import shared_paths, use_store

from probekit import models, rewire
from probekit.bench import paired as paired_runs
from probekit.bench import runs
from probekit.datasets import freetext, load_dataset
from probekit.metrics import compare as rm


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture(scope="module")
def _two_runs(tiny_encoder_dir, tmp_path_factory):
    """Two stored demo runs of one model (two settings), computed once per module."""
    with shared_paths(tmp_path_factory.mktemp("cmp_store")) as base:
        model = models.load(str(tiny_encoder_dir), device="cpu")
        ds = load_dataset("demo")
        a = runs.run_benchmark(model, ds, k=10)
        b = runs.run_benchmark(model, ds, k=10, options={"similarity": "dot", "pooling": "mean"})
    return base, (a, b)


@pytest.fixture
def two_runs(_two_runs):
    """The two runs, in this test's own copy of the store."""
    base, pair = _two_runs
    use_store(base)
    return pair


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
    expected = rm.relation_differences({"a": a.frame, "b": b.frame}, metric="acc@10")
    assert list(diff[delta[0]].round(6)) == list((expected["Δ b"] * 100).round(6))
    agree = _frame(at, "spearman")
    assert len(agree) == 1 and agree.n[0] == len(a.frame)
    # is the difference real: A (the first run) against B, paired on their shared queries
    expected_test = paired_runs.compare_runs(a.run_id, b.run_id, metric="acc@10", which="full")
    tested = _frame(at, "p adjusted")
    assert list(tested.relation) == list(expected_test.table.relation)  # relations, then macro and micro
    assert list(tested["p"].round(9)) == list(expected_test.table["p"].round(9))
    said = [m.value for m in at.markdown if "paired queries" in m.value]
    assert said and "A − B = " in said[0], [m.value for m in at.markdown]
    only_a = rm.hit_miss(a.frame, b.frame, k=10)
    assert any(f"A gets, B misses ({len(only_a)})" in t.label for t in at.tabs)
    assert len(at.get("plotly_chart")) == 1
    at.segmented_control(key="cmp_metric").set_value("MRR").run()
    mrr = rm.relation_differences({"a": a.frame, "b": b.frame}, metric="MRR")
    assert list(_frame(at, "relation")[delta[0]].round(6)) == list((mrr["Δ b"] * 100).round(6))
    at.segmented_control(key="cmp_metric").set_value("acc@1").run()
    assert at.segmented_control(key="cmp_set").options == ["full", "hard-in-full"]
    at.segmented_control(key="cmp_set").set_value("hard-in-full").run()
    assert errors(at) == []
    at.selectbox(key="cmp_a").set_value(at.selectbox(key="cmp_b").value).run()
    assert errors(at) == []  # a run against itself: nothing differs
    assert any("(0)" in t.label for t in at.tabs)


def test_share_link_labels_and_exports(tiny_encoder_dir, two_runs, monkeypatch):
    """The link holds the runs (in order: the first is the baseline), k and the subset, and the page
    restores them; exports are ready when drawn, the chart is legible and labels its subset. The paired test's
    download is the export `runs compare --out` writes (probekit.exports.comparison): the bytes the button carries
    parse and hold the test for these runs and this subset."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    carried: dict[str, bytes] = {}
    keep = MemoryMediaFileStorage.load_and_get_id

    def spy(self, data, mimetype, kind, filename=None):  # the real storage, its bytes kept for the test to read
        if isinstance(data, bytes) and filename:
            carried[filename] = data
        return keep(self, data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", spy)
    a, b = two_runs
    at = open_app("compare", model=str(tiny_encoder_dir),
                  query_params={"runs": f"{b.run_id},{a.run_id}", "k": "5", "set": "hard-in-full"})
    assert errors(at) == []
    assert at.session_state["cmp_sel"] == [b.run_id, a.run_id]
    assert at.session_state["cmp_metric"] == "acc@5" and at.session_state["cmp_set"] == "hard-in-full"  # k=5: acc@5
    link = at.code[-1].value
    assert f"runs={b.run_id}%2C{a.run_id}" in link and "metric=acc%405" in link and "set=hard-in-full" in link
    buttons = downloads(at)
    assert set(buttons) == {"Per-relation table (CSV)", "Agreement (CSV)", "Comparison (json)"}
    assert all(map(immediate, buttons.values()))
    doc = json.loads(carried["comparison.json"])  # A = the first run (b), B = the second (a), as the page pairs
    expected = paired_runs.compare_runs(b.run_id, a.run_id, metric="acc@5", which="hard-in-full")
    assert doc["comparison"] == json.loads(json.dumps(expected.to_dict()))
    assert (doc["a"]["run_id"], doc["b"]["run_id"], doc["queries"]["subset"]) == (b.run_id, a.run_id, "hard-in-full")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "hard-in-full" in spec["layout"]["yaxis"]["title"]["text"]
    assert spec["layout"]["legend"]["orientation"] == "h" and spec["layout"]["font"]["size"] >= 12


def test_hard_set_run_against_a_full_set_run(tiny_encoder_dir):
    """The hard set's "hard" and a full-set run's "hard-in-full" are different experiments: the page
    offers each where a run has it, and a run without the chosen subset reads "–", never None."""
    model = models.load(str(tiny_encoder_dir), device="cpu")
    full = runs.run_benchmark(model, load_dataset("demo"), k=10)
    hard = runs.run_benchmark(model, load_dataset("demo", which="hard"), k=10)
    at = open_app("compare", model=str(tiny_encoder_dir), state={"cmp_sel": [full.run_id, hard.run_id]})
    assert errors(at) == []
    assert at.segmented_control(key="cmp_set").options == ["full", "hard-in-full", "hard"]
    at.segmented_control(key="cmp_set").set_value("hard").run()
    assert errors(at) == []
    assert any("Runs without hard queries are empty" in c.value for c in at.caption)
    diff = table_with(at, "relation")
    text = shown(diff)
    base = diff.value.columns[1]  # the full-set run, the baseline: it has no "hard" block
    assert diff.value[base].isna().all() and (text[base] == "–").all()
    assert "None" not in text.to_string()


def test_sweep_points_are_not_the_default_pair(tiny_encoder_dir, two_runs, monkeypatch):
    """Sweep points are kept, grouped under their sweep, and never the default selection."""
    a, b = two_runs
    model = models.load(str(tiny_encoder_dir), device="cpu")
    point = runs.run_benchmark(model, load_dataset("demo"), k=10, options={"similarity": "l2"})  # the newest
    monkeypatch.setattr(rewire, "stored_sweeps", lambda: pd.DataFrame(
        {"sweep": ["rw [ab12] · demo"], "step": [6], "model": ["x/step-6"], "run_id": [point.run_id],
         "macro acc@1": [0.0], "macro acc@10": [0.0]}))
    at = open_app("compare", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert set(at.session_state["cmp_sel"]) == {a.run_id, b.run_id}
    assert at.multiselect(key="cmp_sel").options[-1].startswith("sweep rw [ab12] · demo › step 6")


def test_a_store_of_sweep_points_only_opens_on_a_pair_of_them(tiny_encoder_dir, two_runs, monkeypatch):
    """Runs of a rewiring run's checkpoints and of its base model are all sweep points: with nothing else stored,
    the page opens on the newest two of them that share queries (it said "No two finished runs share a query")."""
    a, b = two_runs
    monkeypatch.setattr(rewire, "stored_sweeps", lambda: pd.DataFrame(
        {"sweep": ["rw [ab12] · demo"] * 2, "step": [0, 6], "model": ["base", "x/step-6"],
         "run_id": [a.run_id, b.run_id], "macro acc@1": [0.0, 0.0], "macro acc@10": [0.0, 0.0]}))
    at = open_app("compare", model=str(tiny_encoder_dir))
    assert errors(at) == [] and not at.info
    assert at.session_state["cmp_sel"] == [b.run_id, a.run_id]


def _free_text_run(model):
    text = "prompt,object\nAspirin treats [MASK].,pain\nInsulin lowers [MASK].,glucose\n"
    return runs.run_benchmark(model, freetext.parse(text, name="notes"), k=10)


def test_default_pair_is_the_newest_that_shares_queries(tiny_encoder_dir, two_runs):
    """A free-text run stored after two demo runs shares no query with either: the page opens on the demo pair
    (the newest pair a paired comparison accepts) instead of the error "the two runs share no full query"."""
    a, b = two_runs
    model = models.load(str(tiny_encoder_dir), device="cpu")
    free = _free_text_run(model)  # the newest
    at = open_app("compare", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert at.session_state["cmp_sel"] == [b.run_id, a.run_id]  # the newer first, as baseline
    assert free.run_id not in at.session_state["cmp_sel"]
    assert any("paired queries" in m.value for m in at.markdown)
    # picked by hand, a pair with nothing in common is said in one line, never an error
    at.multiselect(key="cmp_sel").set_value([free.run_id, a.run_id]).run()
    assert errors(at) == []
    assert [i.value for i in at.info] == ["A and B share no query (runs of one dataset do): nothing to pair."]


def test_no_pair_shares_queries_says_so_in_one_line(tiny_encoder_dir):
    model = models.load(str(tiny_encoder_dir), device="cpu")
    runs.run_benchmark(model, load_dataset("demo").filter(sample=3), k=10)
    _free_text_run(model)
    at = open_app("compare", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert at.session_state["cmp_sel"] == []
    assert [i.value for i in at.info] == ["No two finished runs share a query (runs of one dataset do): pick two "
                                          "runs to see them side by side anyway."]

