"""AppTest of the Benchmark page: background run with progress/cancel, tables, charts, drill-down, Probe link."""

from apptest_utils import errors, open_app

from probekit import jobs
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
    at.selectbox(key="bm_similarity").set_value("dot").run()
    at.button(key="bm_start").click().run()
    second = _finish(at)
    assert at.session_state["bm_sel"] == second.result
    at.multiselect(key="bm_sel").set_value(job.result + second.result).run()
    assert errors(at) == []
    assert len(_frame(at, "full acc@1")) == 4
    at.segmented_control(key="bm_show_set").set_value("hard").run()
    at.segmented_control(key="bm_show_k").set_value(1).run()
    assert errors(at) == [] and "hit@1" in _frame(at, "query_id").columns
    # the same settings again open the stored run instead of computing
    at.button(key="bm_start").click().run()
    assert _finish(at).result == second.result


def test_open_query_on_probe_page(tiny_encoder_dir):
    at = open_app("benchmark", model=str(tiny_encoder_dir))
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
