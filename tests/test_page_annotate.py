"""AppTest of the Annotate and Annotation results pages: a whole small session with a tiny model: create, hand out
personal links, rate by keyboard buttons and clicks, skip, undo, resume in a new browser session, results and
exports; and the roles: an expert link opens the annotation-only app, a wrong token gets a message and
no data, nobody acts as another expert, the organiser token guards the organiser pages."""

from __future__ import annotations

import os

import pytest
from apptest_utils import as_text, downloads, errors, immediate, open_app, rendered

from pages._display import WORD_JOINER
from probekit import annotations as ann
from probekit.errors import ProbekitError

EXPERTS_PANEL = "Progress, experts and their links"


def create_session(model_dir, *, blind=True, n=2, k=3) -> str:
    at = open_app("results", model=str(model_dir))
    assert errors(at) == []
    assert any("No annotation session yet" in i.value for i in at.info)
    at.number_input(key="rs_n").set_value(n)
    at.number_input(key="rs_k").set_value(k)
    at.text_input(key="rs_org").set_value("Org")
    if not blind:
        at.toggle(key="rs_blind").set_value(False)
    at.button(key="rs_create").click().run()
    assert errors(at) == []
    sid = at.session_state["rs_session"]
    assert at.query_params["session"] in (sid, [sid])
    assert any("No expert yet" in c.value for c in at.caption)  # the experts panel, ready for links
    return sid


def annotate(sid, token=None):
    """A new browser session on the Annotate page: the organiser's side, or an expert's personal link."""
    at = open_app("annotate", query_params={"session": sid, **({"token": token} if token else {})})
    assert errors(at) == []
    return at


def link(sid, name):
    """A personal link's token, as the organiser's Create link hands it out."""
    return ann.issue_token(sid, name)


def qp(at, name):
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def texts(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.subheader])


def pressed(at, position) -> int | None:
    """The score button shown as chosen (primary) for the answer at ``position``."""
    chosen = [s for s in range(1, 6) if at.button(key=f"an_b_{position}_{s}").proto.type == "primary"]
    return chosen[0] if chosen else None


def current(at, sid, who="alice"):
    """The query index the page shows this expert (kept on the page's Desk object in session state)."""
    return at.session_state["an_desk"].query[(sid, who)]


def test_whole_session_rate_undo_resume_results(tiny_encoder_dir):
    sid = create_session(tiny_encoder_dir)
    # the organiser starts annotating under a new name: a personal link is issued and opened (its token in the URL)
    at = annotate(sid)
    at.text_input(key="an_name").set_value("Alice").run()
    at.button(key="an_start").click().run()
    assert errors(at) == [] and "annotator" not in at.query_params
    token = qp(at, "token")
    assert ann.verify_token(token, session_id=sid).name == "Alice"
    assert current(at, sid) == 0
    assert any("Annotating as **Alice**" in c.value for c in at.caption)
    assert at.sidebar.selectbox.len == 0  # the annotation-only app: no model or dataset pickers
    page = texts(at)
    assert "Perfectly answers the query" in page and "Completely unrelated" in page  # rubric always visible
    assert "gold" not in page.lower().replace("gold (correct)", "") and "rank " not in page  # blind
    # keyboard buttons rate the marked answer (the first not yet rated), then the mark moves on
    assert at.markdown[0].value.startswith("▶")
    # each answer on its line, its buttons in a row of their own that never wraps: beside a long answer "5" and
    # "skip" wrapped onto the next line at 1024 px
    buttons = at.main.get_by_key("an_row_0").get_by_key("an_buttons_0")
    assert [b.key for b in buttons.button] == [f"an_b_0_{s}" for s in range(1, 6)] + ["an_s_0"]
    assert not buttons.markdown and not buttons.proto.flex_container.wrap
    at.button(key="an_k5").click().run()
    at.button(key="an_k3").click().run()
    assert pressed(at, 0) == 5 and pressed(at, 1) == 3 and at.markdown[2].value.startswith("▶")
    at.button(key="an_next").click().run()  # Enter before the query is done: a warning, no move
    assert any("every answer" in w.value for w in at.warning) and current(at, sid) == 0
    at.button(key="an_skip").click().run()
    assert any("Enter" in s.value for s in at.success)
    at.button(key="an_b_0_4").click().run()  # a click changes a rating
    assert pressed(at, 0) == 4
    at.button(key="an_next").click().run()
    assert current(at, sid) == 1 and errors(at) == []
    p = ann.progress(sid, "alice")
    assert (p["done"], p["total"], p["rated"], p["skipped"]) == (3, 6, 2, 1)
    assert p["seconds_per_answer"] is not None
    # undo takes back the last action (the edit 5 -> 4) and shows that query again
    at.button(key="an_undo").click().run()
    assert current(at, sid) == 0 and pressed(at, 0) == 5
    at.button(key="an_undo").click().run()  # then the skip
    assert at.markdown[2].value.startswith("▶")
    # resume: a new browser session with the same URL lands on the unfinished query, progress intact
    again = annotate(sid, token)
    assert current(again, sid) == 0 and pressed(again, 0) == 5 and pressed(again, 1) == 3
    assert again.get("progress")[0].value == 33  # 2 of 6 answers
    for key in ("an_k1", "an_next", "an_k2", "an_k2", "an_k4", "an_next"):
        again.button(key=key).click().run()
    assert errors(again) == []
    assert any("All done" in s.value for s in again.success)
    # a second expert never sees the first one's ratings
    bob = annotate(sid, link(sid, "Bob"))
    assert current(bob, sid, "bob") == 0 and all(pressed(bob, i) is None for i in range(3))
    for _ in range(2):
        for pos in range(3):
            bob.button(key=f"an_b_{pos}_{5 if pos == 0 else 2}").click().run()
        bob.button(key="an_next").click().run()
    assert ann.progress(sid, "bob")["done"] == 6
    # the organiser's results
    res = open_app("results", query_params={"session": sid})
    assert errors(res) == []
    # Table 5 first; the progress and the experts' links fold under it once there are ratings (it sat at y=1,008)
    [panel] = [e for e in res.expander if e.label == EXPERTS_PANEL]
    assert not panel.proto.expanded
    order = list(res.main)
    assert next(i for i, e in enumerate(order) if getattr(e, "type", None) == "subheader" and "Table 5" in e.value) \
        < order.index(panel)
    frames = [d.value for d in res.dataframe]
    table5 = next(f for f in frames if "gold" in f.columns and "total" in f.columns)
    assert list(table5.answers) == ["top-1"] * 3 + ["top-3"] * 3
    assert table5.total.iloc[-1] == 6  # 2 queries x 3 answers, all rated by both (consensus)
    agree = next(f for f in frames if "alpha (ordinal)" in f.columns)
    assert agree.relation[0] == "all" and agree.annotators[0] == 2
    assert any("expert acc (≥5)" in f.columns for f in frames)
    res.segmented_control(key="rs_threshold").set_value(4).run()
    assert errors(res) == [] and any("expert acc (≥4)" in d.value.columns for d in res.dataframe)
    res.selectbox(key="rs_whose").set_value("Bob").run()  # names as typed
    assert errors(res) == []
    assert len(res.get("download_button")) == 4  # missing facts + CSV/Parquet/JSONL


def test_not_blind_session_shows_gold_and_scores(tiny_encoder_dir):
    sid = create_session(tiny_encoder_dir, blind=False, n=1, k=2)
    at = annotate(sid, link(sid, "Carol"))
    page = texts(at)
    assert "rank 1" in page and "rank 2" in page and "gold:" in page


def test_bad_session_and_name_are_messages(tiny_encoder_dir):
    at = open_app("annotate", query_params={"session": "s-nope"})
    assert not at.exception and any("no annotation session 's-nope'" in e.value for e in at.error)
    at.button(key="an_other").click().run()
    assert "session" not in at.query_params and not at.exception
    sid = create_session(tiny_encoder_dir, n=1, k=2)
    at = annotate(sid)
    at.text_input(key="an_name").set_value("<script>").run()
    at.button(key="an_start").click().run()
    assert not at.exception and any("plain name" in e.value for e in at.error)
    assert "token" not in at.query_params
    empty = open_app("annotate")
    assert not empty.exception and [s.key for s in empty.selectbox if s.key == "an_pick"] == ["an_pick"]


def rated_by(sid, name, n):
    """``name`` rates the first ``n`` answers of query 0 with 4 (through the API); returns their key."""
    who = ann.join(sid, name)
    for a in ann.query_view(sid, who, 0)["answers"][:n]:
        ann.rate(sid, a["item_id"], who, 4)
    return who


def organiser_widgets(at) -> list[str]:
    """Keys of the organiser pages' widgets on screen, and the sidebar's pickers."""
    keys = [w.key for kind in ("button", "selectbox", "text_input", "number_input", "toggle") for w in at.get(kind)]
    return [k for k in keys if k and k.startswith(("rs_", "pk_model", "pk_dataset", "pb_", "bm_"))]


def test_expert_link_cannot_open_organiser_pages():
    """The rule: the expert's link "opens an annotation-only app (no sidebar pages, no model/dataset pickers)";
    asking it for the Annotation results page (gold lists, other experts' scores, exports) still gets Annotate."""
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(2, k=2), name="blinded", k=2)
    rated_by(sid, "Carol", 2)
    token = link(sid, "Dana")
    at = open_app(None, query_params={"session": sid, "token": token})  # the app's root: Annotate
    assert errors(at) == [] and [t.value for t in at.title] == ["Annotate"]
    assert organiser_widgets(at) == [] and at.sidebar.selectbox.len == 0
    assert at.get("dataframe") == [] and at.get("download_button") == []
    assert "Carol" not in texts(at) and any("Annotating as **Dana**" in c.value for c in at.caption)
    for page in ("results", "probe", "benchmark", "compare"):  # the expert app has no other page to switch to
        with pytest.raises(ValueError, match=rf"navigation page for '[^']*pages/{page}.py'"):
            at.switch_page(f"pages/{page}.py")
    at.switch_page("pages/annotate.py").run()
    assert errors(at) == [] and organiser_widgets(at) == []
    # the token stays with the browser session when the URL loses it (e.g. the expert edits the address)
    at = open_app("annotate", query_params={"session": sid, "token": token})
    at.query_params.clear()
    at.run()
    assert errors(at) == [] and any("Annotating as **Dana**" in c.value for c in at.caption)
    assert qp(at, "token") == token and organiser_widgets(at) == []


@pytest.mark.parametrize("bad", ["x" * 32, "short", "revoked", "other session"])
def test_wrong_token_gets_a_clear_message_and_no_data(bad):
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(2, k=2), name="secret session", k=2)
    rated_by(sid, "Carol", 2)
    token = bad
    if bad == "revoked":
        token = link(sid, "Eve")
        ann.revoke_tokens(sid, "Eve")
    elif bad == "other session":
        token = link(ann.from_rankings(rankings(1, k=2), name="another", k=2), "Eve")
    for page in ("annotate", "results"):
        at = open_app(page, query_params={"session": sid, "token": token})
        assert not at.exception and [e.value for e in at.error] == [ann.INVALID_LINK]
        shown = texts(at) + "".join(b.label for b in at.button)
        assert "secret session" not in shown and "Carol" not in shown and "a0-" not in shown
        assert at.get("dataframe") == [] and at.button.len == 0 and at.title.len == 0
    assert ann.ratings_frame(sid).annotator.tolist() == ["Carol", "Carol"]


def test_undo_with_another_experts_name_or_token_is_refused():
    """Once, opening /annotate?session=…&annotator=%20CAROL%20 and pressing U twice removed two of Carol's
    ratings. Now a name in the URL opens nothing, and Bob's link undoes only Bob's ratings."""
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(2, k=3), name="undo", k=3)
    rated_by(sid, "Carol", 3)
    before = ann.ratings_frame(sid)[["item_id", "annotator", "score"]]
    at = open_app("annotate", query_params={"session": sid, "annotator": " CAROL "})
    assert errors(at) == [] and any("personal link" in w.value for w in at.warning)
    assert "an_undo" not in [b.key for b in at.button]  # no way to act: only "Start annotating" under a new name
    at.text_input(key="an_name").set_value(" CAROL ").run()
    at.button(key="an_start").click().run()
    assert any("already an expert" in e.value for e in at.error) and "token" not in at.query_params
    bob = annotate(sid, link(sid, "Bob"))
    bob.button(key="an_k2").click().run()
    for _ in range(2):
        bob.button(key="an_undo").click().run()
    assert any("Nothing to undo" in w.value for w in bob.warning)
    assert ann.ratings_frame(sid)[["item_id", "annotator", "score"]].equals(before)  # Carol's three intact
    with pytest.raises(ProbekitError, match="only undo your own"):
        ann.undo(sid, "bob", event_id=int(ann.events_frame(sid).event_id.iloc[0]))


def test_organiser_token_guards_the_organiser_pages(monkeypatch):
    """The rule: "organiser pages require an organiser token when PROBEKIT_ORGANISER_TOKEN is set"; expert links
    keep working, and an expert's token is not an organiser token."""
    from test_annotations import rankings

    monkeypatch.setenv("PROBEKIT_ORGANISER_TOKEN", "organiser-s3cret")
    sid = ann.from_rankings(rankings(2, k=2), name="guarded", k=2)
    rated_by(sid, "Carol", 2)
    expert_token = link(sid, "Dana")
    at = open_app(None, query_params={"session": sid}, organiser=False)  # a new browser, no credential
    assert organiser_widgets(at) == [] and at.get("dataframe") == []
    assert any("organiser token" in i.value for i in at.info) and "guarded" not in texts(at)
    for page in ("results", "annotate", "probe"):  # while locked no organiser page is registered, so none can run
        with pytest.raises(ValueError, match=rf"navigation page for '[^']*pages/{page}.py'"):
            at.switch_page(f"pages/{page}.py")
    for wrong in ("nope", expert_token):
        at.text_input(key="pk_org_token").set_value(wrong)  # a form: sent with Sign in
        at.button(key="pk_org_sign_in").click().run()
        assert [e.value for e in at.error] == ["That is not the organiser token."] and organiser_widgets(at) == []
    at.text_input(key="pk_org_token").set_value("organiser-s3cret")
    at.button(key="pk_org_sign_in").click().run()
    at.switch_page("pages/results.py").run()
    assert errors(at) == [] and "rs_create" in organiser_widgets(at)
    assert any("Carol" in str(d.value) for d in at.dataframe)
    expert = open_app("annotate", query_params={"session": sid, "token": expert_token})
    assert errors(expert) == [] and any("Annotating as **Dana**" in c.value for c in expert.caption)


def test_session_names_and_answers_show_as_text_not_markup():
    """Data (session name, query, answers) goes through ui.md: an image in a session name is not fetched."""
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(1, k=2), name="![x](http://e.invalid/x.png) <b>x</b>", k=2)
    at = annotate(sid, link(sid, "Gus"))
    caption = next(c.value for c in at.caption if c.value.startswith("Session"))
    assert "![x](http" not in caption and "<b>" not in caption and r"\!\[x\]" in caption


IMAGE, LINK = "![x](http://example.invalid/x.png)", '<a href="http://e.invalid">y</a>'


def markup_free(at) -> str:
    """The page's Markdown as a reader sees it; fails when any of it renders an image or a link."""
    html = rendered(at)
    assert not [h for h in html if "<img" in h or "<a " in h], [h for h in html if "<img" in h or "<a " in h]
    # the invisible word joiners that stop GitHub's autolinks (pages._display.md) are not seen
    return "\n".join(as_text(h) for h in html).replace(WORD_JOINER, "")


def test_answers_show_as_literal_text_to_the_expert():
    """The rule: an answer like ``![x](http://…)`` or ``<a href>`` must read as written on the expert's
    page (no image fetched, no link), in the answer rows, the query and the gold list."""
    from dataclasses import replace

    from test_annotations import rankings

    r = rankings(1, k=2)[0]
    ranked = [replace(r, query=replace(r.query, subject=IMAGE, golds=(LINK,)), names=(IMAGE, LINK))]
    sid = ann.from_rankings(ranked, name=LINK, k=2, blind=False)
    at = annotate(sid, link(sid, "Hal"))
    shown = markup_free(at)
    assert errors(at) == [] and IMAGE in shown and LINK in shown
    rows = [" ".join(as_text(h).replace(WORD_JOINER, "").split()) for h in rendered(at)
            if "x.png" in h or "e.invalid" in h]
    assert any(f"{IMAGE} · rank 1 · 1.000" in row for row in rows), rows  # the answer rows read as typed
    assert any(f"gold: {LINK}" in row for row in rows) and any(f"subject {IMAGE}" in row for row in rows)
    # a bad name echoed in an error message is text too (organiser side: "use a plain name … got '![x](…)'")
    org = annotate(sid)
    org.text_input(key="an_name").set_value(IMAGE).run()
    org.button(key="an_start").click().run()
    assert org.error and IMAGE in markup_free(org)


def test_results_page_shows_names_as_text_and_exports_on_every_click():
    """The same on the organiser's Results page: names from data (session, model, dataset, an expert name
    typed, echoed in an error) read as text; every export is made when drawn (no deferred file)."""
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(2, k=2), name=IMAGE, k=2)
    rated_by(sid, "Carol", 2)
    res = open_app("results", query_params={"session": sid})
    assert errors(res) == []
    res.text_input(key="rs_expert").set_value(LINK).run()
    res.button(key="rs_link").click().run()
    assert res.error and LINK in markup_free(res)
    files = downloads(res)
    assert "Missing facts (CSV)" in files and all(immediate(b) for b in files.values()), list(files)


def test_results_page_creates_and_revokes_links():
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(2, k=2), name="links", k=2)
    res = open_app("results", query_params={"session": sid})
    assert next(e for e in res.expander if e.label == EXPERTS_PANEL).proto.expanded  # no ratings yet: links first
    res.text_input(key="rs_expert").set_value("Dr Ana Ruiz").run()
    res.button(key="rs_link").click().run()
    assert errors(res) == []
    url = next(c.value for c in res.code)
    assert url.startswith("http") and f"/annotate?session={sid}&token=" in url
    token = url.split("token=")[1]
    assert ann.verify_token(token, session_id=sid).name == "Dr Ana Ruiz"
    team = next(d.value for d in res.dataframe if "link active" in d.value.columns)
    assert team.expert.tolist() == ["Dr Ana Ruiz"] and bool(team["link active"][0])
    res.selectbox(key="rs_revoke_who").set_value("Dr Ana Ruiz").run()
    res.button(key="rs_revoke").click().run()
    assert errors(res) == []
    with pytest.raises(ProbekitError, match="not valid"):
        ann.verify_token(token)
    at = open_app("annotate", query_params={"session": sid, "token": token})
    assert [e.value for e in at.error] == [ann.INVALID_LINK]


def test_leaving_annotate_and_coming_back_keeps_the_session_and_name():
    """The rule: "Leaving and coming back to Annotate keeps the session and name" (the sidebar's page links
    carry no URL parameters)."""
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(2, k=2), name="keep me", k=2)
    at = open_app("annotate", query_params={"session": sid})
    at.text_input(key="an_name").set_value("Fay").run()
    at.switch_page("pages/results.py").run()
    at.query_params.clear()
    at.switch_page("pages/annotate.py").run()
    assert errors(at) == [] and "keep me" in texts(at)
    assert at.text_input(key="an_name").value == "Fay"
    at.button(key="an_start").click().run()
    assert errors(at) == [] and any("Annotating as **Fay**" in c.value for c in at.caption)


def _chromium_server(tmp_path):
    """(serve, launch, env) for a real server on this test's database (skips when Chromium or Playwright is missing)."""
    pytest.importorskip("playwright", reason="playwright is not installed")
    from test_browser import launch, serve  # skips when no Chromium is installed

    from probekit import store

    store.close_all()  # the server process must own the database file
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")}
    return serve, launch, env


def wait_text(page, text: str, budget) -> None:
    """test_browser_keys.wait_text, imported when used (that module skips without Chromium)."""
    from test_browser_keys import wait_text as wait

    wait(page, text, budget)


def no_exception(page) -> None:
    assert page.get_by_test_id("stException").count() == 0


def open_expert_page(browser, url: str, budget, *, expect: str):
    """A new browser context (its own cookies, so its own server session) on ``url``, once the page shows
    ``expect`` *and* its key listener listens: a key typed before that reaches nothing (the page's text is drawn
    before Streamlit has loaded the listener's code, seconds before it on a loaded machine)."""
    from test_browser_keys import wait_listening

    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(budget.ms())
    page.goto(url)
    wait_text(page, expect, budget)
    wait_listening(page, budget)
    return page


@pytest.mark.heavy  # its Chromium would share the cores with the browser files' worker
@pytest.mark.browser
@pytest.mark.timeout(300)
def test_keyboard_only_rating_in_chromium(tmp_path):
    """Real key presses in headless Chromium, typed faster than the page reruns: 5, 3, S rate/skip the marked
    answers, Enter moves on, 1, 2 rate there, U undoes the last. The expert's personal link opens the
    annotation-only app (no navigation, no sidebar), also when it asks for an organiser page; a wrong token
    gets the message and nothing else."""
    from playwright.sync_api import sync_playwright
    from test_annotations import rankings
    from test_browser import Budget

    budget = Budget(240)
    sid = ann.from_rankings(rankings(2, k=3), name="keyboard", k=3)
    token = ann.issue_token(sid, "Kim")
    serve, launch, env = _chromium_server(tmp_path)
    with serve(env, tmp_path / "server.log") as url, sync_playwright() as pw:
        browser = launch(pw)
        # the expert's personal link
        page = open_expert_page(browser, f"{url}/annotate?session={sid}&token={token}", budget, expect="0/6 answers")
        # a fresh server whose first visitor opens an expert link gets the annotation-only app
        assert page.get_by_test_id("stSidebarNav").count() == 0 and page.get_by_text("Force CPU").count() == 0
        for key in ("5", "3", "s", "Enter", "1", "2", "u"):  # typed at once, faster than the reruns
            page.keyboard.press(key)
        wait_text(page, "Query 2 of 2", budget)
        wait_text(page, "4/6 answers", budget)
        no_exception(page)
        other = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        other.set_default_timeout(budget.ms())
        other.goto(f"{url}/results?session={sid}&token={token}")  # an organiser page asked with the token
        wait_text(other, "4/6 answers", budget)
        assert other.get_by_test_id("stSidebarNav").count() == 0 and other.get_by_text("Experts and their").count() == 0
        other.goto(f"{url}/annotate?session={sid}&token={'x' * 32}")
        wait_text(other, "This annotation link is not valid", budget)
        assert other.get_by_text("keyboard").count() == 0 and other.get_by_test_id("stSidebarNav").count() == 0
        browser.close()
    events = ann.events_frame(sid)  # every key arrived once, in order, on the answer marked at that moment
    assert events.kind.tolist() == ["rate", "rate", "skip", "rate", "rate", "undo"]
    assert events.score.tolist()[:2] == [5, 3] and events.score.tolist()[3:5] == [1, 2]
    assert events.item_id.tolist() == [f"{sid}:0:0", f"{sid}:0:1", f"{sid}:0:2", f"{sid}:1:0", f"{sid}:1:1",
                                       f"{sid}:1:1"]
    assert events.annotator.unique().tolist() == ["Kim"]  # the name as typed


@pytest.mark.heavy
@pytest.mark.browser
@pytest.mark.timeout(600)
def test_two_experts_at_once_in_two_browsers(tmp_path):
    """Two experts rate the same blind session of 15 queries × top-10 (MedLAMA's setting) at the same time from
    two browsers (separate contexts, so separate cookies and server sessions), each through their personal link,
    their key presses interleaved: every rating lands once under its own expert, and the organiser's statistics
    cover both. One attempt: a press typed once the page's keyboard listens is never lost."""
    from playwright.sync_api import sync_playwright
    from test_annotations import rankings
    from test_browser import Budget

    budget = Budget(540)  # the whole test, server start included, inside its 600 s timeout
    n_queries, k = 15, 10  # the paper's setting
    total = n_queries * k
    scores = {"Ana": [1 + i % 5 for i in range(total)], "Ben": [5 - i % 5 for i in range(total)]}
    sid = ann.from_rankings(rankings(n_queries, k=k), name="pair", k=k)
    tokens = {who: ann.issue_token(sid, who) for who in scores}
    serve, launch, env = _chromium_server(tmp_path)
    with serve(env, tmp_path / "server.log") as url, sync_playwright() as pw:
        browser = launch(pw)
        pages = {who: open_expert_page(browser, f"{url}/annotate?session={sid}&token={tokens[who]}", budget,
                                       expect=f"0/{total} answers") for who in scores}
        for q in range(n_queries):
            for i in range(k):
                for who, pg in pages.items():  # alternate: both sessions rerun at the same time
                    pg.keyboard.press(str(scores[who][q * k + i]))
            for pg in pages.values():
                wait_text(pg, f"{(q + 1) * k}/{total} answers", budget)
                pg.keyboard.press("Enter")
        for pg in pages.values():
            wait_text(pg, "All done", budget)
            no_exception(pg)
        browser.close()
    events = ann.events_frame(sid)
    assert len(events) == 2 * total and set(events.kind) == {"rate"}
    for who, want in scores.items():
        mine = events[events.annotator == who]
        assert mine.score.tolist() == want  # in order, none lost or doubled
        assert mine.item_id.nunique() == total  # each of the 150 answers once
    result = ann.stats(sid)
    assert result["n_ratings"] == 2 * total and result["annotators"] == ["Ana", "Ben"]
    t5 = result["table5"].set_index(["answers", "gold"])
    assert t5.loc[("top-10", "all"), "total"] == total  # every answer has a consensus score
    assert set(result["table5_by_annotator"]) == {"Ana", "Ben"}
    assert all(t.set_index(["answers", "gold"]).loc[("top-10", "all"), "total"] == total
               for t in result["table5_by_annotator"].values())
    overall = result["agreement"].set_index("relation").loc["all"]
    assert overall["items rated twice+"] == total
    assert overall["alpha (ordinal)"] < 0  # Ben's scores mirror Ana's (6 - s): systematic disagreement
    assert len(result["accuracy"]) > 0


def test_expert_links_without_an_organiser_token_lock_the_organiser_pages():
    """The rule: once a server hands out expert links, its organiser pages never open without a credential. With no
    PROBEKIT_ORGANISER_TOKEN, the first link generates one (kept 0600 beside the database); an expert who deletes the
    token from their link meets the sign-in, not every expert's ratings. The organiser who issued the link stays in."""
    import os
    import stat

    from test_annotations import rankings

    from probekit import config

    sid = ann.from_rankings(rankings(2, k=2), name="unguarded", k=2)
    before = open_app(None, query_params={"session": sid}, organiser=False)  # no links yet: the workbench asks nothing
    assert not ann.organiser_token_required() and not [i for i in before.info if "sign in" in i.value]
    rated_by(sid, "Carol", 2)
    expert_token = link(sid, "Dana")
    path = config.organiser_token_file()
    assert ann.organiser_token_required() and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    before.run()  # the organiser's own session (it was in before the link existed) stays in
    assert errors(before) == [] and not any("sign in" in i.value for i in before.info)
    stripped = open_app(None, query_params={"session": sid}, organiser=False)  # the link without its token
    assert organiser_widgets(stripped) == [] and "unguarded" not in texts(stripped) and "Carol" not in texts(stripped)
    assert any(str(path) in i.value for i in stripped.info)  # where the organiser finds the token
    for wrong in ("", expert_token, "x" * 32):
        assert not ann.check_organiser_token(wrong)
    stripped.text_input(key="pk_org_token").set_value(path.read_text().strip())
    stripped.button(key="pk_org_sign_in").click().run()
    stripped.switch_page("pages/results.py").run()
    assert errors(stripped) == [] and "rs_create" in organiser_widgets(stripped)
    expert = open_app("annotate", query_params={"session": sid, "token": expert_token}, organiser=False)
    assert errors(expert) == [] and any("Annotating as **Dana**" in c.value for c in expert.caption)


def test_the_first_expert_link_says_that_the_organiser_pages_now_ask_for_a_sign_in():
    """Handing out the first link makes the organiser pages ask for a credential: the organiser learns it then,
    with where the token is, not at the next reload's lock screen; later links say nothing more."""
    from test_annotations import rankings

    sid = ann.from_rankings(rankings(1, k=2), name="first links", k=2)
    res = open_app("results", query_params={"session": sid})
    assert not ann.organiser_token_required()
    res.text_input(key="rs_expert").set_value("Dana").run()
    res.button(key="rs_link").click().run()
    said = [w.value for w in res.warning if "now asks organisers to sign in" in w.value]
    assert errors(res) == [] and len(said) == 1 and "stays signed in until it closes" in said[0]
    assert ann.organiser_token_required()
    later = open_app("results", query_params={"session": sid})  # a server that already asks: nothing new to say
    later.text_input(key="rs_expert").set_value("Eve").run()
    later.button(key="rs_link").click().run()
    assert not [w for w in later.warning if "now asks organisers" in w.value]
