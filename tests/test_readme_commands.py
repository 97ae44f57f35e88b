"""The example commands of README.md and of every ``docs/*.md``: every ``python -m probekit …`` / ``probekit …``
command line in their code (fenced blocks and inline spans) parses with the real parser, and the cheap ones
(``--help``, listings) run."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import ROOT

from probekit import cli
from probekit.cli.main import build_parser

PREFIX = re.compile(r"^(?:(?:\S*/)?python3?\s+-m\s+probekit|probekit)(?=\s|$)")
"""How a probekit command line starts: the module through some python, or the console script."""

CHEAP = {("runs", "list"), ("corpus", "list"), ("annotations", "list"), ("grid", "list")}
"""Actions that only read the (empty, per-test) store: run, not just parsed."""


def _code_lines(text: str) -> list[str]:
    """Lines of the fenced code blocks (a line ending in ``\\`` continued by the next), and inline code spans
    outside them."""
    lines, fenced, continued = [], False, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            if continued:
                lines[-1] = lines[-1].removesuffix("\\").rstrip() + " " + line.strip()
            else:
                lines.append(line.strip())
            continued = line.rstrip().endswith("\\")
        else:
            lines += re.findall(r"(?<!`)`([^`]+)`(?!`)", line)
    return lines


def _variants(tokens: list[str]) -> list[list[str]]:
    """The command line without its optional ``[--flag …]`` groups, and with each alternative of each group
    (``[A | B]``) in place; ``…`` (more of the same) is dropped."""
    items: list = []
    group = None
    for tok in tokens:
        if group is None and tok.startswith("[-"):
            group, tok = [[]], tok[1:]
        closing = group is not None and tok.endswith("]")
        tok = tok.removesuffix("]").replace("…", "").strip()
        if group is None:
            if tok:
                items.append(tok)
        else:
            if tok == "|":
                group.append([])
            elif tok:
                group[-1].append(tok)
            if closing:
                items.append(group)
                group = None
    assert group is None, f"unclosed [ in {' '.join(tokens)}"
    base = [t for t in items if isinstance(t, str)]
    out = [base]
    for i, item in enumerate(items):
        if isinstance(item, list):
            for alternative in item:
                out.append([x for j, t in enumerate(items)
                            for x in ([t] if isinstance(t, str) else alternative if j == i else [])])
    return out


PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""Where example commands are: the README and the docs pages it links."""


def readme_commands(pages: list = PAGES) -> list[list[str]]:
    """Every probekit command line of the README and the docs pages as argv (what follows ``probekit``), each
    once, in the order first seen."""
    commands: list[list[str]] = []
    for line in (line for page in pages for line in _code_lines(page.read_text(encoding="utf-8"))):
        for part in re.split(r"\s+&&\s+|\s*;\s+", line):
            match = PREFIX.match(part)
            if match is None:
                continue
            tokens = shlex.split(part[match.end():], comments=True)
            commands += [v for v in _variants(tokens) if v and v not in commands]  # bare `probekit`: a name
    return commands


COMMANDS = readme_commands()


def test_the_readme_has_example_commands():
    assert len(COMMANDS) >= 20 and ["--help"] in COMMANDS
    assert len(readme_commands([ROOT / "README.md"])) >= 10, "the README's CLI tour lost its commands"


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_readme_command_parses_and_the_cheap_ones_run(argv, capsys):
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    if "--help" in argv or "-h" in argv:
        with pytest.raises(SystemExit) as e:
            parser.parse_args(argv)
        assert e.value.code == 0 and capsys.readouterr().out.startswith("usage: ")
        return
    args = parser.parse_args(argv)  # a documented command line the parser refuses fails here (SystemExit 2)
    assert callable(args.func)
    if tuple(argv[:2]) in CHEAP:
        assert cli.main(argv) == 0, capsys.readouterr().err
