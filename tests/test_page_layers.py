"""AppTest of the Layers page: a background sweep, heatmap + lines with best layers, stored sweep reused."""

from apptest_utils import errors, open_app

from probekit import jobs
from probekit.bench import layers


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _finish(at):
    job = at.session_state["ly_job"]
    assert job.wait(120), job.stage
    at.run()
    return job


def test_layer_sweep_heatmap_and_reuse(tiny_encoder_dir):
    at = open_app("layers", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert any("No stored layer sweeps" in i.value for i in at.info)
    at.button(key="ly_run").click().run()
    job = _finish(at)
    assert job.status == "done", job.error
    assert errors(at) == []
    assert len(at.get("plotly_chart")) == 2  # heatmap and lines
    best = _frame(at, "best layer")
    result = job.result
    expected = result.best_layers(k=1)["best layer"]
    assert list(best["best layer"].fillna(-1)) == list(expected.fillna(-1))
    assert set(best["best layer"].dropna()) <= {1, 2}
    per_layer = _frame(at, "macro acc@1")
    assert list(per_layer.layer) == [1, 2]
    # the same settings again: the stored sweep, at once
    at.button(key="ly_run").click().run()
    assert _finish(at).result.run_id == result.run_id
    assert len(layers.list_layer_runs()) == 1
    at.segmented_control(key="ly_set").set_value("hard").run()
    at.segmented_control(key="ly_k").set_value(10).run()
    assert errors(at) == []
    # a sweep over other layers
    at.slider(key="ly_range").set_value((0, 1)).run()
    at.button(key="ly_run").click().run()
    assert _finish(at).result.layers == [0, 1]
    assert len(layers.list_layer_runs()) == 2
    assert list(_frame(at, "macro acc@1").layer) == [0, 1]


def test_cancel_sweep(tiny_encoder_dir):
    at = open_app("layers", model=str(tiny_encoder_dir))
    jobs._WORK.acquire()  # another job holds the machine
    try:
        at.button(key="ly_run").click().run()
        assert at.button(key="ly_run").disabled
        at.button(key="ly_cancel").click().run()
    finally:
        jobs._WORK.release()
    assert _finish(at).status == "cancelled"
    assert any("cancelled" in w.value for w in at.warning) and not at.exception
    assert layers.list_layer_runs().empty


def test_pooling_speaks_the_probe_pages_words(tiny_encoder_dir):
    at = open_app("layers", model=str(tiny_encoder_dir))
    pooling = at.selectbox(key="ly_pooling")
    assert pooling.value is None and pooling.options[0] == "model's default"  # as on Probe and Benchmark
