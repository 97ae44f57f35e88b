"""AppTest of tours in the app: "Add to tour" next to a share link stores the page's view; the Tours page checks
a tour (cold and warm, what is missing) and exports it; the presenter (``?tour=NAME&present=1``) shows one
prepared step, no sidebar, and a step whose data are missing says so."""

from __future__ import annotations

from apptest_utils import as_text, downloads, errors, immediate, open_app, rendered

from probekit import models, tours
from probekit.bench import runs
from probekit.datasets import load_dataset


def _add(at, *, name: str, title: str, note: str = "") -> None:
    at.selectbox(key="tour_add_tour").set_value("New tour…").run()
    at.text_input(key="tour_add_name").set_value(name)
    at.text_input(key="tour_add_title").set_value(title)
    at.text_input(key="tour_add_note").set_value(note)
    at.button(key="tour_add_go").click().run()


def test_add_to_tour_stores_the_pages_view_with_its_drill_down(tiny_encoder_dir):
    model = models.load(str(tiny_encoder_dir), device="cpu")
    run = runs.run_benchmark(model, load_dataset("demo"), k=10)
    rel = sorted(run.frame.relation.unique())[1]
    at = open_app("benchmark", model=str(tiny_encoder_dir),
                  query_params={"runs": run.run_id, "k": "5", "set": "full", "relation": rel})
    assert errors(at) == []
    assert at.session_state["bm_drill_rel"] == rel  # the link's drill-down
    assert "relation=" in at.code[-1].value
    _add(at, name="talk", title="Drill-down", note="one relation's queries")
    assert errors(at) == []
    step = tours.get_tour("talk").steps[0]
    assert (step.page, step.title, step.note) == ("benchmark", "Drill-down", "one relation's queries")
    assert step.params["runs"] == run.run_id and step.params["relation"] == rel and step.params["metric"] == "acc@5"
    prepared = tours.prepare(step, lambda m, d: models.load(m, device="cpu"))  # an older link's k=5 is acc@5
    assert prepared.data["relation"] == rel and prepared.data["metric"] == "acc@5" and prepared.data["k"] == 5


def test_tours_page_checks_and_exports_and_the_presenter_shows_a_prepared_step(tiny_encoder_dir):
    link = (f"/?model={tiny_encoder_dir}&dataset=demo&relation=may_treat&query=may_treat:0003&k=5"
            "&vocab=heads%2Btails&probe=retrieval")
    tours.add_step("talk", tours.step_from_link(link, title="What the model answers", note="top 5"))
    tours.add_step("talk", tours.step_from_link("/layers?sweep=gone", title="Layers"))
    at = open_app("tours", model=str(tiny_encoder_dir), query_params={"tour": "talk"})
    assert errors(at) == []
    at.button(key="tr_check").click().run()
    assert any("1 of 2 steps ready" in e.value for e in at.error)
    table = at.dataframe[0].value
    assert table.status.tolist() == ["ok", "MISSING"] and table["warm s"].notna().tolist() == [True, False]
    assert "layer sweep 'gone' is not in this store" in table["what it shows"][1]
    assert all(immediate(b) for b in downloads(at).values()) and "Tour file (YAML)" in downloads(at)

    shown = open_app(None, query_params={"tour": "talk", "present": "1"})
    assert errors(shown) == []
    assert [t.value for t in shown.title] == ["What the model answers"]
    assert any("Step 1 / 2" in m.value for m in shown.markdown)
    assert len(shown.sidebar) == 0  # no pickers
    assert len(shown.table) == 1 and len(shown.table[0].value) == 5  # the top 5, prepared
    shown.session_state["tp_step_talk"] = 1  # what → does (the keys come from the browser: test_browser_present)
    shown.run()
    assert [t.value for t in shown.title] == ["Layers"]
    assert any("This step cannot be shown: layer sweep 'gone'" in e.value for e in shown.error)
    assert shown.query_params["step"] in ("2", ["2"])  # a reload stays on this step


def test_a_tour_title_is_text_never_markup():
    """Tours travel between machines (export, import): a title holding an image (a tracking pixel) is shown as the
    characters typed on the presenter's screen, never fetched."""
    from pages import _ui as ui

    title = "![x](http://127.0.0.1:9/pixel.png) **bold** <img src=x>"
    tours.add_step("hostile", tours.step_from_link("/layers?sweep=gone", title=title))
    shown = open_app(None, query_params={"tour": "hostile", "present": "1"})
    assert [t.value for t in shown.title] == [ui.md(title)] and "![x](http" not in shown.title[0].value


def test_presenting_an_unknown_tour_says_so():
    at = open_app(None, query_params={"tour": "nope", "present": "1"})
    assert [e.value for e in at.error] == ["no tour 'nope' in this store (none yet: press 'Add to tour' next to a "
                                           "share link, or import a tour file)"]


def test_a_one_step_tour_reads_1_step_and_its_link_reads_as_typed():
    """A person reads the step's link decoded (``acc@10``, not ``acc%4010``); the link itself stays percent-encoded
    (RFC 3986 §2.1), so following it gives the page the same parameters."""
    tours.add_step("one", tours.step_from_link("/compare?runs=a,b&metric=acc%4010", title="Compare"))
    at = open_app("tours", query_params={"tour": "one"})
    assert errors(at) == []
    assert "1 step" in [s.value for s in at.subheader]
    step = next(as_text(h) for h in rendered(at) if "Compare" in h and "metric=" in h)
    assert "metric=acc@10" in step and "%40" not in step and "runs=a,b" in step
    link = tours.get_tour("one").steps[0].link
    assert "metric=acc%4010" in link and any(f"]({link})" in m.value for m in at.markdown)
