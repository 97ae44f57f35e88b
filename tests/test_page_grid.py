"""AppTest of the Grid page: a grid declared in YAML runs in the background, its cells land as stored runs,
and running it again skips them."""

import json

from apptest_utils import downloads, errors, immediate, open_app

from pages import _ui as ui
from probekit import jobs
from probekit.bench import runs

YAML = """name: page-test
models: [{model}]
datasets: [demo]
relations: []
probes:
  - name: retrieval
    options: {{pooling: [cls, mean]}}
k: 5
"""


def _finish(at):
    job = at.session_state["gr_job"]
    assert job.wait(300), job.stage
    at.run()
    return job


def test_grid_page_runs_and_resumes(tiny_encoder_dir):
    at = open_app("grid", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert any("No grids yet" in i.value for i in at.info)
    at.segmented_control(key="gr_how").set_value("YAML").run()
    at.text_area(key="gr_yaml").set_value(YAML.format(model=tiny_encoder_dir)).run()
    assert any("2 cells" in c.value for c in at.caption)
    at.button(key="gr_run").click().run()
    job = _finish(at)
    assert job.status == "done", job.error
    assert errors(at) == []
    assert job.result.ran == 2 and len(runs.list_runs()) == 2
    cells = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert list(cells.status) == ["done", "done"]
    assert cells["macro acc@10 [lo, hi]"].str.fullmatch(r"\[\d+\.\d, \d+\.\d\]").all()  # beside every score
    assert any("95 % intervals" in c.value and "Wilson score" in c.value for c in at.caption)
    assert any("fewer than two models" in c.value for c in at.caption)  # one model: no ranking to hold
    assert len(at.get("plotly_chart")) == 1
    at.button(key="gr_run").click().run()
    assert _finish(at).result.skipped == 2 and len(runs.list_runs()) == 2


def test_bad_yaml_is_a_message(tiny_encoder_dir):
    at = open_app("grid", model=str(tiny_encoder_dir))
    at.segmented_control(key="gr_how").set_value("YAML").run()
    at.text_area(key="gr_yaml").set_value("models: [x]\ndatasets: []\n").run()
    assert any("no datasets" in e for e in errors(at))
    assert at.button(key="gr_run").disabled


def test_new_grid_shown_labels_as_text_legible_chart_and_export(tiny_encoder_dir, tmp_path):
    """The grid just run is the one shown when it finishes (its cells are stored by the job, after the
    page's rerun), its chart is legible (fonts >= 12 px, labels not cut, zero-based % axis) and its export
    works on every click; a model path like ``…/<i>m`` is a label, not markup."""
    odd = tmp_path / "<i>m"
    odd.symlink_to(tiny_encoder_dir, target_is_directory=True)
    at = open_app("grid", model=str(tiny_encoder_dir))
    at.segmented_control(key="gr_how").set_value("YAML").run()
    at.text_area(key="gr_yaml").set_value(YAML.format(model=tiny_encoder_dir)).run()
    at.button(key="gr_run").click().run()
    assert _finish(at).status == "done"
    first = at.selectbox(key="gr_sel").value
    two = YAML.format(model=f"{json.dumps(str(odd))}, {tiny_encoder_dir}").replace("page-test", "odd")
    at.text_area(key="gr_yaml").set_value(two).run()  # two models x two poolings
    jobs._WORK.acquire()  # the job waits: nothing of the new grid is stored at the page's rerun
    try:
        at.button(key="gr_run").click().run()
    finally:
        jobs._WORK.release()
    assert _finish(at).status == "done" and errors(at) == []
    assert at.selectbox(key="gr_sel").value not in (first, None)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    labels = spec["data"][0]["y"]  # each bar named by what sets its cell apart: model and pooling
    from probekit.model_registry import short_model_id  # a folder is labelled by its last two path parts

    assert sorted(labels) == sorted(f"{ui.chart_text(short_model_id(str(m)))} · pooling={p}"
                                    for m in (odd, tiny_encoder_dir)
                                    for p in ("cls", "mean")), labels
    assert spec["data"][0]["error_x"]["array"] and spec["data"][0]["error_x"]["arrayminus"]  # 95 % interval bars
    pairs = next(d.value for d in at.dataframe if "verdict" in d.value.columns)  # two models ranked per pooling
    assert len(pairs) == 1 and pairs["verdict"].iloc[0] in ("holds", "flips", "uncertain", "tied")
    assert any("pooling=cls, pooling=mean" in c.value and "Kendall" in c.value for c in at.caption)
    assert any("&lt;i&gt;m" in y for y in labels) and not any("<i>" in y for y in labels)
    lay = spec["layout"]
    assert lay["font"]["size"] >= 12 and lay["yaxis"]["automargin"] and lay["xaxis"]["rangemode"] == "tozero"
    assert immediate(downloads(at)["Cells (CSV)"])


def test_malformed_yaml_is_one_line_naming_line_and_column(caplog):
    """Bad input gets one clear line, never the unexpected-error path (and no traceback in the server log): the
    YAML error's line and column, 1-based as an editor counts."""
    at = open_app("grid")
    at.segmented_control(key="gr_how").set_value("YAML").run()
    with caplog.at_level("ERROR", logger="probekit.app"):
        at.text_area(key="gr_yaml").set_value("name: g\nmodels: [default\ndatasets: [demo]\n").run()
    assert not at.exception
    shown = [e.value for e in at.error]
    assert len(shown) == 1 and "line 3, column 9" in shown[0] and "failed unexpectedly" not in shown[0], shown
    assert not [r for r in caplog.records if r.name == "probekit.app"]
    assert at.button(key="gr_run").disabled


def _keys_in_order(node) -> list[str]:
    """The widget keys of a page in the order it draws them (top to bottom, left column first)."""
    found = [node.key] if isinstance(getattr(node, "key", None), str) else []
    for child in getattr(node, "children", {}).values():
        found += _keys_in_order(child)
    return found


def test_run_grid_is_drawn_above_the_form():
    """With nothing stored the page is its form, taller than a 1024×768 screen: its one action, Run grid, sits at
    the top beside the cell count, not below the form (the fold; the browser walk measures it)."""
    at = open_app("grid")
    assert errors(at) == []
    order = _keys_in_order(at.main)
    assert order.index("gr_how") < order.index("gr_run") < order.index("gr_models") < order.index("gr_backend")
    assert any(c.value.startswith("1 cell · grid id") for c in at.caption)
