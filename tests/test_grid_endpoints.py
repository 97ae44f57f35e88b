"""A grid over several served models on Ray: each model behind its own llama.cpp server (llama-cpp-python's
OpenAI-compatible server on 127.0.0.1, the tests' tiny GPT-2 as float32 GGUF under two names and ports), scored by
the likelihood probe from Ray workers that hold no weights, only each endpoint's client (canary run per worker and
endpoint).

The claims, with the rules they check:

- Ray equals the local backend cell by cell. Both send the same prompts to the same servers, so the rule is the
  canary's own bound on one engine answering the same prompt twice (``SAME_TOL`` per token,
  probekit/backends/remote.py), summed over a statement's tokens, with the pairwise order rule of
  tests/test_backends_engine.py (candidates further apart than twice the bound keep their order).
- Each served cell equals the in-process tiny GPT-2's ranking under the engine tolerance stated in
  tests/test_backends_engine.py (``TOKEN_TOL`` per token; same summing and order rule).
- An endpoint that is down fails its own cells, each with one line naming its address; the other cells are stored;
  ``grid show`` lists it; once the server is up, running the grid again runs only the failed cells.
- A model's key reaches the worker from the variable its entry names (server A refuses requests without it), and the
  stored grid names the variable, never the key.

Marked ``heavy`` (two engines and a local Ray with 2 CPUs); skipped when llama-cpp-python or Ray is not installed
(``pip install -r requirements-engines.txt -r requirements-ray.txt``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.heavy

from _tiny_causal import (  # noqa: E402
    free_port,
    save_tiny_gpt2,
    save_tiny_gpt2_gguf,
    serve_gguf,
    skip_without_engine,
    stop,
)

skip_without_engine()
pytest.importorskip("ray", reason="Ray is not installed: pip install -r requirements-ray.txt")

from test_backends_engine import TOKEN_TOL, assert_same_order  # noqa: E402
from test_grid import FACTS  # noqa: E402

from probekit.backends.remote import SAME_TOL  # noqa: E402

KEY_VAR, KEY = "GRID_TEST_ENDPOINT_KEY", "grid-test-key-3141"


@pytest.fixture
def engines(tmp_path):
    """Server A (asks for a key) is up; server B's port is chosen, its server not started (``start_b`` starts it)."""
    folder = save_tiny_gpt2(tmp_path / "gpt2")
    gguf_file = save_tiny_gpt2_gguf(folder, tmp_path / "tiny-gpt2-f32.gguf")
    procs = []
    proc, url_a = serve_gguf(gguf_file, alias="tiny-a", api_key=KEY)
    procs.append(proc)
    port_b = free_port()

    def start_b():
        proc_b, url = serve_gguf(gguf_file, alias="tiny-b", port=port_b)
        procs.append(proc_b)
        return url

    yield folder, url_a, f"http://127.0.0.1:{port_b}/v1", start_b
    for p in procs:
        stop(p)


def _frames(cells) -> dict:
    """{(model, span): {query id: (candidate ids, scores)}} of a grid's stored cells."""
    from probekit.bench import runs

    out = {}
    for settings, run_id in zip(cells.settings, cells.run_id):
        s = json.loads(settings)
        frame = runs.load_run(run_id).frame
        out[(s["model"], s["options"]["span"])] = {
            q: (list(ids), np.array(scores, dtype=float))
            for q, ids, scores in zip(frame.query_id, frame.top_ids, frame.top_scores)}
    return out


def _assert_agree(a: dict, b: dict, tol: float) -> None:
    """Every query scores the same candidates, each within ``tol``, in the same order beyond twice ``tol``."""
    assert a.keys() == b.keys()
    for q in a:
        (ids_a, sa), (ids_b, sb) = a[q], b[q]
        assert sorted(ids_a) == sorted(ids_b)
        sa, sb = sa[np.argsort(ids_a)], sb[np.argsort(ids_b)]
        assert np.abs(sa - sb).max() <= tol, q
        assert_same_order(sa, sb, tol)


def test_a_grid_of_served_models_on_ray_equals_local_and_in_process(engines, tmp_path, monkeypatch, capsys):
    from transformers import AutoTokenizer

    from probekit import store
    from probekit.bench import runs
    from probekit.cli import main
    from probekit.datasets import load_dataset
    from probekit.grid import GridSpec, get_grid, run_grid
    from probekit.grid.backends import RayBackend
    from probekit.probes.likelihood import statement

    folder, url_a, url_b, start_b = engines
    facts = tmp_path / "facts.csv"
    facts.write_text(FACTS)
    monkeypatch.delenv("PROBEKIT_OPENAI_TOKENIZER", raising=False)  # each entry names its own
    monkeypatch.setenv(KEY_VAR, KEY)
    monkeypatch.setenv("PROBEKIT_OPENAI_RETRIES", "0")  # the down endpoint fails at once instead of after backoffs
    grid_file = tmp_path / "grid.yaml"
    grid_file.write_text(f"""
name: endpoints
models:
  - {{endpoint: "{url_a}", name: tiny-a, tokenizer: "{folder}", api_key_env: {KEY_VAR}}}
  - {{endpoint: "{url_b}", name: tiny-b, tokenizer: "{folder}"}}
datasets: ["{facts}"]
probes: [{{name: likelihood, options: {{span: [statement, answer]}}}}]
k: 20
""")
    spec = GridSpec.load(grid_file)
    model_a, model_b = f"openai:{url_a}#tiny-a", f"openai:{url_b}#tiny-b"
    assert spec.models == (model_a, model_b)

    backend = RayBackend(workers=2, max_retries=1)  # a local Ray with 2 CPUs, kept for the rerun
    try:
        first = run_grid(spec, backend=backend)
        cells = first.cells.assign(model=[json.loads(s)["model"] for s in first.cells.settings])
        assert first.ran == 4 and first.failed == 2
        assert (cells.status[cells.model == model_a] == "done").all()
        down = cells[cells.model == model_b]
        assert (down.status == "failed").all()
        for error in down.error:
            assert f"cannot reach {url_b}/models" in error and "\n" not in error
        assert main(["grid", "show", first.grid_id, "--resamples", "10"]) == 0  # the grid reports the failed cells
        shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("failed")]
        assert len(shown) == 2 and all(f"cannot reach {url_b}/models" in line for line in shown)

        start_b()
        again = run_grid(spec, backend=backend)
    finally:
        backend.shutdown()
    assert again.ran == 2 and again.skipped == 2 and (again.cells.status == "done").all()
    before = dict(zip(first.cells.cell_key, first.cells.run_id))
    assert all(before[key] == run_id for key, run_id in zip(again.cells.cell_key, again.cells.run_id)
               if isinstance(before[key], str))  # the cells stored the first time were not run again
    assert again.cells.worker.str.startswith("ray:").all()
    stored = runs.get_run(again.cells.run_id[again.cells.label.str.startswith(model_a)].iloc[0])
    assert stored["model_source"] == model_a and stored["device"] == "remote"  # the run names backend and endpoint
    kept = json.dumps(get_grid(again.grid_id)["spec"])
    assert KEY_VAR in kept and KEY not in kept
    on_ray = _frames(again.cells)

    # the same grid on the local backend, into a database of its own (it would link the Ray runs otherwise)
    store.close_all()
    monkeypatch.setenv("PROBEKIT_DB", str(tmp_path / "local.duckdb"))
    local = run_grid(spec, backend="local")
    assert (local.cells.status == "done").all()
    here = _frames(local.cells)
    # and the same weights in process
    inproc = _frames(run_grid(GridSpec.from_dict({**spec.to_dict(), "models": [str(folder)]}),
                              backend="local").cells)

    tok = AutoTokenizer.from_pretrained(folder)
    ds = load_dataset("triples", path=str(facts))
    names = ds.candidates("heads+tails").names
    assert all(len(ids) == len(names) for cell in on_ray.values() for ids, _ in cell.values())  # k covers them all
    longest = max(len(tok(statement(q, n)[0])["input_ids"]) for q in ds.queries for n in names)
    assert on_ray.keys() == here.keys() == {(m, span) for m in (model_a, model_b) for span in ("statement", "answer")}
    for (model, span), cell in on_ray.items():
        _assert_agree(cell, here[(model, span)], SAME_TOL * longest)
        _assert_agree(cell, inproc[(str(folder), span)], TOKEN_TOL * longest)
