"""Helpers for AppTest-based page tests: open app.py on one page with a chosen model and dataset."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def open_app(page: str | None = None, *, model: str | None = None, dataset: str = "demo", timeout: float = 120,
             query_params: dict | None = None, state: dict | None = None, organiser: bool = True) -> AppTest:
    """Run app.py once (optionally switched to ``pages/<page>.py``) with the sidebar preset. ``organiser``: the
    browser session is the organiser's (signed in), as on the workbench that created the test's expert links; False
    opens it as a new browser would, which meets the sign-in once links exist (then ``page`` must be None: no
    organiser page is registered to switch to)."""
    at = AppTest.from_file(APP, default_timeout=timeout)
    if organiser:
        at.session_state["pk_organiser"] = True
    if model is not None:
        at.session_state["pk_model"] = "__custom__"
        at.session_state["pk_model_custom"] = model
    at.session_state["pk_dataset"] = dataset
    for k, v in (state or {}).items():
        at.session_state[k] = v
    at.query_params.update(query_params or {})
    at.run()
    if page:  # as a browser opening /<page>?…: the page gets the link's parameters, not the default page's URL
        at.query_params.clear()
        at.query_params.update(query_params or {})
        at.switch_page(f"pages/{page}.py").run()
    return at


def errors(at: AppTest) -> list[str]:
    """Error messages and exceptions shown on the page (a test asserts this is empty on the happy path)."""
    return [e.value for e in at.error] + [str(e.value) for e in at.exception]


def downloads(at: AppTest) -> dict[str, object]:
    """The page's download buttons by label; each must carry its file when drawn (a deferred file, made on the
    click, is dropped by the next rerun: "MediaFileStorageError: Deferred file … not found")."""
    return {b.proto.label: b.proto for b in at.get("download_button")}


def immediate(button) -> bool:
    """True when a download button's file exists on the server as drawn (not a deferred callable)."""
    return bool(button.url) and not button.deferred_file_id


def rendered(at: AppTest) -> list[str]:
    """Every Markdown text on the page (markdown, captions, headers, alerts) rendered to HTML as CommonMark does,
    so a test can check that data shows as text: no ``<img``, no ``<a``, and the data readable as typed."""
    import markdown_it  # a dependency of rich, which streamlit requires

    md = markdown_it.MarkdownIt("commonmark")
    kinds = ("markdown", "caption", "subheader", "title", "error", "warning", "success", "info")
    return [md.render(str(e.value)) for kind in kinds for e in at.get(kind)]


def as_text(html_text: str) -> str:
    """The text a reader sees in rendered HTML (the invisible word joiners ``ui.md`` puts in against autolinks are
    not seen)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", html_text)).replace("\u2060", "")
