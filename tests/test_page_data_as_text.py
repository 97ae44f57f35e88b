"""Strings from data (corpus notes, names, keys) reach the page as the characters typed, never as Markdown or HTML:
no image, link, frame or script of theirs is rendered, and no URL of theirs is fetched."""

from __future__ import annotations

import markdown_it
import pytest
from apptest_utils import as_text, errors, open_app, rendered

from pages import _display

URL = "http://127.0.0.1:9"
HOSTILE = [f"![x]({URL}/img.png)", f"[l]({URL}/l)", f"<img src={URL}/i.png>", "<script>alert(1)</script>",
           f"<iframe src={URL}/f></iframe>", f"{URL}/bare", "www.example.org"]
TAGS = ("<img", "<a ", "<a>", "<iframe", "<script")


def visible(text: str) -> str:
    return text.replace(_display.WORD_JOINER, "")


def _render(markdown: str) -> str:
    return markdown_it.MarkdownIt("commonmark", {"html": True}).render(markdown)


@pytest.mark.parametrize("text", HOSTILE)
def test_the_helpers_show_data_as_text(text):
    for shown in (_display.md(text), _display.message(text)):
        out = _render(f"**{shown}** in a caption")
        # shown as typed (the invisible word joiners that stop GitHub's autolinks aside)
        assert not any(t in out for t in TAGS) and text in visible(as_text(out)) and "http://" not in shown
    two_paragraphs = "a\n\n" + text  # a blank line must not end the HTML block
    out = _render(f"<div><code>{_display.html_text(text)}</code> {_display.html_text(two_paragraphs)}</div>")
    assert not any(t in out for t in TAGS) and as_text(out).count(text) == 2


@pytest.fixture
def hostile_elicit(tmp_path, monkeypatch):
    folder = tmp_path / "elicit"
    folder.mkdir()
    note = "asthma " + " ".join(HOSTILE) + " affects the lung"
    (folder / "pubmed_sents_no_punkt_10k_0").write_text(note + "\naspirin can prevent myocardial infarction\n")
    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(folder))
    return note


def test_corpora_page_shows_a_hostile_note_as_text(hostile_elicit):
    """A note with ![x](http://…) used to render as a live <img> on the Corpora page (the browser fetched it)."""
    at = open_app("corpora")
    at.button(key="cp_start").click().run()
    job = at.session_state["cp_job"]
    assert job.wait(120) and job.status == "done", job.error
    at.run()
    at.text_input(key="cp_s").set_value("Asthma")
    at.text_input(key="cp_o").set_value("Lung").run()
    assert errors(at) == []
    shown = [m.value for m in at.markdown if "asthma" in m.value.lower() and "<b style" in m.value]
    assert len(shown) == 1
    out = _render(shown[0])
    assert not any(t in out for t in TAGS), out
    assert " ".join(HOSTILE) in " ".join(as_text(out).split())
    assert all(not any(t in h for t in TAGS) for h in rendered(at))
