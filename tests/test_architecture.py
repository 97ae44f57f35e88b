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
HEAVY = {"torch", "transformers", "faiss", "duckdb", "pandas", "numpy", "plotly", "ray", "streamlit", "scipy",
         "sklearn", "pyarrow"}
"""Third-party packages whose import costs real time (numpy alone ~0.2 s here): a probekit import placed inside a
function is there to defer one of these (``probekit --help`` never pays for torch), or it is not needed."""


def _sources(root: Path = PACKAGE) -> dict[str, tuple[Path, str]]:
    """{module name: (file, text)} of every module under ``root`` (a package's ``__init__`` named as the package)."""
    mods = {}
    for path in root.rglob("*.py"):
        parts = ["probekit", *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = (path, path.read_text(encoding="utf-8"))
    return mods


def _modules() -> dict[str, Path]:
    return {m: path for m, (path, _) in _sources().items()}


def _target(module: str, path: Path, node: ast.ImportFrom) -> str:
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if node.level:
        base = base[:len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _import_nodes(module: str, path: Path, text: str, known: set[str]):
    """(node, probekit modules it imports, third-party top-level names, inside a function?) for every import."""
    tree = ast.parse(text)
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f)}
    # `if TYPE_CHECKING:` blocks never run: their imports are the type checker's, not loaded (probekit.lazy)
    typing_only = {id(n) for b in ast.walk(tree) if isinstance(b, ast.If) and "TYPE_CHECKING" in ast.unparse(b.test)
                   for stmt in b.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        mods, ext = set(), set()
        if isinstance(node, ast.Import):
            for a in node.names:
                (mods if a.name.split(".")[0] == "probekit" else ext).add(a.name if a.name in known else
                                                                          a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            target = _target(module, path, node)
            if target.split(".")[0] != "probekit":
                ext.add(target.split(".")[0])
            else:
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    mods.add(sub if sub in known else target)
        else:
            continue
        if id(node) in typing_only:
            ext = set()  # names for the type checker only: no third-party package is loaded
        yield node, {m for m in mods if m in known and m != module}, ext, id(node) in inside


def _imports(module: str, path: Path, known: set[str], text: str | None = None) -> set[str]:
    """Every probekit module that ``module`` imports, at top level or inside functions (lazy imports count)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    return set().union(*(mods for _, mods, _, _ in _import_nodes(module, path, text, known)))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
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


# ---------------------------------------------------------------- packages point one way
def stated_layers(readme: str) -> list[list[str]]:
    """The layers README's Shape section states, top first: each line of its ``layers`` block is
    ``name: part part ...``, a part being a subpackage, a top-level module or ``__init__`` (the package itself)."""
    block = readme.split("```layers\n", 1)[1].split("```", 1)[0]
    return [line.split(":", 1)[1].split() for line in block.splitlines() if line.strip()]


def _part(module: str, sources: dict) -> str:
    """The package-level node a module belongs to: its subpackage, else itself (``__init__`` for probekit)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    sub = f"probekit.{parts[1]}"
    if sub in sources and sources[sub][0].name == "__init__.py":
        return parts[1]
    return parts[1] if len(parts) == 2 else module


def shape_faults(sources: dict[str, tuple[Path, str]], layers: list[list[str]]) -> list[str]:
    """What breaks the one-way rule, as lines naming the import: a part in no layer (or in two), an import from a
    higher layer, and a cycle between parts (imports inside functions count: a cycle hidden behind a lazy import
    is still a cycle)."""
    known = set(sources)
    level = {}
    faults = []
    for i, parts in enumerate(reversed(layers)):  # the bottom layer is 0
        for part in parts:
            if part in level:
                faults.append(f"{part} is stated in two layers")
            level[part] = i
    edges: dict[str, dict[str, str]] = {}
    for module, (path, text) in sorted(sources.items()):
        me = _part(module, sources)
        if me not in level:
            faults.append(f"{me} ({path.name}) is in no stated layer")
            continue
        for node, mods, _, lazy in _import_nodes(module, path, text, known):
            for dep in sorted(mods):
                other = _part(dep, sources)
                if other == me or other not in level:
                    continue
                where = f"{module}:{node.lineno}{' (inside a function)' if lazy else ''} imports {dep}"
                edges.setdefault(me, {}).setdefault(other, where)
                if level[other] > level[me]:
                    faults.append(f"upward: {where}")
    cycle = _cycle({a: set(b) for a, b in edges.items()})
    if cycle:
        faults.append("cycle: " + "; ".join(edges[a][b] for a, b in zip(cycle, cycle[1:])))
    return faults


def test_packages_point_one_way():
    """The package-level import graph of probekit/, imports inside functions included, is acyclic and never points
    up the layers README states (cli -> features -> domain -> shared parts -> base)."""
    sources = _sources()
    assert len(sources) > 30 and "probekit.bench.runner" in sources
    layers = stated_layers((ROOT / "README.md").read_text(encoding="utf-8"))
    assert shape_faults(sources, layers) == []


def test_a_planted_cycle_is_found():
    """The check sees a cycle hidden in a function: metrics reaching up into bench is both an upward import and a
    cycle (bench -> metrics -> bench), each named with the line that makes it."""
    sources = _sources()
    layers = stated_layers((ROOT / "README.md").read_text(encoding="utf-8"))
    path, text = sources["probekit.metrics.accuracy"]
    sources["probekit.metrics.accuracy"] = (path, text + "\n\ndef _planted():\n    from ..bench import runner\n")
    faults = shape_faults(sources, layers)
    assert any(f.startswith("upward: probekit.metrics.accuracy:") and "(inside a function)" in f for f in faults)
    assert any(f.startswith("cycle: ") and "probekit.metrics.accuracy" in f for f in faults), faults
    sources["probekit.newpart"] = (PACKAGE / "newpart.py", "")
    assert "newpart (newpart.py) is in no stated layer" in shape_faults(sources, layers)


def test_no_module_cycle_and_nothing_imports_the_cli():
    mods = _modules()
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    users = sorted(m for m, deps in graph.items() if not m.startswith("probekit.cli") and m != "probekit.__main__"
                   and any(d.startswith("probekit.cli") for d in deps))
    assert users == []


def _top_level_closure(sources) -> dict[str, set[str]]:
    """{module: heavy third-party packages importing it at top level loads}, through probekit modules and the
    packages (``__init__``) above each one imported."""
    known = set(sources)
    direct: dict[str, tuple[set[str], set[str]]] = {}
    for module, (path, text) in sources.items():
        mods, ext = set(), set()
        for _node, m, e, lazy in _import_nodes(module, path, text, known):
            if not lazy:
                mods |= {".".join(d.split(".")[:i]) for d in m for i in range(2, d.count(".") + 2)}
                ext |= e
        direct[module] = ({m for m in mods if m in known and m != module}, ext)
    out: dict[str, set[str]] = {}

    def heavy(m: str, seen: set[str]) -> set[str]:
        if m in out:
            return out[m]
        seen.add(m)
        mods, ext = direct[m]
        found = ext & HEAVY
        for d in mods - seen:
            found |= heavy(d, seen)
        out[m] = found
        return found

    for m in sources:
        out[m] = heavy(m, set())
    return out


def test_lazy_imports_only_defer_heavy_imports():
    """A probekit import inside a function stays only where it defers a heavy third-party import (:data:`HEAVY`:
    the module it names, or a package above it, loads one at top level); any other belongs at the top of the
    module, where the import graph (and a reader) sees it."""
    sources = _sources()
    heavy = _top_level_closure(sources)
    known = set(sources)
    light = []
    for module, (path, text) in sorted(sources.items()):
        for node, mods, _, lazy in _import_nodes(module, path, text, known):
            parents = {".".join(d.split(".")[:i]) for d in mods for i in range(2, d.count(".") + 2)} & known
            if lazy and mods and not any(heavy[m] for m in parents | mods):
                light.append(f"{module}:{node.lineno}")
    assert light == []


def test_the_spine_never_reaches_up_into_the_features():
    mods = _modules()
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    features = ("probekit.bench", "probekit.context", "probekit.rewire", "probekit.annotations")
    for low in ("probekit.cache", "probekit.index", "probekit.encode", "probekit.metrics.accuracy",
                "probekit.probes.base", "probekit.probes.retrieval", "probekit.store.db", "probekit.jobs"):
        assert not [d for d in graph[low] if d.startswith(features)], low


def test_page_pieces_form_no_circle():
    """pages/_ui.py is an index of the UI pieces: none of them imports it, and the modules under pages/ import
    one another without a cycle (imports inside functions included)."""
    pages = {f"pages.{p.stem}": (p, p.read_text(encoding="utf-8")) for p in (ROOT / "pages").glob("*.py")}
    known = set(pages)
    graph = {}
    for module, (_path, text) in pages.items():
        deps = set()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pages"):
                deps |= {f"pages.{a.name}" if node.module == "pages" else node.module for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("pages.")}
        graph[module] = {d for d in deps if d in known and d != module}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])
    index = "pages._ui"
    pieces = {m.removeprefix("pages.") for m in pages if index in graph.get(m, set())}
    imported_by_index = {d.removeprefix("pages.") for d in graph[index]}
    assert not pieces & imported_by_index, sorted(pieces & imported_by_index)  # no piece of the index uses it


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
