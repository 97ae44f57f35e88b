"""AppTest of the Benchmark page: background run with progress/cancel, tables, charts, drill-down, Probe link."""

import base64
import json

import numpy as np
import pandas as pd
from apptest_tables import shown, table_with
from apptest_utils import downloads, errors, immediate, open_app

from probekit import jobs, metrics, models, rewire
from probekit.bench import runs
from probekit.datasets import load_dataset


def _frame(at, column):
    """The first table holding ``column`` (AppTest does not expose dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _finish(at, key="bm_job"):
    job = at.session_state[key]
    assert job.wait(120), job.stage
    at.run()
    return job


def test_run_tables_charts_and_second_run(tiny_encoder_dir):
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert any("No stored runs" in i.value for i in at.info)
    at.button(key="bm_start").click().run()
    job = _finish(at)
    assert job.status == "done", job.error
    assert errors(at) == []
    table = _frame(at, "full acc@1")
    assert list(table.average) == ["macro", "micro"]
    assert table["n full"][0] == len(load_dataset("demo"))
    assert 0 <= table["full acc@10"][0] <= 100 and table["full acc@10"][0] >= table["full acc@1"][0]
    assert len(at.get("plotly_chart")) == 2  # per relation, by gold length
    first_rel = at.session_state["bm_drill_rel"]
    queries = _frame(at, "hit@10")
    assert len(queries) == len(load_dataset("demo").queries_for(first_rel))
    # a second run with other settings: both selected, grouped
    # Once a defect: a picker whose pick is an option's default (None) showed "Choose an option" after a rerun
    # (Streamlit reads a None value as nothing picked); the picked default stays shown
    for name in ("bm_pooling", "bm_preset"):
        box = at.selectbox(key=name)
        assert box.index == 0 and box.options[0] in ("model's default", "none"), (name, box.index)
    at.selectbox(key="bm_similarity").set_value("dot").run()
    at.button(key="bm_start").click().run()
    second = _finish(at)
    assert at.session_state["bm_sel"] == second.result
    at.multiselect(key="bm_sel").set_value(job.result + second.result).run()
    assert errors(at) == []
    assert len(_frame(at, "full acc@1")) == 4
    assert at.segmented_control(key="bm_show_set").options == ["full", "hard-in-full"]  # no "hard": not the hard set
    at.segmented_control(key="bm_show_set").set_value("hard-in-full").run()
    assert at.segmented_control(key="bm_show_metric").options == metrics.metric_names()  # the registry's
    at.segmented_control(key="bm_show_metric").set_value("acc@1").run()
    assert errors(at) == [] and "hit@1" in _frame(at, "query_id").columns
    at.segmented_control(key="bm_show_metric").set_value("MRR").run()
    assert errors(at) == [] and "full MRR" in _frame(at, "full acc@1").columns
    _inside(_frame(at, "full acc@1"), ["full MRR", "hard-in-full MRR"])  # MRR's: a bootstrap, still around it
    # the same settings again open the stored run instead of computing
    at.button(key="bm_start").click().run()
    assert _finish(at).result == second.result


def test_stored_results_come_first_and_the_settings_fold(tiny_encoder_dir):
    """With nothing stored the settings are open (there is nothing else to see); once runs are stored the page
    opens on their results and the settings fold into one expander, so the accuracy table is on the first screen
    at 1024×768 (it sat under ~480 px of settings)."""
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    [settings] = [e for e in at.expander if e.label == "New run: settings and Start"]
    assert settings.proto.expanded and settings.button(key="bm_start")
    runs.run_benchmark(models.load(str(tiny_encoder_dir), device="cpu"), load_dataset("demo"), k=10)
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    assert errors(at) == []
    [settings] = [e for e in at.expander if e.label == "New run: settings and Start"]
    assert not settings.proto.expanded and len(_frame(at, "full acc@1")) == 2
    # the picked metric (acc@10) right after the run, its subsets side by side, so it is on screen at 1280 px (it
    # hid behind a sideways scroll, the table's columns subset by subset); the counting is the caption's
    shown = _frame(at, "full acc@1")
    assert list(shown.columns[:6]) == ["run", "average", "full acc@10", "full acc@10 [lo, hi]", "hard-in-full acc@10",
                                       "hard-in-full acc@10 [lo, hi]"]  # each value's 95 % interval beside it
    assert "counting" not in shown.columns
    _inside(shown, ["full acc@10", "hard-in-full acc@10"])
    assert "acc@1 [lo, hi]" not in " ".join(shown.columns)  # the shown metric's only: the table stays 1280 px wide
    [note] = [c.value for c in at.caption if "[lo, hi]: 95 % intervals" in c.value]
    assert "micro acc@10: Wilson score" in note and "macro acc@10: bootstrap over queries within relations" in note
    # the per-relation bars carry error bars: each bar's interval, in %, around its value
    bars = [t for t in json.loads(at.get("plotly_chart")[0].proto.spec)["data"] if t["type"] == "bar"]
    assert bars
    for t in bars:
        y, up, down = _numbers(t["y"]), _numbers(t["error_y"]["array"]), _numbers(t["error_y"]["arrayminus"])
        assert len(y) == len(up) == len(down) and len(y)
        assert (up >= 0).all() and (down >= 0).all() and (y - down >= -1e-9).all() and (y + up <= 100 + 1e-9).all()


def _numbers(values) -> np.ndarray:
    """A plotly JSON array: a list, or (plotly 6) ``{"dtype", "bdata"}``, base64 of the raw values."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).astype(float)
    return np.asarray(values, dtype=float)


def _inside(table, columns):
    """Each value of ``columns`` (in %, the table's numbers) lies in its ``[lo, hi]`` text (one decimal)."""
    for c in columns:
        for value, text in zip(table[c], table[f"{c} [lo, hi]"]):
            lo, hi = (float(x) for x in text.strip("[]").split(","))
            assert lo - 0.05 <= value <= hi + 0.05, (c, value, text)


def test_open_query_on_probe_page(tiny_encoder_dir):
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    at.number_input(key="bm_retrieval_max_length").set_value(32).run()  # an advanced option, not its default
    at.button(key="bm_start").click().run()
    _finish(at)
    qid = _frame(at, "hit@10").query_id[0]
    at.session_state["bm_queries"] = {"selection": {"rows": [0], "columns": [], "cells": []}}
    at.run()
    at.button(key="bm_open").click().run()
    assert errors(at) == []
    assert at.session_state["pk_qid"] == qid
    assert at.query_params["query"] == [qid] or at.query_params["query"] == qid
    assert len(at.dataframe[0].value) == 10  # the Probe page ran the query at once
    # the run's own options, advanced ones included, are the ones the Probe page's widgets show
    from probekit.bench import runs
    from probekit.probes import get_probe

    stored = runs.load_run(runs.list_runs().run_id.iloc[0]).meta["options"]
    advanced = [o.name for o in get_probe("retrieval").options if o.advanced and o.name in stored]
    assert stored["max_length"] == 32 and advanced
    assert all(at.session_state[f"pk_opt_retrieval_{n}"] == stored[n] for n in advanced)


def test_cancel_and_bad_extra_model(tiny_encoder_dir):
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    jobs._WORK.acquire()  # another job holds the machine: ours waits, shows progress and a Cancel button
    try:
        at.button(key="bm_start").click().run()
        assert at.session_state["bm_job"].status == "queued"
        assert at.button(key="bm_start").disabled
        at.button(key="bm_cancel").click().run()
    finally:
        jobs._WORK.release()
    job = _finish(at)
    assert job.status == "cancelled"
    assert any("cancelled" in w.value for w in at.warning)
    at.text_input(key="bm_extra").set_value("/no/such/model").run()
    at.button(key="bm_start").click().run()
    job = _finish(at)
    assert job.status == "failed" and not at.exception
    assert any("does not exist" in e.value for e in at.error)


def test_fast_toggle_stores_an_int8_run_of_its_own(tiny_encoder_dir):
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    at.button(key="bm_start").click().run()
    exact = _finish(at).result
    at.checkbox(key="bm_fast").set_value(True).run()
    at.button(key="bm_start").click().run()
    fast = _finish(at).result
    assert errors(at) == [] and fast != exact  # a separate stored run, not the fp32 one reopened
    meta = runs.get_run(fast[0])
    assert meta["options"]["fast"] is True and runs.get_run(exact[0])["options"].get("fast") in (None, False)


def _spec(chart) -> dict:
    return json.loads(chart.proto.spec)


def test_full_and_hard_set_runs_are_labelled_apart(tiny_encoder_dir):
    """The rule: "A full run's 'hard' block is a different experiment (hard queries ranked in the full
    vocabulary): keep it only if it is labelled so everywhere (tables, exports, charts)." A full-set run's hard
    block is "hard-in-full"; a hard-set run's is "hard"; a table cell a run does not have reads "–"."""
    model = models.load(str(tiny_encoder_dir), device="cpu")
    full = runs.run_benchmark(model, load_dataset("demo"), k=10)
    hard = runs.run_benchmark(model, load_dataset("demo", which="hard"), k=10)
    at = open_app("benchmark", model=str(tiny_encoder_dir), state={"bm_sel": [full.run_id, hard.run_id]})
    assert errors(at) == []
    element = table_with(at, "hard-in-full acc@1")
    table, text = element.value, shown(element)
    assert {"full acc@1", "hard-in-full acc@1", "hard acc@1", "n hard-in-full", "n hard"} <= set(table.columns)
    hard_row = table.index[table.run.str.contains("hard")][0]  # the hard-set run's row: no full-set columns
    assert pd.isna(table["full acc@1"][hard_row]) and text["full acc@1"][hard_row] == "–"
    assert text["n hard"][hard_row] == str(len(load_dataset("demo", which="hard")))
    assert "None" not in text.to_string() and "nan" not in text.to_string()
    assert at.segmented_control(key="bm_show_set").options == ["full", "hard-in-full", "hard"]
    at.segmented_control(key="bm_show_set").set_value("hard-in-full").run()
    assert errors(at) == []
    rel_chart = _spec(at.get("plotly_chart")[0])
    assert "hard-in-full" in rel_chart["layout"]["yaxis"]["title"]["text"]  # the chart says which experiment
    assert rel_chart["layout"]["yaxis"]["rangemode"] == "tozero" and rel_chart["layout"]["yaxis"]["ticksuffix"] == "%"
    assert any("among the full set's vocabulary" in c.value for c in at.caption)
    # the export labels each row by its experiment
    exported = runs.export_frame(full.run_id)
    assert set(exported.subset) <= {"full", "hard-in-full"} and "hard-in-full" in set(exported.subset)
    assert set(runs.export_frame(hard.run_id).subset) == {"hard"}


def test_share_link_restores_the_view_and_exports_are_ready(tiny_encoder_dir):
    """The link holds the whole view (the runs, k, the subset); every export works on every
    click (its file exists when the button is drawn); a rank with no hit reads "no hit", not None."""
    model = models.load(str(tiny_encoder_dir), device="cpu")
    a = runs.run_benchmark(model, load_dataset("demo"), k=10)
    b = runs.run_benchmark(model, load_dataset("demo"), k=10, options={"similarity": "dot"})
    at = open_app("benchmark", model=str(tiny_encoder_dir),
                  query_params={"runs": f"{b.run_id},{a.run_id},run-gone", "k": "1", "set": "hard-in-full"})
    assert errors(at) == []
    assert at.session_state["bm_sel"] == [b.run_id, a.run_id]  # an unknown run id is dropped
    assert at.session_state["bm_show_metric"] == "acc@1" and at.session_state["bm_show_set"] == "hard-in-full"
    link = at.code[-1].value
    assert f"runs={b.run_id}%2C{a.run_id}" in link and "metric=acc%401" in link and "set=hard-in-full" in link
    assert at.query_params["runs"] in (f"{b.run_id},{a.run_id}", [f"{b.run_id},{a.run_id}"])
    buttons = downloads(at)
    assert set(buttons) == {"Run results (CSV)", "Run results (Parquet)", "Accuracy table (CSV)"}
    assert all(immediate(btn) for btn in buttons.values())
    queries = table_with(at, "best rank")
    text = shown(queries)
    missing = queries.value["best rank"].isna()
    assert (text["best rank"][missing] == "no hit").all() and "None" not in text["best rank"].tolist()


def test_result_only_while_it_matches_the_settings(tiny_encoder_dir):
    """The rule: "A result is shown only while it matches the current inputs": a finished job's message
    (here: cancelled) goes when a setting changes, and comes back with the settings it was computed from."""
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    jobs._WORK.acquire()
    try:
        at.button(key="bm_start").click().run()
        at.button(key="bm_cancel").click().run()
    finally:
        jobs._WORK.release()
    assert _finish(at).status == "cancelled"
    assert any("cancelled" in w.value for w in at.warning)
    at.number_input(key="bm_k").set_value(5).run()
    assert not any("cancelled" in w.value for w in at.warning)
    at.number_input(key="bm_k").set_value(10).run()
    assert any("cancelled" in w.value for w in at.warning)


def test_sweep_points_are_grouped_and_never_the_default(tiny_encoder_dir, monkeypatch):
    """Once a defect: "sweep points appear as ordinary benchmark runs and become the Benchmark page's default
    selection (keep them, but group them under their sweep)"."""
    model = models.load(str(tiny_encoder_dir), device="cpu")
    ordinary = runs.run_benchmark(model, load_dataset("demo"), k=10)
    point = runs.run_benchmark(model, load_dataset("demo"), k=10, options={"similarity": "dot"})  # the newest run
    assert point.run_id != ordinary.run_id
    monkeypatch.setattr(rewire, "stored_sweeps", lambda: pd.DataFrame(
        {"sweep": ["rw-demo [ab12] · demo"], "step": [3], "model": ["x/step-3"], "run_id": [point.run_id],
         "macro acc@1": [0.0], "macro acc@10": [0.0]}))
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert at.session_state["bm_sel"] == [ordinary.run_id]
    picker = at.multiselect(key="bm_sel")
    assert picker.options[-1].startswith("sweep rw-demo [ab12] · demo › step 3")
    assert not any(o.startswith("sweep") for o in picker.options[:-1])


def test_the_subject_choice_shows_where_the_accuracy_is(tiny_encoder_dir):
    """A stored run keeps each query's own subject among the candidates (which an untuned encoder ranks first,
    so acc@1 reads 0): the page says so next to the numbers, naming the runs, and how to get the other figure."""
    at = open_app("benchmark", model=str(tiny_encoder_dir))
    at.button(key="bm_start").click().run()
    assert _finish(at).status == "done"
    notes = [c.value for c in at.caption if "Subject kept" in c.value]
    assert len(notes) == 1 and "Exclude subject" in notes[0]
