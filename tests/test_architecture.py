"""architecture: no import cycle in probekit, no streamlit in the core, ``--help`` without torch, and a new
probe is one file: its CLI flags, its runner path and its page widgets come from its Options."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, TINY_TRIPLES

from probekit.probes import PROBES, Option, Probe, ranking_from_scores

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


# ---------------------------------------------------------------- a new probe is one file
class ToyProbe(Probe):
    """Ranks names by length: short (or long) first, plus a bonus for names starting with ``letter``."""

    def _rank(self, model, queries, candidates, *, k, progress, longest, letter, bonus, chunk):
        lengths = np.array([len(n) for n in candidates.names], dtype=np.float32)
        scores = (lengths if longest else -lengths) + np.array(
            [bonus if n.startswith(letter) else 0 for n in candidates.names], dtype=np.float32)
        out = [ranking_from_scores(q, candidates, scores, k) for q in queries]
        if progress:
            progress(len(queries), len(queries), "scoring")
        return out


TOY = ToyProbe(name="toy", requires_mlm=False, description="names by length (a test probe)", options=(
    Option("longest", False, (False, True), "long names first"),
    Option("letter", "a", ("a", "p", "s"), "names starting with this letter get the bonus"),
    Option("bonus", 3, (), "score bonus", type=int),
    Option("chunk", 7, (), "an advanced knob", advanced=True),
))


@pytest.fixture
def toy_probe(monkeypatch):
    """What probes/__init__.py does for a new probe: one registry entry."""
    monkeypatch.setitem(PROBES, "toy", TOY)
    yield TOY


def test_new_probe_gets_cli_flags_and_runs_through_the_runner(toy_probe, capsys, tiny_encoder_dir, tmp_path):
    from probekit import cli
    from probekit.bench import runs
    from probekit.cli.main import build_parser

    args = build_parser("bench").parse_args(["bench", "--probe", "toy", "--longest", "--letter", "p", "--bonus", "5",
                                             "--chunk", "2"])
    assert (args.longest, args.letter, args.bonus, args.chunk) == (True, "p", 5, 2)
    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    base = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts), "--quiet",
            "--format", "json", "--probe", "toy", "--save", "--k", "3"]
    assert cli.main([*base, "--longest", "--bonus", "5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["probe"] == "toy" and out["options"] == {"longest": True, "bonus": 5} and out["n_queries"] == 8
    meta = runs.get_run(out["run_id"])
    assert meta["probe"] == "toy" and meta["options"]["longest"] is True and meta["options"]["letter"] == "a"
    longest = max(runs.load_run(out["run_id"]).frame.top_names[0], key=len)
    assert len(runs.load_run(out["run_id"]).frame.top_names[0][0]) == len(longest)
    with pytest.raises(SystemExit):  # argparse refuses a value outside the Option's choices
        cli.main([*base, "--letter", "x"])
    from probekit import models
    from probekit.datasets import triples
    from probekit.errors import ProbekitError

    model = models.load(str(tiny_encoder_dir), device="cpu")
    with pytest.raises(ProbekitError, match="must be one of"):  # and so does the runner, before any work
        runs.run_benchmark(model, triples.load(str(facts)), probe="toy", options={"letter": "x"})


def test_new_probe_widgets_render_on_the_pages(toy_probe, tiny_encoder_dir):
    from apptest_utils import errors, open_app

    at = open_app(model=str(tiny_encoder_dir))
    at.selectbox(key="pk_probe").set_value("toy").run()
    assert errors(at) == []
    assert at.checkbox(key="pk_opt_longest").value is False
    assert at.selectbox(key="pk_opt_letter").options == ["a", "p", "s"]
    assert at.number_input(key="pk_opt_bonus").value == 3
    assert at.number_input(key="pk_opt_toy_chunk").value == 7  # advanced: inside the expander
    assert at.checkbox(key="pk_opt_exclude_subject").value is True  # the Probe page's default
    at.checkbox(key="pk_opt_longest").check().run()
    at.button[0].click().run()
    assert errors(at) == []
    top = at.dataframe[0].value
    assert top["entity"].str.len().is_monotonic_decreasing
    bench = open_app("benchmark", model=str(tiny_encoder_dir))
    bench.selectbox(key="bm_probe").set_value("toy").run()
    assert errors(bench) == []
    assert bench.selectbox(key="bm_letter").options == ["a", "p", "s"]
    assert bench.checkbox(key="bm_exclude_subject").value is False  # runs keep the reference behaviour


def test_page_pieces_never_take_a_pages_url():
    """Streamlit derives a URL path from every file under pages/, a leading underscore dropped: a helper
    module named like a page (``_results.py`` beside ``results.py``) stops the whole app with "Two pages
    resolve to the URL pathname"."""
    pages = ROOT / "pages"
    names = [p.stem for p in pages.glob("*.py") if p.stem != "__init__"]
    paths = [n.lstrip("_") for n in names]
    assert len(paths) == len(set(paths)), sorted(n for n in names if paths.count(n.lstrip("_")) > 1)
