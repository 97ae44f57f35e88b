"""A walk through every page of the app at 1024×768 (a projector, a small laptop) in Chromium, as a user sees it:
the server (``serve.py``, the organiser gate on) starts on the embedded default model with demo data, a store that
already holds what each page shows (a benchmark run, a layer sweep, template and free-text runs of two tiny MLMs,
an annotation session with two experts' ratings, a saved clinical note) and an organiser token.

The rules checked, page by page (:data:`WALK` says what each page's main result is):

- the main result's top is on the first screen (y < 768): a page that opens on its settings, its result below the
  fold, makes a user scroll for the one thing they came for;
- no Material icon is drawn as its name ("search", "leaderboard"…): the icon font is one of Streamlit's static
  files, which must answer 200 before the sign-in (the lock screen has icons too) and after it;
- no console error but the page-path probes Streamlit's frontend makes (documented in tests/test_browser.py).

One screenshot per page goes to ``$PROBEKIT_WALK_SCREENSHOTS`` (else pytest's temporary folder): ``PROBEKIT_WALK_
SCREENSHOTS=/tmp/walk .venv/bin/python -m pytest -m heavy tests/test_browser_walk.py``; it also keeps the Templates
slope chart and the Benchmark and Templates pages at 1280×900 (``wide_*.png``), where each accuracy table must show
an acc@10 column without scrolling sideways, and the presenter's Benchmark drill-down step must end above 768 px.
Heavy: the store's runs and the walk took 104–183 s on two cores (411 s while other test runs loaded them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("playwright")
from conftest import save_tiny_bert  # noqa: E402
from test_browser import (  # noqa: E402,F401 (skips without Chromium; no_console_errors: a fixture used here)
    CONSOLE,
    ERROR,
    EXCEPTION,
    PLOT,
    TABLE,
    TIMEOUT_MS,
    Budget,
    key,
    launch,
    no_console_errors,
    serve,
    title,
    wait_for_cookie,
    wait_idle,
)

from pages._nav import PAGES as ROUTES  # noqa: E402
from probekit.annotations.organiser import COOKIE  # noqa: E402

pytestmark = [pytest.mark.heavy, pytest.mark.browser]
SCREEN = {"width": 1024, "height": 768}
WIDE = {"width": 1280, "height": 900}
TOKEN = "organiser-token-of-the-walk"
TOUR = "walk"
PAGE_WAIT_MS = 150_000  # one page's wait at most: a missing result fails that page, not the whole walk's budget
TEST_TIMEOUT_S = 900
BUDGET_S = 780
ICON_NAMES = {"search", "segment", "library_books", "leaderboard", "compare_arrows", "stacked_line_chart", "grid_view",
              "coronavirus", "compare", "model_training", "query_stats", "rate_review", "fact_check", "slideshow",
              "arrow_upward", "arrow_downward", "delete", "lock", "visibility", "visibility_off", "tune", "info",
              "play_arrow", "download", "add", "check", "close", "expand_more", "expand_less", "chevron_right",
              "keyboard_arrow_down", "keyboard_arrow_right", "open_in_new", "history", "warning", "stop_circle",
              "link", "flag", "content_copy", "menu", "keyboard_double_arrow_left", "keyboard_double_arrow_right"}
"""Material icon names the app (its pages and Streamlit's own chrome) uses: text equal to one of them is an icon
drawn as its name (the font did not load)."""
NOTE_TEMPLATE = ("{subject} was suspected. MRI of the {g1} was normal, the {p0} too. Lesions were seen in the {g0}. "
                 "Biopsy of the {p1} was negative; the {g2} is involved.")
FREE = """prompt,object,subject,relation
metformin lowers blood glucose in [MASK],type 2 diabetes mellitus,metformin,may_treat
amoxicillin is first line for [MASK] in children,acute otitis media,amoxicillin,may_treat
aspirin lowers the risk of [MASK] after a first event,myocardial infarction,aspirin,may_prevent
"""


@dataclass(frozen=True)
class Stop:
    """One page of the walk: the path (with a link's parameters) it opens at, the main result (a locator) whose top
    must be on the first screen, and what a user does first (``act``), if anything, before that result shows."""

    path: str
    result: Callable
    act: Callable | None = None


def _templates_pick_runs(page, budget: Budget) -> None:
    """Pick every stored run in the Templates page's run picker (a user compares them: nothing is preselected)."""
    box = page.locator(f"{key('tpl_sel')} input")
    for _ in range(4):
        box.click()
        page.get_by_role("option").first.click()
        page.keyboard.press("Escape")
        wait_idle(page, page.locator(key("tpl_sel")), timeout=budget.ms())


def walk(data: dict) -> dict[str, Stop]:
    """Every page of the navigation (pages/_nav.py) and what its main result is."""
    ctx = "&".join(f"{k}={v}" for k, v in data["context"].items())
    stops = {
        "probe": Stop("?model=default&dataset=demo&relation=may_treat&query=may_treat:0003",
                      lambda p: p.locator(key("pk_chart")).or_(p.locator(TABLE)).first),
        "context": Stop(f"context?{ctx}", lambda p: p.locator(key("ctx_result"))),
        "corpora": Stop("corpora", lambda p: p.locator(key("cp_source"))),  # nothing indexed: its form
        "benchmark": Stop("benchmark", lambda p: p.get_by_role("heading", name=re.compile(r"^Accuracy \(%\)"))),
        "compare": Stop("compare", lambda p: p.locator(key("cmp_diff_chart")).or_(p.locator(TABLE)).first),
        "layers": Stop("layers", lambda p: p.locator(key("ly_heatmap"))),
        # nothing stored on these: the page is its form (its first control)
        "grid": Stop("grid", lambda p: p.locator(key("gr_how"))),
        "diskne": Stop("diskne", lambda p: p.locator(key("dk_source"))),
        "templates": Stop("templates", lambda p: p.locator(key("tpl_result")), _templates_pick_runs),
        "rewire": Stop("rewire", lambda p: p.locator(key("rw_start"))),
        "sweep": Stop("sweep", lambda p: p.get_by_text("No rewiring runs", exact=False)
                      .or_(p.locator(key("sw_start"))).first),
        "annotate": Stop(f"annotate?session={data['session']}&token={data['token']}",
                         lambda p: p.locator(key("an_row_0"))),
        "results": Stop(f"results?session={data['session']}", lambda p: p.locator(key("rs_result"))),
        "tours": Stop("tours", lambda p: p.locator(key("tr_tour"))),
        # outside the navigation: the presenter on the tour's Benchmark drill-down step
        "present": Stop(f"?tour={TOUR}&present=1&step=1", lambda p: p.locator("table").last),
    }
    assert set(stops) - {"present"} == {r.name for r in ROUTES}, "a page of the navigation is missing from the walk"
    return stops


def _prepare(base: Path, tiny_mlm_dir: Path, other_mlm_dir: Path) -> dict:
    """The store every page reads: what a user has after a first afternoon with the workbench."""
    from probekit import annotations as ann
    from probekit import models, store, tours
    from probekit.bench import layers, runs
    from probekit.context import documents
    from probekit.datasets import freetext, load_dataset
    from probekit.probes import get_probe
    from probekit.templates import stored

    demo = load_dataset("demo")
    model = models.load("default", device="cpu")
    run = runs.run_benchmark(model, demo, k=10)
    layers.run_layers(model, demo)
    free = freetext.parse(FREE, label="free.csv", name="free")
    mlms = [models.load(str(path), device="cpu") for path in (tiny_mlm_dir, other_mlm_dir)]
    for ds in (free, demo):  # the template runs last: the pages that open on the latest runs compare like with like
        for mlm in mlms:
            ranked = get_probe("mask_average").rank(mlm, ds.queries, ds.candidates(), k=10)
            rid = runs.save_run(ranked, model=mlm, dataset=ds, probe="mask_average", k=10)
            stored.score_run(rid, mlm, batch_size=128)
    sid = ann.from_run(run.run_id, name="Walk check", n_queries=4, k=10)
    for i, name in enumerate(("Ana", "Ben")):
        who = ann.join(sid, name)
        for qi in range(4):
            for a in ann.query_view(sid, who, qi)["answers"]:
                ann.rate(sid, a["item_id"], who, 1 + (a["position"] + i * (a["position"] % 2)) % 5)
    token = ann.issue_token(sid, "Dana")
    rel = demo.relations[0]
    q = max(demo.queries_for(rel), key=lambda q: len(q.golds))
    pool = [n for n in demo.candidates("relation", rel).names if n not in q.golds]
    note = NOTE_TEMPLATE.format(subject=q.subject, g0=q.golds[0].lower(), g1=q.golds[1].lower(),
                                g2=q.golds[-1].lower(), p0=pool[0].lower(), p1=pool[1].lower())
    digest = documents.save_document(note)
    tours.add_step(TOUR, tours.make_step("benchmark", {"runs": run.run_id, "metric": "acc@10", "set": "full",
                                                        "relation": rel}, title="Benchmark drill-down"))
    store.close_all()
    return {"session": sid, "token": token,
            "context": {"relation": rel, "query": q.id, "target": q.golds[0], "doc": digest}}


@pytest.fixture(scope="module")
def walk_server(tmp_path_factory, tiny_mlm_dir):
    base = tmp_path_factory.mktemp("walk")
    other = save_tiny_bert(tmp_path_factory.mktemp("walk_mlm_b"), mlm=True, seed=7)
    corpora = base / "corpora"  # a small stand-in for the elicit corpora, under pubmed_0's file name
    corpora.mkdir()
    from probekit.datasets import load_dataset
    from probekit.rewire import CORPUS_FILES

    (corpora / CORPUS_FILES["pubmed_0"]).write_text(
        "\n".join(f"In this cohort {q.subject.lower()} was associated with {g.lower()} in most patients"
                  for q in load_dataset("demo").queries for g in q.golds) + "\n")
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(base / "cache"), "PROBEKIT_DB": str(base / "pk.duckdb"),
           "PROBEKIT_CORPORA_DIR": str(corpora),
           "PROBEKIT_DATA_DIR": str(base / "data"), "PROBEKIT_MODELS_DIR": str(base / "models"),
           "PROBEKIT_VOCAB_DIR": str(base / "vocabularies"), "PROBEKIT_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "PROBEKIT_ORGANISER_TOKEN": TOKEN}
    with pytest.MonkeyPatch.context() as mp:  # this process writes the store the server reads
        for name in ("PROBEKIT_CACHE_DIR", "PROBEKIT_DB", "PROBEKIT_DATA_DIR", "PROBEKIT_MODELS_DIR",
                     "PROBEKIT_VOCAB_DIR", "PROBEKIT_ORGANISER_TOKEN"):
            mp.setenv(name, env[name])
        data = _prepare(base, tiny_mlm_dir, other)
    with serve(env, base / "server.log") as url:
        yield url, data, base / "server.log"


def icons_as_words(page) -> list[str]:
    """Visible text nodes (in the sidebar, buttons, expanders, alerts, tabs) that read as an icon's name."""
    return page.evaluate("""(names) => {
      const found = [];
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const t = n.textContent.trim();
        if (!names.includes(t)) continue;
        const el = n.parentElement;
        const font = getComputedStyle(el).fontFamily;
        const r = el.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        // drawn in the icon font, the ligature is a glyph; in any other font, it is the word
        if (!/Material/i.test(font) || !document.fonts.check(`16px ${font.split(',')[0]}`, t)) found.push(t);
      }
      return found;
    }""", sorted(ICON_NAMES))


def scrolled(table) -> str:
    """'' when the dataframe shows every column; else how far it scrolls sideways (its grid's scroller)."""
    widths = table.first.locator(".dvn-scroller").first.evaluate("e => [e.scrollWidth, e.clientWidth]")
    return "" if widths[0] <= widths[1] + 1 else f"{widths[0]} px of columns in {widths[1]} px"


def slope_labels_cut(page, shot: Path) -> list[str]:
    """The Templates slope chart's point labels that run past the figure's edges (they were cut: "3.9)", "(22.")."""
    chart = page.locator(f"{key('tpl_slope')} {PLOT}").first
    chart.scroll_into_view_if_needed()
    chart.screenshot(path=str(shot))
    box = chart.bounding_box()
    out = []
    for label in chart.locator(".textpoint text").all():
        b = label.bounding_box()
        if box and b and (b["x"] < box["x"] - 1 or b["x"] + b["width"] > box["x"] + box["width"] + 1):
            out.append(f"templates: slope label {label.text_content()!r} runs past the chart's edge")
    return out


FIRST_SCREEN = {"compare": ("cmp_metric",), "layers": ("ly_metric",), "grid": ("gr_run",), "diskne": ("dk_start",),
                "results": ("rs_consensus",)}
"""Per page, the controls every option (button) of which must be whole on the first 1024×768 screen: the Metric
control's options (MRR was cut behind a scroll at 1024 px; so was Results' "min" consensus), the primary action of a
page that opens on its form."""


def first_screen_cut(page, keys) -> list[str]:
    """The buttons of the ``keys`` controls not wholly inside their control's visible box or below the fold."""
    out = []
    for k in keys:
        control = page.locator(key(k)).first
        box = control.bounding_box()
        if box is None:
            out.append(f"{k} not drawn")
            continue
        for button in control.locator("button").all():
            b = button.bounding_box()
            right, bottom = b and b["x"] + b["width"], b and b["y"] + b["height"]
            if b is None or right > box["x"] + box["width"] + 1 or bottom > SCREEN["height"]:
                out.append(f"{k}: {button.inner_text().split()[-1]!r} cut or below the fold ({b})")
    return out


def headers(table, *, timeout_ms: float = 30_000) -> list[str]:
    """The column headers a dataframe draws now (its grid draws the columns in view only, and names them in its
    accessible table, which it fills after the canvas: read at once, it was sometimes still empty)."""
    cells = table.first.locator('[role="columnheader"]')
    cells.first.wait_for(state="attached", timeout=timeout_ms)
    return cells.all_inner_texts()


def fonts_ok(statics: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The static font files the browser fetched, with their status (each must be 200)."""
    return [(u, s) for u, s in statics if re.search(r"\.(woff2?|ttf)(\?|$)", u)]


@pytest.mark.timeout(TEST_TIMEOUT_S)
def test_walk_every_page_at_1024x768(walk_server, tmp_path):
    from playwright.sync_api import sync_playwright

    url, data, log = walk_server
    out = Path(os.environ.get("PROBEKIT_WALK_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    budget = Budget(BUDGET_S)
    problems: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        ctx = browser.new_context(viewport=SCREEN)
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        statics: list[tuple[str, int]] = []
        page.on("response", lambda r: statics.append((r.url, r.status)) if "/static/" in r.url else None)
        # before the sign-in: the lock screen's own icons need the font too
        page.goto(url, timeout=budget.ms())
        wait_idle(page, page.get_by_label("Organiser token"), timeout=budget.ms())
        page.wait_for_load_state("networkidle", timeout=budget.ms())
        before = fonts_ok(statics)
        assert before and all(s == 200 for _, s in before), before
        page.screenshot(path=str(out / "00_sign_in.png"))
        page.get_by_label("Organiser token").fill(TOKEN)
        page.get_by_role("button", name="Sign in").click()
        wait_idle(page, title(page, "Probe"), timeout=budget.ms())
        wait_for_cookie(ctx, COOKIE, budget)  # every page below is opened by URL: a new session
        stops = walk(data)
        for i, (name, heading) in enumerate([*((r.name, r.heading) for r in ROUTES), ("present", "drill-down")],
                                            start=1):
            stop = stops[name]
            shot = out / f"{i:02d}_{name}.png"
            target = page
            if name == "annotate":  # an expert's link opens the annotation-only app: a browser of its own
                target = browser.new_context(viewport=SCREEN).new_page()
                target.set_default_timeout(TIMEOUT_MS)
            wait = lambda: min(PAGE_WAIT_MS, budget.ms())  # noqa: E731
            target.goto(f"{url}/{stop.path}", timeout=wait())
            found = stop.result(target)
            try:
                wait_idle(target, title(target, heading), timeout=wait())
                if stop.act is not None:
                    stop.act(target, budget)
                wait_idle(target, found, timeout=wait())
            except AssertionError as err:
                problems.append(f"{name}: main result not shown ({str(err)[:300]})")
                target.screenshot(path=str(shot))
                continue
            target.evaluate("window.scrollTo(0, 0)")
            target.screenshot(path=str(shot))
            box = found.first.bounding_box()
            if box is None or box["y"] >= SCREEN["height"]:
                problems.append(f"{name}: main result's top at y={box and round(box['y'])} (the fold is at 768)")
            if name == "present" and box is not None and box["y"] + box["height"] > SCREEN["height"]:
                problems.append(f"present: the drill-down table ends at y={round(box['y'] + box['height'])}, past "
                                "the projector's 768 px")
            if target.locator(ERROR).count():
                problems.append(f"{name}: error shown: {target.locator(ERROR).first.inner_text()[:200]}")
            if target.locator(EXCEPTION).count():
                problems.append(f"{name}: exception {target.locator(EXCEPTION).first.inner_text()[:200]}")
            if words := icons_as_words(target):
                problems.append(f"{name}: icons drawn as words: {words}")
            if name == "templates":
                problems += slope_labels_cut(target, out / f"{i:02d}_{name}_slope.png")
            problems += [f"{name}: {p}" for p in first_screen_cut(target, FIRST_SCREEN.get(name, ()))]
            if target is not page:
                target.context.close()
        # at 1280 px the accuracy tables show their acc@10 without a horizontal scroll
        page.set_viewport_size(WIDE)
        for name, table in (("benchmark", lambda p: p.locator(TABLE).filter(visible=True).first),
                            ("templates", lambda p: p.locator(f"{key('tpl_result')} {TABLE}"))):
            stop = stops[name]
            page.goto(f"{url}/{stop.path}", timeout=budget.ms())
            if stop.act is not None:
                wait_idle(page, page.locator("h1"), timeout=min(PAGE_WAIT_MS, budget.ms()))
                stop.act(page, budget)
            wait_idle(page, table(page), timeout=min(PAGE_WAIT_MS, budget.ms()))
            page.screenshot(path=str(out / f"wide_{name}.png"))
            if not any("acc@10" in h for h in headers(table(page))):
                problems.append(f"{name} at 1280 px: no acc@10 among the table's visible columns "
                                f"{headers(table(page))} ({scrolled(table(page)) or 'no sideways scroll'})")
        page.wait_for_load_state("networkidle", timeout=budget.ms())
        after = fonts_ok(statics)
        assert all(s == 200 for _, s in after), after  # and after the sign-in
        browser.close()
    assert not problems, "\n".join(problems)
    assert "Traceback" not in log.read_text()
