"""The Layout block for ``probekit/`` in docs/layout.md (the README links it), generated from the tree: every package
and module with the first sentence of its docstring, wrapped between words. ``python tests/readme_layout.py
--update`` rewrites the block there; tests/test_readme_layout.py checks that docs/layout.md holds what this prints."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = ROOT / "docs" / "layout.md"
START = "probekit/         the pure core\n"
END = "data/             "
WIDTH = 118
ABBREVIATIONS = {"fig", "al", "eq", "cf", "vs", "no", "sec", "tab"}
NAME_COL = 18  # names (indented by depth) in the first 18 columns, as the block's other lines


def first_sentence(path: Path) -> str:
    """The docstring's first sentence (up to the first full stop that ends a sentence), whitespace collapsed."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    para = " ".join(doc.split("\n\n")[0].split())
    for match in re.finditer(r"\.(\s|$)", para):
        word = para[:match.start()].rsplit(" ", 1)[-1]
        if word.lower() not in ABBREVIATIONS and not re.fullmatch(r".*\b[a-zA-Z]", word):  # "Fig. 6", "e.g."
            return para[:match.start() + 1]
    return para


def _entry(indent: int, name: str, text: str) -> list[str]:
    head = " " * indent + name
    pad = max(NAME_COL, len(head) + 1)
    lines = textwrap.wrap(text, width=WIDTH - pad, break_long_words=False, break_on_hyphens=False) or [""]
    return [head.ljust(pad) + lines[0]] + [" " * pad + rest for rest in lines[1:]]


def block() -> str:
    """The generated lines for ``probekit/`` (top-level modules first, then each package and its modules)."""
    pkg = ROOT / "probekit"
    out: list[str] = []
    for f in sorted(pkg.glob("*.py")):
        if f.name not in ("__init__.py", "__main__.py"):
            out += _entry(2, f.name, first_sentence(f))
    for sub in sorted(p for p in pkg.iterdir() if (p / "__init__.py").exists()):
        out += _entry(2, sub.name + "/", first_sentence(sub / "__init__.py"))
        for f in sorted(sub.glob("*.py")):
            if f.name != "__init__.py":
                out += _entry(4, f.name, first_sentence(f))
    return START + "\n".join(out) + "\n"


def current() -> str:
    """The block as docs/layout.md holds it now."""
    text = LAYOUT.read_text(encoding="utf-8")
    i = text.index(START)
    return text[i:text.index(END, i)]


def update() -> None:
    """Rewrite the block in docs/layout.md from the tree."""
    text = LAYOUT.read_text(encoding="utf-8")
    LAYOUT.write_text(text.replace(current(), block()), encoding="utf-8")


if __name__ == "__main__":
    if "--update" in sys.argv:
        update()
    else:
        sys.stdout.write(block())
