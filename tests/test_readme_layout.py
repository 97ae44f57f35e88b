"""The README stays a newcomer's page and its links hold: at most 300 lines, every relative link in it and in
``docs/*.md`` points to a file (and heading) that exists; and docs/layout.md's Layout section lists every module of
``probekit/`` with its docstring's first sentence, never cut mid-word (``python tests/readme_layout.py --update``
regenerates it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from readme_layout import ROOT, block, current, first_sentence

README_MAX_LINES = 300
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""Every markdown page a reader follows links through: the README and the docs it points to."""

LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
"""A markdown link's or image's target: ``[text](target)``, ``![alt](target "title")``; text may wrap lines."""


def test_readme_layout_is_the_tree():
    assert current() == block(), "docs/layout.md's Layout is stale: run python tests/readme_layout.py --update"


def test_every_module_is_listed_whole():
    shown = block()
    for f in (ROOT / "probekit").rglob("*.py"):
        if f.name in ("__init__.py", "__main__.py"):
            continue
        assert f" {f.name}" in shown, f
        sentence = first_sentence(f)
        assert sentence and " ".join(sentence.split()[-2:]) in " ".join(shown.split()), f  # its end is shown too


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move the detail into docs/ and link it")


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code spans (a link-like string there is code, not a link)."""
    kept, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            kept.append(line)
    return re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", "\n".join(kept), flags=re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to hyphens.

    >>> slug("Measured here (2 CPU cores, no GPU; default model, MedLAMA)")
    'measured-here-2-cpu-cores-no-gpu-default-model-medlama'
    >>> slug("The two readings of `X-FACTR`")
    'the-two-readings-of-x-factr'
    """
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link's text only
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of a markdown file's headings (a repeated heading gets -1, -2, … as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if match:
            base = slug(match.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    """The targets of ``path``'s links that are not URLs (no scheme, no ``mailto:``)."""
    return [t for t in LINK.findall(_prose(path.read_text(encoding="utf-8")))
            if not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", t)]


def test_the_link_checker_sees_links_not_code():
    text = "A [link](docs/a.md#x) and ![img](b.png \"t\"), a wrapped [two\nwords](c.md), `[code](d.md)`,\n" \
           "```\n[fenced](e.md)\n```\nand a [URL](https://example.org/f.md)."
    assert LINK.findall(_prose(text)) == ["docs/a.md#x", "b.png", "c.md", "https://example.org/f.md"]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_points_to_a_file_that_exists(page):
    links = relative_links(page)
    broken = []
    for target in links:
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == [], f"{page.relative_to(ROOT)}: " + "; ".join(broken)

