"""AppTest of the Grid page: a grid declared in YAML runs in the background, its cells land as stored runs,
and running it again skips them."""

from apptest_utils import errors, open_app

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
    assert len(at.get("plotly_chart")) == 1
    at.button(key="gr_run").click().run()
    assert _finish(at).result.skipped == 2 and len(runs.list_runs()) == 2


def test_bad_yaml_is_a_message(tiny_encoder_dir):
    at = open_app("grid", model=str(tiny_encoder_dir))
    at.segmented_control(key="gr_how").set_value("YAML").run()
    at.text_area(key="gr_yaml").set_value("models: [x]\ndatasets: []\n").run()
    assert any("no datasets" in e for e in errors(at))
    assert at.button(key="gr_run").disabled
