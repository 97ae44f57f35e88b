"""architecture: no import cycle in probekit, no streamlit in the core, ``--help`` without torch, and a new
probe is one file: its CLI flags, its runner path and its page widgets come from its Options."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "probekit"


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Every probekit module that ``module`` imports, at top level or inside functions (lazy imports count)."""
    is_pkg = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "probekit"}
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".") if is_pkg else module.split(".")[:-1]
            if node.level:
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "probekit":
                continue
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    return {m for m in out if m in known and m != module}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if not state.get(v):
                found = visit(v)
                if found:
                    return found
        stack.pop()
        state[u] = 2
        return None

    for m in sorted(graph):
        if not state.get(m):
            found = visit(m)
            if found:
                return found
    return None


def test_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycle_and_nothing_imports_the_cli():
    mods = _modules()
    assert len(mods) > 30 and "probekit.bench.runner" in mods and "probekit.cache" in mods
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    users = sorted(m for m, deps in graph.items() if not m.startswith("probekit.cli") and m != "probekit.__main__"
                   and any(d.startswith("probekit.cli") for d in deps))
    assert users == []
    # the spine's direction: the shared layers never reach up into the features
    features = ("probekit.bench", "probekit.context", "probekit.rewire", "probekit.annotations")
    for low in ("probekit.cache", "probekit.index", "probekit.encode", "probekit.metrics.accuracy",
                "probekit.probes.base", "probekit.probes.retrieval", "probekit.store.db", "probekit.jobs"):
        assert not [d for d in graph[low] if d.startswith(features)], low


def _run(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_core_never_imports_streamlit():
    names = sorted(m for m in _modules() if m != "probekit.__main__")
    out = _run("import importlib, json, sys\n"
               f"names = {names!r}\n"
               "for n in names: importlib.import_module(n)\n"
               "print(json.dumps([len(names), sorted(m for m in sys.modules if m.split('.')[0] == 'streamlit')]))")
    n, streamlit = json.loads(out)
    assert n == len(names) and streamlit == []


def test_help_does_not_import_torch():
    out = _run("import runpy, sys\n"
               "sys.argv = ['probekit', '--help']\n"
               "try:\n    runpy.run_module('probekit', run_name='__main__')\nexcept SystemExit as e:\n"
               "    assert e.code == 0\n"
               "heavy = {'torch', 'transformers', 'faiss', 'streamlit'}\n"
               "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))")
    assert out.splitlines()[-1] == "[]"


# (a new probe is one module: tests/test_probe_contract.py registers a throwaway probe and checks its CLI
# flags, page widgets and Grid entries)


def test_page_pieces_never_take_a_pages_url():
    """Streamlit derives a URL path from every file under pages/, a leading underscore dropped: a helper
    module named like a page (``_results.py`` beside ``results.py``) stops the whole app with "Two pages
    resolve to the URL pathname"."""
    pages = ROOT / "pages"
    names = [p.stem for p in pages.glob("*.py") if p.stem != "__init__"]
    paths = [n.lstrip("_") for n in names]
    assert len(paths) == len(set(paths)), sorted(n for n in names if paths.count(n.lstrip("_")) > 1)
