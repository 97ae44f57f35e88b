"""AppTest of the DisKnE page: fine-tune in the background, see a table and a chart per category, compare two
runs (models) side by side, stop a run, and bad settings give a message, not a traceback."""

from __future__ import annotations

import json

from apptest_utils import downloads, errors, immediate, open_app

from probekit import jobs
from probekit.diskne import build, data, runs, splits


def _table(at, column):
    """The page's dataframe with ``column`` (AppTest does not expose dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _start(at, *, hyp_only=False):
    at.multiselect(key="dk_seeds").set_value([0])
    at.multiselect(key="dk_cats").set_value(["symptoms_diseases"])
    at.number_input(key="dk_epochs").set_value(1)
    at.number_input(key="dk_cap").set_value(16)
    at.checkbox(key="dk_hyp_only").set_value(hyp_only).run()
    at.button(key="dk_start").click().run()
    job = at.session_state["dk_job"]
    assert job.wait(300), job.stage
    at.run()
    return job


def test_diskne_page_runs_shows_and_compares(tiny_encoder_dir):
    at = open_app("diskne", model=str(tiny_encoder_dir))
    assert errors(at) == []
    assert any("No DisKnE runs yet" in i.value for i in at.info)
    assert at.multiselect(key="dk_models").value == [str(tiny_encoder_dir)]
    n = len(splits.targets(data.read_set(build.ensure("demo"))))  # every disease with >= 2 positives somewhere
    assert any(c.value.startswith(f"{3 * n} fine-tunings ({n} diseases × 3 seeds × 1 models)") for c in at.caption)
    job = _start(at)
    assert job.status == "done", job.error
    assert errors(at) == []
    [first] = job.result
    summary = _table(at, "macro F1 %")
    assert list(summary["category"]) == ["Symptoms → Disease"] and list(summary["diseases"]) == [9]
    assert len(at.get("plotly_chart")) == 1  # one chart per category
    assert len(_table(at, "disease")) == 9
    # a second model variant, then compare the two runs side by side
    job = _start(at, hyp_only=True)
    assert job.status == "done", job.error
    [second] = job.result
    assert at.multiselect(key="dk_sel").value == [second]  # the run just finished is the one shown
    assert immediate(downloads(at)["Results per disease (CSV)"])  # every click gets its file
    lay = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]  # legible at 1280×720 on a projector
    assert lay["font"]["size"] >= 12 and lay["xaxis"]["automargin"] and lay["legend"]["yanchor"] == "bottom"
    at.multiselect(key="dk_sel").set_value([first, second]).run()
    assert errors(at) == []
    wide = _table(at, "disease")
    labels = {runs.get_run(first)["label"], runs.get_run(second)["label"]}
    assert labels <= set(wide.columns) and len(wide) == 9
    assert len(_table(at, "macro F1 %")) == 2 and len(at.get("plotly_chart")[0].proto.spec) > 0
    # Once a defect: the picker's text carried a run's progress and status, and the browser sends a multiselect's
    # value back as the option text it showed; when a selected run's status changed under it (a run finishing,
    # or marked interrupted), the old text matched no option and the page crashed ("bad argument type for
    # built-in operation"). A run's picker text is its identity; its state is shown beside it.
    with runs._store().transaction() as cur:
        cur.execute("UPDATE diskne_runs SET status = 'interrupted' WHERE run_id = ?", [first])
    at.run()
    assert errors(at) == [] and at.multiselect(key="dk_sel").value == [first, second]
    assert any("interrupted" in c.value for c in at.caption)


def test_diskne_page_stop_and_bad_settings(tiny_encoder_dir):
    at = open_app("diskne", model=str(tiny_encoder_dir))
    jobs._WORK.acquire()  # another job holds the machine: this one waits, and we stop it
    try:
        at.multiselect(key="dk_seeds").set_value([0]).run()
        at.button(key="dk_start").click().run()
        assert at.button(key="dk_start").disabled
        at.button(key="dk_stop").click().run()
    finally:
        jobs._WORK.release()
    job = at.session_state["dk_job"]
    assert job.wait(60) and job.status == "cancelled"
    at.run()
    assert errors(at) == []
    at.multiselect(key="dk_cats").set_value([]).run()
    assert at.button(key="dk_start").disabled  # nothing to run


def test_diskne_page_bad_model_is_a_message():
    at = open_app("diskne", model="/no/such/model")  # typed in the sidebar: preselected on the page
    assert errors(at) == [] and at.multiselect(key="dk_models").value == ["/no/such/model"]
    at.multiselect(key="dk_seeds").set_value([0]).run()
    at.button(key="dk_start").click().run()
    job = at.session_state["dk_job"]
    assert job.wait(60) and job.status == "failed" and "does not exist" in job.error
    at.run()
    assert any("does not exist" in e.value for e in at.error)


def test_the_intro_is_folded_and_start_sits_beside_its_count():
    """The page opens on its form with Start on a 1024×768 screen's first view: the long intro is folded into an
    expander (still one click away), and Start shares a row with the count of fine-tunings it will run."""
    at = open_app("diskne")
    assert errors(at) == []
    about = next(e for e in at.expander if e.label.startswith("Does a model know"))
    assert any("To reproduce the paper" in c.value for c in about.caption)
    assert not any("To reproduce the paper" in c.value for c in at.main.caption if c not in about.caption)
    start = next(c for c in at.columns if any(b.key == "dk_start" for b in c.button))  # a column of a row, ...
    assert [b.key for b in start.button] == ["dk_start"] and not start.caption
    assert any("fine-tunings" in cap.value for c in at.columns for cap in c.caption)  # ... its count beside it
