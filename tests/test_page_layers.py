"""AppTest of the Layers page: a background sweep, heatmap + lines with best layers, stored sweep reused."""

import json

from apptest_tables import shown, table_with
from apptest_utils import downloads, errors, immediate, open_app

from probekit import jobs, models
from probekit.bench import layers
from probekit.datasets import load_dataset


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
    expected = result.best_layers(metric="acc@1")["best layer"]
    assert list(best["best layer"].fillna(-1)) == list(expected.fillna(-1))
    assert set(best["best layer"].dropna()) <= {1, 2}
    heat = json.loads(at.get("plotly_chart")[0].proto.spec)["data"]
    # the best layer's star follows the value in its own cell's text ("12.5 ★"), never drawn over the value
    cells = next(d for d in heat if d["type"] == "heatmap")
    acc = result.accuracy(metric="acc@1", subset="full") * 100
    marked = result.best_layers(metric="acc@1").dropna(subset=["best layer"])
    starred = set(zip(marked["relation"], marked["best layer"].astype(int)))
    assert cells["texttemplate"] == "%{text}" and len(cells["text"]) == len(acc)
    for (rel, row), texts in zip(acc.iterrows(), cells["text"]):
        assert texts == [f"{v:.1f}" + (" ★" if (rel, layer) in starred else "") for layer, v in row.items()]
    assert sum(t.endswith(" ★") for row in cells["text"] for t in row) == len(starred) > 0
    assert [d for d in heat if d["type"] != "heatmap"] == []  # no marker laid over the cells
    per_layer = _frame(at, "macro acc@1")
    assert list(per_layer.layer) == [1, 2]
    want = result.averages()  # each layer's value lies in its 95 % interval, shown beside it and on the chart
    for layer, text in zip(per_layer.layer, per_layer["macro acc@1 [lo, hi]"]):
        lo, hi = map(float, text.strip("[]").split(", "))
        assert lo - 0.05 <= 100 * want.loc[layer, "macro acc@1"] <= hi + 0.05
    assert "micro acc@1 [lo, hi]" in per_layer.columns
    assert any("95 % intervals" in c.value and "micro acc@1: Wilson score" in c.value for c in at.caption)
    average = next(d for d in json.loads(at.get("plotly_chart")[1].proto.spec)["data"]
                   if d.get("name", "").startswith("macro average"))
    assert len(average["error_y"]["array"]) == 2 and min(average["error_y"]["arrayminus"]) >= 0
    # the same settings again: the stored sweep, at once
    at.button(key="ly_run").click().run()
    assert _finish(at).result.run_id == result.run_id
    assert len(layers.list_layer_runs()) == 1
    assert at.segmented_control(key="ly_set").options == ["full", "hard-in-full"]  # a full-set sweep
    at.segmented_control(key="ly_set").set_value("hard-in-full").run()
    at.segmented_control(key="ly_metric").set_value("MRR").run()
    assert errors(at) == [] and "MRR (%) per relation and layer, hard-in-full" in [s.value for s in at.subheader]
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


def test_share_link_caption_and_missing_values(tiny_encoder_dir):
    """A Layers link holds its sweep, options and view, and the page restores them; "the caption
    prints a raw Python dict; tables show 'None'" no more; exports are ready when drawn; "model's default"."""
    model = models.load(str(tiny_encoder_dir), device="cpu")
    sweep = layers.run_layers(model, load_dataset("demo"), layers=[0, 1], pooling="mean", similarity="dot")
    at = open_app("layers", model=str(tiny_encoder_dir), query_params={
        "sweep": sweep.run_id, "pooling": "mean", "similarity": "dot", "layers": "0-1", "k": "10",
        "set": "hard-in-full"})
    assert errors(at) == []
    assert at.session_state["ly_sel"] == sweep.run_id and at.session_state["ly_range"] == (0, 1)
    [settings] = [e for e in at.expander if e.label == "New sweep: settings and Run"]
    assert not settings.proto.expanded  # a stored sweep: its heatmap first, the settings folded
    assert at.session_state["ly_metric"] == "acc@10" and at.session_state["ly_set"] == "hard-in-full"
    assert not at.warning  # the sweep shown is the one of these settings
    link = at.code[-1].value
    for part in (f"sweep={sweep.run_id}", "pooling=mean", "similarity=dot", "layers=0-1", "set=hard-in-full"):
        assert part in link
    caption = [c.value for c in at.caption if "candidates" in c.value and not c.value.startswith("Subject kept")][0]
    assert "{" not in caption and "pooling mean" in caption and "similarity dot" in caption
    best = table_with(at, "best layer")
    text = shown(best)
    assert "None" not in text.to_string() and "nan" not in text.to_string()
    assert (text["best layer"][best.value["best layer"].isna()] == "–").all()
    assert all(map(immediate, downloads(at).values())) and len(downloads(at)) == 2
    assert at.selectbox(key="ly_pooling").format_func(None) == "model's default"


def test_other_settings_are_marked_and_errors_do_not_linger(tiny_encoder_dir):
    """After a setting changes, the sweep on screen is the stored one of the new settings, or is
    clearly marked as made with other settings; a cancelled job's message goes with its settings."""
    at = open_app("layers", model=str(tiny_encoder_dir))
    at.button(key="ly_run").click().run()
    first = _finish(at).result
    assert not at.warning
    at.selectbox(key="ly_similarity").set_value("dot").run()
    assert at.session_state["ly_sel"] == first.run_id  # nothing stored for dot: the old one, marked
    assert any("other settings" in w.value for w in at.warning)
    jobs._WORK.acquire()
    try:
        at.button(key="ly_run").click().run()
        at.button(key="ly_cancel").click().run()
    finally:
        jobs._WORK.release()
    assert _finish(at).status == "cancelled" and any("cancelled" in w.value for w in at.warning)
    at.selectbox(key="ly_similarity").set_value("cosine").run()  # back to the stored sweep's settings
    assert not at.warning and at.session_state["ly_sel"] == first.run_id


def test_pooling_speaks_the_probe_pages_words(tiny_encoder_dir):
    at = open_app("layers", model=str(tiny_encoder_dir))
    pooling = at.selectbox(key="ly_pooling")
    assert pooling.index == 0 and pooling.options[0] == "model's default"  # as on Probe and Benchmark


def test_subject_note_and_exclude_subject(tiny_encoder_dir):
    """A sweep keeps each query's subject among its candidates unless *Exclude subject* is ticked; the page says
    which where the accuracy is shown (an untuned encoder ranks the subject first: an all-zero heatmap otherwise
    unexplained), and the ticked sweep is another stored sweep with the subject left out."""
    at = open_app("layers", model=str(tiny_encoder_dir))
    at.button(key="ly_run").click().run()
    kept = _finish(at).result
    assert any("Subject kept among the candidates" in c.value and "press Run" in c.value for c in at.caption)
    at.checkbox(key="ly_exclude").check().run()
    at.button(key="ly_run").click().run()
    left = _finish(at).result
    assert errors(at) == []
    assert left.run_id != kept.run_id and left.meta["options"]["exclude_subject"] is True
    assert at.selectbox(key="ly_sel").value == left.run_id
    assert not any("Subject kept among the candidates" in c.value for c in at.caption)
