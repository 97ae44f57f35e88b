"""Hostile strings from data, in a real browser: a corpus note, a dataset's entity name (and so a query's text) and
an annotation session's name carry Markdown images and links, HTML ``<img>``/``<iframe>``/``<script>`` and bare
URLs, all pointing at a listener on 127.0.0.1 that counts every request it gets. The rule: data reaches the screen
as the characters typed. On every page that shows them, once it is idle, no ``<img>``/``<a>``/``<iframe>``/
``<script>`` of theirs is in the DOM, the hostile text is there as text, and the listener has counted no request.

The waits are test_browser's (app state, one budget per test); any console error fails a test.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from test_browser import (  # noqa: F401  (skips when no Chromium is installed; fixtures used by name)
    ERROR,
    EXCEPTION,
    PROBE_RESULT,
    ROOT,
    TIMEOUT_MS,
    Budget,
    browser,
    key,
    no_console_errors,
    serve,
    title,
    wait_idle,
)

from pages._display import WORD_JOINER

pytestmark = [pytest.mark.browser, pytest.mark.heavy]
HOSTILE_DRUG = "Metformin"  # the demo subject whose name turns hostile (a may_treat head)


class Listener:
    """An HTTP server on a free port of 127.0.0.1 that answers 404 and counts every request it gets."""

    def __init__(self):
        self.paths: list[str] = []
        seen = self.paths

        class Count(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                seen.append(self.path)
                self.send_error(404)

            do_POST = do_HEAD = do_GET  # noqa: N815

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Count)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def hostile(url: str) -> list[str]:
    """Each way a string could become markup that fetches ``url`` (or runs code) if it were rendered."""
    return [f"![x]({url}/img.png)", f"[l]({url}/l)", f'<img src="{url}/i.png">', f'<iframe src="{url}/f"></iframe>',
            f"<script>fetch('{url}/s')</script>", f"{url}/bare"]


def _hostile_demo(folder: Path, name: str) -> None:
    """A copy of the demo dataset in ``folder`` with the head ``HOSTILE_DRUG`` renamed ``name`` in every file."""
    shutil.copytree(ROOT / "data" / "demo", folder, ignore=shutil.ignore_patterns("*.py", "*.md"))
    for path in (folder / "2021AA").glob("*.csv"):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            if row["head_name"] == HOSTILE_DRUG:
                row["head_name"] = name
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


_MAKE_SESSION = """
import sys
from probekit import annotations as ann
from probekit.types import Query, Ranking
name, entity, dataset = sys.argv[1], sys.argv[2], sys.argv[3]
q = Query(id="may_treat:0000", subject=entity, relation="may_treat", template="[X] may treat [Y] .",
          golds=(entity,))
r = Ranking(query=q, ids=(0, 1), names=(entity, "Diabetes"), scores=(2.0, 1.0), gold_ranks=(1,), n_candidates=2)
print(ann.from_rankings([r], name=name, k=2, blind=False, dataset=dataset))
"""


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory):
    """The app served on hostile data: ``(app URL, listener, the hostile strings, the hostile entity's query id,
    the session id)``."""
    base = tmp_path_factory.mktemp("hostile")
    with Listener() as listener:
        strings = hostile(listener.url)
        corpora = base / "corpora"
        corpora.mkdir()
        note = "asthma " + " ".join(strings) + " affects the lung"
        (corpora / "pubmed_sents_no_punkt_10k_0").write_text(note + "\naspirin can prevent myocardial infarction\n")
        entity = f"{HOSTILE_DRUG} {' '.join(strings)}"
        _hostile_demo(base / "demo", entity)
        env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
               "PROBEKIT_DATA_DIR": str(base / "data"), "PROBEKIT_CORPORA_DIR": str(corpora),
               "PROBEKIT_DEMO_DIR": str(base / "demo"), "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
        env.pop("PROBEKIT_ORGANISER_TOKEN", None)  # the organiser's pages open without signing in
        session_name = f"Check {strings[0]} {strings[1]} {strings[3]}"
        dataset = f"demo {strings[5]} {strings[2]}"
        made = subprocess.run([sys.executable, "-c", _MAKE_SESSION, session_name, entity, dataset], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr[-2000:]
        from probekit.datasets import load_dataset

        ds = load_dataset("demo", path=base / "demo", use_cache=False)
        qid = next(q.id for q in ds.queries if q.subject == entity and q.relation == "may_treat")
        with serve(env, base / "server.log") as url:
            yield {"url": url, "listener": listener, "strings": strings, "entity": entity, "qid": qid,
                   "session": made.stdout.split()[-1], "env": env, "session_name": session_name,
                   "dataset": dataset, "note": note}


@pytest.fixture
def page(browser):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    yield pg
    ctx.close()


_FROM_DATA_JS = """(port) => [...document.querySelectorAll('img, a, iframe, script, link, source, object, embed')]
  .filter(e => ['src', 'href', 'data', 'srcset'].some(a => (e.getAttribute(a) || '').includes(port))
               || (e.tagName === 'SCRIPT' && e.textContent.includes(port)))
  .map(e => e.outerHTML.slice(0, 200))"""


def assert_shown_as_text(page, app, *texts: str) -> None:
    """No element of data's (by the listener's port) in the DOM, each of ``texts`` on the screen as typed, and
    no request at the listener."""
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
    assert page.locator(ERROR).count() == 0, page.locator(ERROR).first.inner_text()
    port = f":{app['listener'].port}"
    assert page.evaluate(_FROM_DATA_JS, port) == []
    # as typed: the invisible word joiners that stop GitHub's autolinks (pages._display.md) aside
    shown = " ".join(page.locator("body").inner_text().replace(WORD_JOINER, "").split())
    for text in texts:
        assert " ".join(text.split()) in shown, f"{text!r} is not on the page as text"
    assert app["listener"].paths == [], f"the page fetched data's URLs: {app['listener'].paths}"


@pytest.mark.timeout(600)
def test_corpora_shows_a_hostile_note_as_text(page, hostile_app):
    """Index the corpus against the (hostile) demo names, then look up Asthma → Lung: the note is shown as typed."""
    budget = Budget(500)
    start = page.locator(f"{key('cp_start')} button:enabled")
    page.goto(f"{hostile_app['url']}/corpora", timeout=budget.ms())
    wait_idle(page, title(page, "Corpora"), start, timeout=budget.ms())
    start.click()
    subject = page.locator(f"{key('cp_s')} input")
    wait_idle(page, subject, timeout=budget.ms())  # the lookup shows once the index is complete
    subject.fill("Asthma")
    subject.press("Enter")
    wait_idle(page, subject, timeout=budget.ms())
    target = page.locator(f"{key('cp_o')} input")
    target.fill("Lung")
    target.press("Enter")
    wait_idle(page, page.get_by_text("1 context(s)"), timeout=budget.ms())
    assert_shown_as_text(page, hostile_app, hostile_app["note"])


@pytest.mark.timeout(600)
def test_probe_shows_a_hostile_entity_and_its_query_as_text(page, hostile_app):
    """A share link to the hostile subject's query: the query's text (the subject in its template) is shown as
    typed, and so is the subject in the query picker."""
    budget = Budget(500)
    page.goto(f"{hostile_app['url']}/?model=default&dataset=demo&relation=may_treat&query={hostile_app['qid']}",
              timeout=budget.ms())
    wait_idle(page, title(page, "Probe"), *PROBE_RESULT(page), timeout=budget.ms())
    assert_shown_as_text(page, hostile_app, hostile_app["entity"])


@pytest.mark.timeout(500)
def test_a_tour_with_a_hostile_title_and_note_is_shown_as_text(page, hostile_app):
    """An imported tour's step title and note (tours travel between machines) on the Tours page and in the
    presenter's heading: shown as typed, nothing fetched. (Runs before the session test, whose expert link
    guards the organiser's pages.)"""
    from probekit import tours

    budget = Budget(440)
    app = hostile_app
    step_title = f"Step {app['strings'][0]} {app['strings'][2]}"
    step_note = f"Note {app['strings'][1]} {app['strings'][5]}"
    added = subprocess.run([sys.executable, "-m", "probekit", "tour", "add", "hostile",
                            f"/?model=default&dataset=demo&relation=may_treat&query={app['qid']}",
                            "--title", step_title, "--note", step_note], env=app["env"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert added.returncode == 0, added.stderr[-2000:]
    page.goto(f"{app['url']}/tours", timeout=budget.ms())
    wait_idle(page, title(page, "Tours"), page.get_by_text("Tour check"), timeout=budget.ms())
    assert_shown_as_text(page, app, step_title)
    page.goto(f"{app['url']}/?tour=hostile&present=1", timeout=budget.ms())
    wait_idle(page, page.get_by_text(tours.COUNTER.format(i=1, n=1)), page.locator(key("tp_result_probe")),
              timeout=budget.ms())
    assert_shown_as_text(page, app, step_title, step_note)


@pytest.mark.timeout(400)
def test_a_hostile_model_id_is_refused_as_text(page, hostile_app):
    """A model id typed in the sidebar's "Other" box (here carried by a share link, which fills that box) comes
    back in the refusal that names it: shown as typed there and in the box, nothing fetched. (Runs before the
    session test, whose expert link guards the organiser's pages: the Probe page would be a sign-in.)"""
    from urllib.parse import quote

    budget = Budget(340)
    app = hostile_app
    model = f"org/model {app['strings'][0]} {app['strings'][2]} {app['strings'][5]}"
    page.goto(f"{app['url']}/?model={quote(model)}&dataset=demo", timeout=budget.ms())
    refusal = page.locator(ERROR).filter(has_text="does not exist")
    wait_idle(page, title(page, "Probe"), refusal, timeout=budget.ms())
    assert page.locator(EXCEPTION).count() == 0
    assert page.evaluate(_FROM_DATA_JS, f":{app['listener'].port}") == []
    shown = " ".join(refusal.first.inner_text().replace(WORD_JOINER, "").split())
    assert " ".join(model.split()) in shown, shown
    assert page.locator(f"{key('pk_model_custom')} input").input_value() == model
    assert app["listener"].paths == [], f"the page fetched data's URLs: {app['listener'].paths}"


@pytest.mark.timeout(400)
def test_annotation_session_with_hostile_names_is_shown_as_text(page, hostile_app):
    """The session's name on the organiser's side of Annotate, its dataset's name on Annotation results,
    and the hostile entity (the query's subject and an answer) on the expert's personal link: shown as typed."""
    budget = Budget(340)
    app, sid = hostile_app, hostile_app["session"]
    page.goto(f"{app['url']}/annotate?session={sid}", timeout=budget.ms())
    wait_idle(page, title(page, "Annotate"), page.locator(key("an_name")), timeout=budget.ms())
    assert_shown_as_text(page, app, app["session_name"])
    page.goto(f"{app['url']}/results?session={sid}", timeout=budget.ms())
    wait_idle(page, title(page, "Annotation results"), page.locator(key("rs_session")), timeout=budget.ms())
    assert_shown_as_text(page, app, app["dataset"])  # the session's name is the picker's value (no tags either)
    # an expert's link guards the organiser's pages from then on: issued last (this test runs after the others)
    issued = subprocess.run([sys.executable, "-c", "import sys; from probekit import annotations as ann; "
                             "print(ann.issue_token(sys.argv[1], 'Expert'))", sid], env=app["env"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert issued.returncode == 0, issued.stderr[-2000:]
    page.goto(f"{app['url']}/?session={sid}&token={issued.stdout.split()[-1]}", timeout=budget.ms())
    wait_idle(page, page.get_by_text("0/2 answers"), timeout=budget.ms())
    assert_shown_as_text(page, app, app["entity"])

