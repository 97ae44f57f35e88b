"""Playwright tests in headless Chromium against a real ``streamlit run``: the main flow (open the app,
probe, see the top-k table), a typed query, a benchmark run started in the browser and reopened from the store,
one rank-change curve on the Context page, a short rewiring run whose checkpoints are swept, and a screenshot of
every page at 1280×720 (into ``$PROBEKIT_SCREENSHOTS``: ``make screenshots`` writes docs/screenshots/).

Robust on a loaded machine: every step waits for Streamlit to be idle *and* for the state it expects
(:func:`wait_idle`), never for a fixed time, and a test's waits come out of one budget that fits its timeout; a
locator that Streamlit may draw twice during a rerun is only narrowed with ``.first`` once the app is idle. Every
selector is in the block below, so a page that moves a widget needs one line changed here.

Uses Debian's chromium (``playwright install`` cannot download browsers here). Skips, saying so,
only when no browser is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from pages._nav import PAGES as ROUTES

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("PROBEKIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.browser

if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (the browser test needs it)",
                allow_module_level=True)

# ================================================================ selectors: the one place to adjust
# Element keys (.st-key-<key>) first, then roles with their names; texts only where nothing else identifies.
TIMEOUT_MS = 120_000  # one wait by default: generous, for a loaded 2-core machine (waits end once the state holds)
# A test's waits all come out of one budget (:class:`Budget`) that fits inside its pytest timeout, with room for the
# module's server start (up to 120 s, in the first test's setup): a slow run fails at the step it was on, saying so.
TEST_TIMEOUT_S = 600
BUDGET_S = 440

# Streamlit's own
APP = '[data-testid="stApp"]'  # carries data-test-script-state and data-test-connection-state
STATUS = '[data-testid="stStatusWidget"]'  # the "Running…" widget, there while a script runs
STALE = '[data-testid="stElementContainer"][data-stale="true"]'  # the last run's elements, until replaced
SKELETON = '[data-testid^="stSkeleton"], [data-testid="stAppSkeleton"]'  # an element still loading its code
EXCEPTION = '[data-testid="stException"]'
ERROR = '[data-testid="stAlertContentError"]'
PLOT = ".js-plotly-plot"
TABLE = '[data-testid="stDataFrame"]'  # st.dataframe: keyed, it gets .st-key-<key> only when it takes selections


def key(k: str) -> str:
    """The container of the widget (or plotly chart, or selectable dataframe) created with ``key=k``."""
    return f".st-key-{k}"


def title(page, text: str):
    return page.locator("h1").filter(has_text=text)


# Probe (pages/probe.py): dataset mode runs with pk_run, a typed query is a form submitted by pk_submit
PROBE_SOURCE_TYPED = lambda p: p.locator(key("pk_source")).get_by_role("radio", name="Type a query")
PROBE_QUERY_BOX = lambda p: p.get_by_role("textbox", name="Cloze query")
PROBE_BUTTON_NAME = re.compile(r"^Probe( Shortcut .*)?$")  # a button's name includes its shortcut
PROBE_RUN = lambda p: p.locator(f"{key('pk_run')} button").or_(p.get_by_role("button", name=PROBE_BUTTON_NAME))
PROBE_SUBMIT = lambda p: p.locator(f"{key('pk_submit')} button").or_(p.get_by_role("button", name=PROBE_BUTTON_NAME))
# the result: the top-k table (drawn on a canvas), its chart and the caption "**query** — model, probe, N candidates"
PROBE_RESULT = lambda p, text=re.compile(r"[\d,]+ candidates"): [p.locator(TABLE), p.locator(PLOT), p.get_by_text(text)]
PROBE_STOP = lambda p: p.locator(f"{key('pk_stop')} button")  # beside the bar of work done in the page's own run
PROBE_STOPPED = lambda p: p.get_by_text("Stopped: no answer was computed", exact=False)
# Benchmark (pages/benchmark.py)
BM_EMPTY = lambda p: p.get_by_text("No stored runs yet", exact=False)
BM_START = lambda p: p.locator(f"{key('bm_start')} button")
BM_CANCEL = lambda p: p.locator(key("bm_cancel"))  # the job panel's Cancel: there while the benchmark runs
BM_RESULT = lambda p: [p.locator(TABLE), p.locator(f"{key('bm_rel_chart')} {PLOT}"),
                       p.locator(f"{key('bm_len_chart')} {PLOT}")]
# Context (pages/context.py)
CTX_DOC = lambda p: p.locator(f"{key('ctx_doc')} textarea")
CTX_RUN = lambda p: p.locator(f"{key('ctx_run')} button")
CTX_RUN_ENABLED = lambda p: p.locator(f"{key('ctx_run')} button:enabled")  # enabled once the note is segmented
CTX_MARKS = lambda p: p.locator("mark")  # the note with its entities marked
CTX_CURVE = lambda p: p.locator(f"{key('ctx_curve')} {PLOT}")
CTX_TRACES = lambda p: p.locator(f"{key('ctx_curve')} {PLOT} .scatterlayer .trace")
CTX_UCM = lambda p: p.get_by_text(re.compile(r"Over \d+ steps? that added a correct object|No correct object"))
# Rewire and sweep (pages/rewire.py, pages/sweep.py)
RW_EMPTY = lambda p: p.get_by_text("No rewiring runs yet", exact=False)
RW_NUMBER = lambda p, k: p.locator(f"{key(k)} input")  # rw_steps, rw_every, rw_batch
RW_START = lambda p: p.locator(f"{key('rw_start')} button")
RW_STOP = lambda p: p.locator(key("rw_stop"))  # the job panel's Stop button: there while training runs
RW_LIVE = lambda p: p.locator(f"{key('rw_live')} {PLOT}")  # the live loss curve (a rerun may draw it twice)
RW_CURVE = lambda p: p.locator(f"{key('rw_curve')} {PLOT}")  # the selected finished run's curve
RW_CHECKPOINTS = lambda p: p.locator(TABLE)  # the run's checkpoints (rw_ckpts)
RW_TO_SWEEP = lambda p: p.locator(f"{key('rw_to_sweep')} button")
SW_START = lambda p: p.locator(f"{key('sw_start')} button:enabled")
SW_CANCEL = lambda p: p.locator(key("sw_cancel"))  # the job panel's Cancel: there while the sweep runs
SW_RESULT = lambda p: [p.locator(f"{key('sw_macro')} {PLOT}"), p.locator(f"{key('sw_relations')} {PLOT}"),
                       p.get_by_text("best checkpoint (step", exact=False)]

# Every page of the app, from the list app.py's navigation is built from (pages/_nav.py: a new page is walked
# without a change here): (URL path, screenshot name, its heading[, the state to wait for]). A page opened another way
# is in OPEN: the default page (Probe) on a share link, which probes at once.
OPEN = {"probe": ("?model=default&dataset=demo&relation=may_treat&query=may_treat:0003", PROBE_RESULT)}
PAGES = [(OPEN[r.name][0], r.name, r.heading, *OPEN[r.name][1:]) if r.name in OPEN else (r.url_path, r.name, r.heading)
         for r in sorted(ROUTES, key=lambda r: not r.default)]  # the default page first (test_browser_disconnect)
SCREEN = {"width": 1280, "height": 720}
# ================================================================


# Idle: connected, no script (or fragment) running, no "Running…" widget, no element left from the last run, no
# element still loading its code (widgets render lazily, some only after the script has finished).
_IDLE_JS = f"""() => {{
  const app = document.querySelector('{APP}');
  return !!app && app.getAttribute('data-test-connection-state') === 'CONNECTED'
    && app.getAttribute('data-test-script-state') === 'notRunning'
    && !document.querySelector('{STATUS}') && !document.querySelector('{STALE}')
    && !document.querySelector('{SKELETON}');
}}"""


def wait_idle(page, *expected, timeout: float = TIMEOUT_MS) -> None:
    """Wait until Streamlit has finished running and every ``expected`` state holds at the same moment.

    ``expected``: a Locator (some element of it visible; ``button:enabled`` and the like express more) or a
    ``(Locator, n)`` pair (exactly n elements). Waiting for the expected state too closes the gap between an
    action and the rerun it causes (the app still looks idle until the rerun starts); both are checked again
    together, so a state seen during a rerun (a stale element) does not count.
    """
    from playwright.sync_api import expect

    deadline = time.monotonic() + timeout / 1000
    left = lambda: max(1.0, (deadline - time.monotonic()) * 1000)

    def holds(e) -> bool:
        if isinstance(e, tuple):
            return e[0].count() == e[1]
        return e.filter(visible=True).count() > 0

    while True:
        try:
            for e in expected:
                if isinstance(e, tuple):
                    expect(e[0]).to_have_count(e[1], timeout=left())
                else:
                    e.filter(visible=True).first.wait_for(timeout=left())
            page.wait_for_function(_IDLE_JS, timeout=left(), polling="raf")
        except Exception as err:  # a Playwright timeout: say what was awaited
            raise AssertionError(f"app not idle with {expected} within {timeout / 1000:.0f} s: {err}") from err
        if page.evaluate(_IDLE_JS) and all(holds(e) for e in expected):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"app not idle with {expected} within {timeout / 1000:.0f} s")


class Budget:
    """One time budget for a whole test, inside its pytest timeout: every wait gets what is left of it, so a slow
    run fails at the step it was on, saying so, rather than being killed by the timeout around the test."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def ms(self) -> float:
        """Milliseconds left (at least one second, so a state that already holds is still seen)."""
        return max(1.0, self.deadline - time.monotonic()) * 1000


def wait_for_cookie(context, name: str, budget: Budget) -> None:
    """Wait until the browser holds the cookie ``name``: a sign-in leaves it from a script in the page the sign-in
    reruns, which the browser may run after that page looks idle; a page opened by URL before then is a new session
    without it (the sign-in screen again)."""
    while not any(c["name"] == name for c in context.cookies()):
        assert budget.ms() > 1000, f"the browser never held the cookie {name!r}"
        time.sleep(0.1)


def no_exception(page) -> None:
    assert page.locator(EXCEPTION).count() == 0, page.locator(EXCEPTION).first.inner_text()
    assert page.locator(ERROR).count() == 0, page.locator(ERROR).first.inner_text()


def runs_asked(page) -> list[str]:
    """The script runs ``page``'s browser asks the server for from now on, as they are sent: "page" for a run of
    the whole page, "fragment" for a fragment's alone (Streamlit's BackMsg ``rerun_script``, read off the
    websocket)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    asked: list[str] = []

    def sent(payload) -> None:
        if isinstance(payload, (bytes, bytearray)):
            msg = BackMsg()
            msg.ParseFromString(bytes(payload))
            if msg.WhichOneof("type") == "rerun_script":
                asked.append("fragment" if msg.rerun_script.fragment_id else "page")

    page.on("websocket", lambda ws: ws.on("framesent", sent))
    return asked


def open_page(page, url: str, title_text: str, *expected, timeout: float = TIMEOUT_MS) -> None:
    page.goto(url, timeout=timeout)
    wait_idle(page, title(page, title_text), *expected, timeout=timeout)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(env: dict, log_path: Path, script: Path = ROOT / "serve.py"):
    """``streamlit run serve.py`` (app.py behind the organiser gate, as ``make app`` serves it; or ``script``) on a
    free port with ``env``; yields its URL once healthy, stops it after."""
    port = _free_port()
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(script), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--server.fileWatcherType", "none",
         "--browser.gatherUsageStats", "false"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"streamlit exited: {log_path.read_text()[-2000:]}")
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.5)  # polling the health endpoint, not timing the app
        else:
            pytest.fail(f"streamlit did not start: {log_path.read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


CONSOLE: list[str] = []
"""Console errors and uncaught page errors of every browser context made by :func:`launch` (a 404 under a page's
path, a script error): :func:`no_console_errors` fails the test that caused one."""


PAGE_PATHS = {p[0] for p in PAGES if p[0] and not p[0].startswith("?")}
KNOWN_PROBE = re.compile(r"^https?://[^/]+/(?P<page>[^/?]+)/_stcore/(health|host-config)$")
"""Streamlit's frontend, opened under a page's path, first looks for its server there (a 404), then at the root
(an open Streamlit bug, streamlit#7074; README: Pages). Only these two requests under a page's own path pass."""


def _known_probe(msg) -> bool:
    found = KNOWN_PROBE.match(msg.location.get("url", ""))
    return bool(found) and found["page"] in PAGE_PATHS and "404" in msg.text


EXPECTED: list[re.Pattern] = []
"""Console errors the running test causes on purpose (see :func:`expect_console_error`); cleared after each test."""


def expect_console_error(pattern: str) -> None:
    """Declare that this test provokes console errors matching ``pattern`` (searched in "text (url)"), as a test
    that makes a request fail on purpose does: those, and only those, do not fail it."""
    EXPECTED.append(re.compile(pattern))


def _watch(ctx):
    def seen(msg) -> None:
        line = f"{msg.text} ({msg.location.get('url', '')})"
        if msg.type == "error" and not _known_probe(msg) and not any(p.search(line) for p in EXPECTED):
            CONSOLE.append(line)

    ctx.on("console", seen)
    ctx.on("weberror", lambda err: CONSOLE.append(f"uncaught: {err.error}"))
    return ctx


def launch(pw):
    """Debian's Chromium; every context it makes reports its console errors to :data:`CONSOLE`."""
    b = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                           args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
    make = b.new_context
    b.new_context = lambda *args, **kwargs: _watch(make(*args, **kwargs))  # type: ignore[method-assign]
    return b


@pytest.fixture(autouse=True)
def no_console_errors():
    """Any console error during a browser test fails it (import this fixture into every browser test module)."""
    CONSOLE.clear()
    yield
    errors, CONSOLE[:], EXPECTED[:] = list(CONSOLE), [], []
    assert not errors, "console errors:\n" + "\n".join(errors[:20])


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    base = tmp_path_factory.mktemp("browser")
    corpora = base / "corpora"  # a small stand-in for the elicit corpora, under pubmed_0's file name
    corpora.mkdir()
    from probekit.datasets import load_dataset
    from probekit.rewire import CORPUS_FILES

    demo = load_dataset("demo")
    (corpora / CORPUS_FILES["pubmed_0"]).write_text(
        "\n".join(f"In this cohort {q.subject.lower()} was associated with {g.lower()} in most patients"
                  for q in demo.queries for g in q.golds) + "\n")
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
           "PROBEKIT_DATA_DIR": str(base / "data"), "PROBEKIT_CORPORA_DIR": str(corpora),
           "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)  # the organiser's pages open without signing in
    with serve(env, base / "server.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(TIMEOUT_MS)
    yield pg
    ctx.close()


def test_probe_main_flow(page, app_url):
    open_page(page, app_url, "Probe", PROBE_RUN(page))
    PROBE_RUN(page).first.click()
    wait_idle(page, *PROBE_RESULT(page))
    assert "query=" in page.url and "model=" in page.url
    no_exception(page)


def test_probe_typed_query(page, app_url):
    """A typed cloze query is probed by pressing Enter in the query box (the rule: Enter in the query box runs
    the probe), shown as the result's caption; the URL holds the text."""
    open_page(page, app_url, "Probe", PROBE_SOURCE_TYPED(page))
    PROBE_SOURCE_TYPED(page).click()
    wait_idle(page, PROBE_QUERY_BOX(page), PROBE_SUBMIT(page))
    PROBE_QUERY_BOX(page).fill("Aspirin might prevent [MASK].")
    PROBE_QUERY_BOX(page).press("Enter")  # focus stays in the box: the form submits
    wait_idle(page, *PROBE_RESULT(page, "Aspirin might prevent"))
    assert "text=" in page.url
    no_exception(page)


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_probe_stops_a_cold_encoding(page, app_url):
    """A cold first probe on MedLAMA hard encodes its 17,532 names (minutes on two cores) in the page's own script
    run: the Stop button beside the bar ends it at the bar's next update, and the page says that it stopped."""
    medlama = os.environ.get("PROBEKIT_MEDLAMA_DIR")
    if not medlama or not (Path(medlama) / "2021AA").is_dir():
        pytest.skip("MedLAMA not found (set PROBEKIT_MEDLAMA_DIR): the cold encoding to stop is its hard set's")
    budget = Budget(BUDGET_S)
    open_page(page, f"{app_url}/?dataset=medlama:hard", "Probe", PROBE_RUN(page), timeout=budget.ms())
    PROBE_RUN(page).first.click()
    PROBE_STOP(page).wait_for(timeout=budget.ms())
    PROBE_STOP(page).click()
    wait_idle(page, PROBE_STOPPED(page), (PROBE_STOP(page), 0), timeout=budget.ms())
    assert page.locator(TABLE).count() == 0  # no answer table: the work ended
    no_exception(page)


@pytest.mark.heavy  # ~21 s of cold probes: its AppTest twin (tests/test_page_probe.py) stays in the default suite
def test_every_probe_shows_one_table_per_usable_probe(browser, app_url, tiny_mlm):
    """At 1280×720 on a tiny MLM (an MLM head: every probe but the encoder-decoder one applies), the "Every probe"
    toggle and Probe show one top-k table per usable probe, two to a row, where they disagree, and the probe that
    could not run named; the relation's answers for all, so that the cold probes take seconds."""
    from probekit.probes import probes_for

    budget = Budget(BUDGET_S)
    page = browser.new_context(viewport=SCREEN).new_page()
    open_page(page, f"{app_url}/?model={tiny_mlm.id}&dataset=demo&relation=may_treat&vocab=relation&k=3", "Probe",
              PROBE_RUN(page), timeout=budget.ms())
    page.locator(key("pk_every")).get_by_text("Every probe").click()
    wait_idle(page, page.locator(f"{key('pk_every')} input:checked"), timeout=budget.ms())
    PROBE_RUN(page).first.click()
    cells = {p: page.locator('[data-testid="stColumn"]').filter(has=page.get_by_text(f"{p} · gold rank"))
             for p in probes_for(tiny_mlm)}
    wait_idle(page, page.get_by_role("heading", name="Where they disagree"),
              *[cell.locator(TABLE) for cell in cells.values()], timeout=budget.ms())
    for p, cell in cells.items():
        assert cell.count() == 1 and cell.locator(TABLE).first.is_visible(), p  # one cell, its table drawn
        box = cell.bounding_box()
        assert box is not None and box["width"] >= 0.3 * SCREEN["width"], (p, box)  # two per row: readable
    assert page.get_by_text(re.compile(r"^Not run: probe 'generative' needs")).count() == 1
    assert "every=true" in page.url
    no_exception(page)
    page.context.close()


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_benchmark_run_then_reopen_from_the_store(page, app_url):
    """Start a demo benchmark in the browser (background job, live progress), see its charts, then open the
    page afresh: the stored run is shown without running anything."""
    budget = Budget(BUDGET_S)
    runs = runs_asked(page)
    open_page(page, f"{app_url}/benchmark", "Benchmark", BM_EMPTY(page), BM_START(page), timeout=budget.ms())
    before = len(runs)
    BM_START(page).click()
    wait_idle(page, *BM_RESULT(page), (BM_CANCEL(page), 0), timeout=budget.ms())
    no_exception(page)
    # watching cost the job no script run: the browser drew the progress from the job's status endpoint and asked
    # for two runs only, the click's and the finished job's (a panel polling by rerunning asks for a fragment run
    # every second)
    assert runs[before:] == ["page"] * len(runs[before:]) and 1 <= len(runs[before:]) <= 2, runs[before:]
    # a new session: the run from DuckDB
    open_page(page, f"{app_url}/benchmark", "Benchmark", *BM_RESULT(page), timeout=budget.ms())
    assert BM_EMPTY(page).count() == 0
    no_exception(page)


def test_context_draws_a_rank_change_curve(page, app_url):
    """Paste a note about the default query's subject and golds, see it segmented, run, see the curve."""
    from probekit.datasets import load_dataset

    ds = load_dataset("demo")
    q = max(ds.queries_for(ds.relations[0]), key=lambda q: len(q.golds))  # the page's default query
    pool = [n for n in ds.candidates("relation", ds.relations[0]).names if n not in q.golds]
    note = (f"{q.subject} was suspected. MRI of the {q.golds[1].lower()} was normal, the {pool[0].lower()} too. "
            f"Lesions were seen in the {q.golds[0].lower()}. Biopsy of the {pool[1].lower()} was negative; "
            f"the {q.golds[-1].lower()} is involved.")
    open_page(page, f"{app_url}/context", "Context", CTX_DOC(page))
    CTX_DOC(page).fill(note)
    CTX_DOC(page).press("Control+Enter")
    wait_idle(page, CTX_RUN_ENABLED(page), CTX_MARKS(page))
    CTX_RUN(page).click()
    wait_idle(page, CTX_CURVE(page), CTX_UCM(page))
    assert CTX_TRACES(page).count() >= 4  # O_t, O_cor, O_incor, O_a
    no_exception(page)


def _set_number(page, widget_key: str, value: int, timeout: float = TIMEOUT_MS) -> None:
    from playwright.sync_api import expect

    box = RW_NUMBER(page, widget_key)
    box.fill(str(value))
    box.press("Enter")
    wait_idle(page, box, timeout=timeout)
    expect(box).to_have_value(str(value))


@pytest.mark.heavy  # 34-46 s of training and sweeping: its AppTest twins (tests/test_page_rewire.py) stay
@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_rewire_then_sweep_the_checkpoints(page, app_url):
    """Rewire the default model on pubmed_0 for six steps from the UI (live loss, checkpoints at steps 3 and 6),
    then sweep its checkpoints on the demo dataset and see the acc@k-vs-step plot."""
    budget = Budget(BUDGET_S)
    open_page(page, f"{app_url}/rewire", "rewiring", RW_EMPTY(page), RW_START(page), timeout=budget.ms())
    _set_number(page, "rw_steps", 6, budget.ms())
    _set_number(page, "rw_every", 3, budget.ms())
    _set_number(page, "rw_batch", 8, budget.ms())
    RW_START(page).click()
    # while it trains the page reruns after each step (at most every 2 s): wait for a visible live curve
    try:
        RW_LIVE(page).filter(visible=True).first.wait_for(timeout=budget.ms())
    except Exception as err:  # a Playwright timeout: say what was awaited
        raise AssertionError(f"no live loss curve within the test's budget of {BUDGET_S} s: {err}") from err
    wait_idle(page, RW_CURVE(page), RW_CHECKPOINTS(page), (RW_STOP(page), 0), (RW_LIVE(page), 0),
              timeout=budget.ms())
    assert RW_TO_SWEEP(page).is_enabled()  # checkpoints at steps 3 and 6
    # Once a defect: the picker's text carried the run's progress and kept "3/6 steps · running" after training
    # finished (the browser keeps a selected option's text). The state is in the caption, the picker names the run.
    assert page.get_by_text("done · 6/6 steps").count() >= 1
    assert "running" not in page.locator(f"{key('rw_sel')}").inner_text()
    no_exception(page)
    RW_TO_SWEEP(page).click()
    wait_idle(page, title(page, "Checkpoint sweep"), SW_START(page), timeout=budget.ms())
    SW_START(page).click()
    wait_idle(page, *SW_RESULT(page), (SW_CANCEL(page), 0), timeout=budget.ms())
    no_exception(page)


@pytest.mark.heavy  # 26-34 s; each page has its AppTest file in the default suite, and the heavy walk opens all
def test_screenshot_every_page(browser, app_url, tmp_path):
    """Every page at 1280×720, loaded, idle, without an exception or error; runs last, so the pages show the
    runs the tests above stored."""
    # $PROBEKIT_SCREENSHOTS (`make screenshots`: docs/screenshots), else pytest's temporary folder: a plain test run
    # leaves the repository clean
    out = Path(os.environ.get("PROBEKIT_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    ctx = browser.new_context(viewport=SCREEN)
    page = ctx.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        for path, name, title_text, *state in PAGES:
            open_page(page, f"{app_url}/{path}", title_text, *(state[0](page) if state else []))
            assert page.locator(EXCEPTION).count() == 0, f"{name}: {page.locator(EXCEPTION).first.inner_text()}"
            assert page.locator(ERROR).count() == 0, f"{name}: {page.locator(ERROR).first.inner_text()}"
            page.screenshot(path=str(out / f"{name}.png"))
            assert (out / f"{name}.png").stat().st_size > 10_000, name
    finally:
        ctx.close()
