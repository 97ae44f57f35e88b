"""Probing grids: spec expansion, resume, single writer, and the Ray backend on a local 2-worker
cluster (skipped when Ray is not installed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from probekit.errors import ProbekitError
from probekit.grid import GridSpec, run_grid
from probekit.grid.backends import RayBackend

ROOT = Path(__file__).resolve().parent.parent
FACTS = """subject,relation,object
metformin,may_treat,type 2 diabetes
aspirin,may_treat,pain
aspirin,may_treat,fever
ibuprofen,may_treat,pain
insulin,may_treat,type 1 diabetes
warfarin,may_prevent,stroke
vitamin d,may_prevent,rickets
statin,may_prevent,heart attack
"""


@pytest.fixture
def facts(tmp_path) -> str:
    path = tmp_path / "facts.csv"
    path.write_text(FACTS)
    return str(path)


def spec_for(model: str, facts: str, **extra) -> GridSpec:
    return GridSpec.from_dict({"name": "test", "models": [model], "datasets": [facts],
                               "probes": [{"name": "retrieval", "options": {"pooling": ["cls", "mean"]}}],
                               "layers": [1, 2], "k": 5, **extra})


def test_spec_expands_the_cross_product_with_stable_keys(tmp_path):
    spec = GridSpec.from_dict({"models": ["a", "b"], "datasets": ["demo"],
                               "probes": ["mask_average", {"name": "retrieval", "options": {"similarity": ["l2"]}}],
                               "layers": [3], "seeds": [0, 1]})
    cells = spec.cells()
    assert len(cells) == 2 * 2 * 2  # models x probes x seeds (one layer, one similarity)
    assert [c.model for c in cells[:4]] == ["a"] * 4  # models outermost: each loaded once
    assert all(c.options["layer"] == 3 for c in cells)
    again = GridSpec.from_dict(spec.to_dict()).cells()
    assert [c.key for c in again] == [c.key for c in cells] and len({c.key for c in cells}) == len(cells)
    path = tmp_path / "grid.yaml"
    path.write_text("models: [a]\ndatasets: [demo]\nprobes:\n  - name: retrieval\n    options: {pooling: [cls]}\n")
    assert len(GridSpec.load(path).cells()) == 1


@pytest.mark.parametrize("data, message", [
    ({"models": [], "datasets": ["demo"]}, "no models"),
    ({"models": ["m"], "datasets": []}, "no datasets"),
    ({"models": ["m"], "datasets": ["demo"], "colour": 1}, "unknown grid field 'colour'"),
    ({"models": ["m"], "datasets": ["demo"], "k": 0}, "k must be between"),
    ({"models": ["m"], "datasets": ["demo"], "layers": ["x"]}, "must be integers"),
])
def test_bad_grids_get_clear_messages(data, message):
    with pytest.raises(ProbekitError, match=message):
        GridSpec.from_dict(data)


@pytest.mark.parametrize("data, message", [
    ({"datasets": ["nosuchset"]}, "unknown dataset 'nosuchset'; .*available: .*demo"),
    ({"datasets": ["demo:hardest"]}, "dataset 'demo': unknown set 'hardest'; did you mean 'hard'"),
    ({"probes": ["retreival"]}, "unknown probe 'retreival'; did you mean 'retrieval'"),
    ({"probes": [{"name": "retrieval", "options": {"poling": ["cls"]}}]},
     "probe 'retrieval': unknown option 'poling'; did you mean 'pooling'"),
    ({"probes": [{"name": "retrieval", "options": {"pooling": ["cls", "max"]}}]}, "option pooling='max'"),
    ({"vocab": "tail"}, "unknown vocabulary 'tail'; did you mean 'tails'"),
])
def test_a_written_grid_names_only_what_exists(data, message):
    """A grid file or the Grid page's box is checked against the registries when read: an unknown name is one
    line with the close ones, not a grid of cells that each fail at run time; a stored grid reads back unchecked."""
    yaml_text = json.dumps({"models": ["default"], "datasets": ["demo"], **data})  # JSON is YAML
    with pytest.raises(ProbekitError, match=message):
        GridSpec.from_yaml(yaml_text)
    assert GridSpec.from_dict(json.loads(yaml_text)).cells()  # from the store: as it was written


SERVED = "openai:http://127.0.0.1:8080/v1#tiny-a"


@pytest.mark.parametrize("entry, message", [
    ({"endpoint": "http://127.0.0.1:8081/v1", "nmae": "tiny"},
     r"model 2 of the grid: unknown key 'nmae'; did you mean 'name'; available: endpoint, name"),
    ({"endpoint": "http://127.0.0.1:8081/v1", "name": "tiny", "api_key": "sk-1"}, "holds no keys.*api_key_env"),
    ({"name": "tiny"}, "a mapping names a served model; give its server's address as endpoint"),
    ({"endpoint": "127.0.0.1:8081/v1", "name": "tiny"}, "endpoint: http://HOST:PORT/v1"),
    ({"endpoint": "http://127.0.0.1:8081/v1"}, "give the name http://127.0.0.1:8081/v1 serves the model as"),
    ({"endpoint": "http://127.0.0.1:8081/v1", "name": "tiny", "backend": "opneai"},
     "unknown backend 'opneai'; did you mean 'openai'"),
    ({"endpoint": "http://127.0.0.1:8081/v1", "name": "tiny", "api_key_env": "MY KEY"}, "name of an environment var"),
    ("openai:http://127.0.0.1:8081/v1", "model 2 of the grid: .*name the served model after '#'"),
    ("vllm:http://127.0.0.1:8081/v1#tiny", "model 2 of the grid: unknown backend 'vllm'"),
])
def test_a_served_model_entry_is_checked_when_read(entry, message):
    with pytest.raises(ProbekitError, match=message):
        GridSpec.from_yaml(json.dumps({"models": ["default", entry], "datasets": ["demo"]}))


def test_a_served_model_entry_is_its_id_with_its_own_tokenizer_and_key_variable(monkeypatch):
    """A mapping entry is the model's ``openai:ENDPOINT#NAME`` id; its tokenizer and key variable travel with each of
    its cells (and into their keys), while every other cell's settings, and so its key, are what they were."""
    from dataclasses import replace

    from probekit.grid import grid_id_of
    from probekit.grid.spec import Cell
    from probekit.grid.work import api_keys, load_cell_model

    entry = {"endpoint": "http://127.0.0.1:8081/v1/", "name": "tiny-b", "tokenizer": "/m/gpt2", "api_key_env": "B_KEY"}
    spec = GridSpec.from_dict({"models": [SERVED, entry], "datasets": ["demo"], "probes": ["likelihood"]})
    assert spec.models == (SERVED, "openai:http://127.0.0.1:8081/v1#tiny-b")
    a, b = spec.cells()
    assert a.served == {} and "served" not in a.settings()
    assert b.served == {"tokenizer": "/m/gpt2", "api_key_env": "B_KEY"} and b.key != replace(b, served={}).key
    assert Cell.from_settings(b.settings()) == b
    again = GridSpec.from_dict(spec.to_dict())
    assert again == spec and grid_id_of(again) == grid_id_of(spec)
    bare = {"endpoint": "http://127.0.0.1:8080/v1", "name": "tiny-a"}  # nothing of its own: the same grid as the id
    assert grid_id_of(GridSpec.from_dict({"models": [bare], "datasets": ["demo"]})) == \
        grid_id_of(GridSpec.from_dict({"models": [SERVED], "datasets": ["demo"]}))
    with pytest.raises(ProbekitError, match="listed twice"):
        GridSpec.from_dict({"models": [SERVED, {**bare, "tokenizer": "/m/gpt2"}], "datasets": ["demo"]})
    monkeypatch.delenv("B_KEY", raising=False)
    assert api_keys([a, b]) == {}
    with pytest.raises(ProbekitError, match="its key variable B_KEY is not set"):  # before any request
        load_cell_model(b)
    monkeypatch.setenv("B_KEY", "k")
    assert api_keys([a, b]) == {"B_KEY": "k"}


def test_local_grid_stores_each_cell_once_and_resumes(tiny_encoder_dir, facts):
    from probekit.bench import runs

    spec = spec_for(str(tiny_encoder_dir), facts)
    result = run_grid(spec, backend="local")
    assert result.ran == 4 and result.skipped == 0 and (result.cells.status == "done").all()
    assert result.cells.run_id.is_unique and len(runs.list_runs()) == 4
    assert set(result.cells["counting"]) == {"query"}  # each cell's numbers name their counting
    # the same grid again: everything stored, nothing computed
    again = run_grid(spec, backend="local")
    assert again.ran == 0 and again.skipped == 4 and len(runs.list_runs()) == 4
    # a deleted run makes its cell run again, alone
    runs.delete_run(result.cells.run_id[0])
    third = run_grid(spec, backend="local")
    assert third.ran == 1 and len(runs.list_runs()) == 4
    stored = runs.load_run(third.cells.run_id[0])
    assert stored.meta["options"]["layer"] == 1 and stored.meta["options"]["pooling"] == "cls"


def test_a_failing_cell_is_reported_and_the_grid_goes_on(tiny_encoder_dir, facts):
    spec = GridSpec.from_dict({"models": [str(tiny_encoder_dir), "/no/such/model"], "datasets": [facts],
                               "probes": ["retrieval"], "k": 5})
    result = run_grid(spec)
    status = dict(zip(result.cells.label.str.split(" · ").str[0], result.cells.status))
    from probekit.model_registry import short_model_id  # a folder is labelled by its last two path parts

    assert status == {short_model_id(str(tiny_encoder_dir)): "done", "such/model": "failed"}
    assert "does not exist" in result.cells.error[result.cells.status == "failed"].iloc[0]


def test_a_model_that_fails_to_load_is_tried_once_per_run(facts, monkeypatch):
    """A served model whose server answers 503 to everything (a real HTTP server on 127.0.0.1, counting requests):
    the first of its cells fails with the server's line, the others at once with the same line (not another round
    of the client's retries each); the next run of the grid tries its failed cells again."""
    import http.server
    import threading

    asked = []

    class Down(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            asked.append(self.path)
            self.send_error(503, "overloaded")

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PROBEKIT_OPENAI_RETRIES", "0")
    model = f"openai:http://127.0.0.1:{server.server_address[1]}/v1#tiny"
    try:
        spec = GridSpec.from_dict({"name": "down", "models": [model], "datasets": [facts],
                                   "probes": [{"name": "likelihood", "options": {"reduction": ["sum", "mean"]}}],
                                   "seeds": [0, 1], "k": 5})
        result = run_grid(spec)
        errors = list(result.cells.error)
        assert len(errors) == 4 and set(result.cells.status) == {"failed"}
        assert len(asked) == 1  # one load, one request: the listing of served models
        first = next(e for e in errors if "not tried again" not in e)
        assert "503" in first
        assert sorted(errors) == sorted([first] + [f"{first} (not tried again in this run: the model failed to "
                                                   "load for an earlier cell)"] * 3)
        run_grid(spec)
        assert len(asked) == 2  # a new run tries again
    finally:
        server.shutdown()


def test_a_worker_forgets_load_failures_when_a_new_run_starts(facts):
    """A Ray worker's model slot outlives a run (a backend kept open for several grids): a failure is remembered
    for the run's token only."""
    from probekit.grid.backends import _ModelSlot

    (cell,) = GridSpec.from_dict({"models": ["/no/such/model"], "datasets": [facts], "probes": ["retrieval"],
                                  "k": 5}).cells()
    slot = _ModelSlot()

    def error_line() -> str:
        with pytest.raises(Exception) as caught:
            slot.get(cell)
        return str(caught.value)

    slot.start_run("a")
    first = error_line()
    assert "does not exist" in first and "not tried again" not in first
    assert "not tried again" in error_line()
    slot.start_run("a")
    assert "not tried again" in error_line()
    slot.start_run("b")
    assert error_line() == first


def test_workers_for_served_models_only_ask_for_no_gpu(facts):
    """The engine serving a model may need the cluster's GPUs: workers that only send it requests take none."""
    from probekit.grid.backends import worker_gpus

    def cells(*models):
        return GridSpec.from_dict({"models": list(models), "datasets": [facts], "probes": ["likelihood"],
                                   "k": 5}).cells()

    served = "openai:http://10.0.0.5:8000/v1#llama"
    kw = {"device": None, "gpus_per_worker": None, "cluster_gpus": 8, "workers": 4}
    assert worker_gpus(cells(served), **kw) == 0
    assert worker_gpus(cells(served, "default"), **kw) == 1.0  # a model to load: a GPU each
    assert worker_gpus(cells("default"), **{**kw, "gpus_per_worker": 0.5}) == 0.5
    assert worker_gpus(cells("default"), **{**kw, "device": "cpu"}) == 0


DRIVER = textwrap.dedent("""
    import sys
    from probekit.grid import GridSpec, run_grid
    from probekit.grid.spec import Cell
    spec = GridSpec.from_dict({"name": "test", "models": [sys.argv[1]], "datasets": [sys.argv[2]],
                               "probes": [{"name": "retrieval", "options": {"pooling": ["cls", "mean"]}}],
                               "layers": [1, 2], "k": 5})
    run_grid(spec, progress=lambda d, t, s="": print("progress", d, s, flush=True))
""")


def test_killed_driver_rerun_stores_only_the_missing_cells(tiny_encoder_dir, facts):
    """Kill the driver (SIGKILL) after its first stored cell: rerunning the grid stores only the rest."""
    from probekit import store
    from probekit.bench import runs

    store.close_all()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tiny_encoder_dir), facts], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        for line in proc.stdout:
            if line.startswith("progress 1 stored"):
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(30)
    first = len(runs.list_runs())
    assert 1 <= first < 4
    result = run_grid(spec_for(str(tiny_encoder_dir), facts))
    assert result.ran == 4 - first and len(runs.list_runs()) == 4 and result.cells.run_id.is_unique


def _frames(result) -> dict:
    from probekit.bench import runs

    out = {}
    for key, run_id in zip(result.cells.cell_key, result.cells.run_id):
        frame = runs.load_run(run_id).frame
        out[key] = frame[["query_id", "gold_ranks", "top_ids"]].to_json()
    return out


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_ray_backend_matches_local_and_survives_a_killed_worker(tiny_encoder_dir, facts, tmp_path, monkeypatch):
    """Two Ray workers on this machine give the same results cell by cell as the local backend; a worker
    killed with SIGKILL mid-grid is restarted, its cell retried, and nothing is stored twice."""
    pytest.importorskip("ray")
    from probekit import store
    from probekit.bench import runs

    spec = spec_for(str(tiny_encoder_dir), facts)
    local = run_grid(spec, backend="local")
    expected = _frames(local)
    # a second database for the ray run (same cells would otherwise be linked to the local runs)
    store.close_all()
    monkeypatch.setenv("PROBEKIT_DB", str(tmp_path / "ray.duckdb"))
    backend = RayBackend(workers=2, max_retries=2)
    killed = {}

    def kill_one_worker(done, total, stage=""):
        if stage.startswith("running") and not killed and backend.actors:
            import ray

            pid = ray.get(backend.actors[0].pid.remote())
            os.kill(pid, signal.SIGKILL)
            killed["pid"] = pid

    original = run_grid.__globals__["make_backend"]
    monkeypatch.setitem(run_grid.__globals__, "make_backend", lambda name, **o: backend)
    try:
        result = run_grid(spec, backend="ray", progress=kill_one_worker)
    finally:
        monkeypatch.setitem(run_grid.__globals__, "make_backend", original)
    assert killed, "no worker was killed"
    assert (result.cells.status == "done").all(), result.cells[["label", "status", "error"]]
    assert len(runs.list_runs()) == 4 and result.cells.run_id.is_unique
    assert _frames(result) == expected
    assert result.cells.worker.str.startswith("ray:").all()


def test_cli_grid_run_list_show(tiny_encoder_dir, facts, tmp_path, capsys):
    from probekit.cli import main

    path = tmp_path / "grid.json"
    path.write_text(json.dumps(spec_for(str(tiny_encoder_dir), facts).to_dict()))
    assert main(["grid", "run", str(path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "ran 4 cells, 0 already stored, 0 failed" in out
    gid = out.split(":")[0]
    assert main(["grid", "show", gid, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["cells"]) == 4 and {c["status"] for c in shown["cells"]} == {"done"}
    assert shown["ranking"] == {"note": "the grid's stored cells have fewer than two models: no ranking to compare"}
    assert main(["grid", "show", gid, "--resamples", "50"]) == 0  # the counting rule and an interval per cell
    out = capsys.readouterr().out
    assert "counting: query (a query is a hit when any gold" in out and out.count("acc@10 [") == 4
    assert main(["grid", "show", gid, "--resamples", "0"]) == 2 and "--resamples" in capsys.readouterr().err
    assert main(["grid", "list"]) == 0 and gid in capsys.readouterr().out
    assert main(["grid", "show", "grid-nope"]) == 2 and "unknown grid" in capsys.readouterr().err


def test_one_encoding_pass_serves_every_layer_of_the_grid(tiny_encoder, facts, monkeypatch):
    """Cells that differ only in layer (or relation) share one encoding pass: each hidden_states[L] comes from
    the same forward, so the first cell pools its siblings' layers too and they find them in the cache; the
    vectors are the ones a separate pass gives."""
    from probekit import cache

    calls = []
    real = cache.encode_layers

    def counting(model, texts, *, layers, **kw):
        calls.append(tuple(layers))
        return real(model, texts, layers=layers, **kw)

    texts = ["type 2 diabetes", "pain", "stroke"]
    alone = {layer: real(tiny_encoder, texts, layers=[layer], pooling="mean", max_length=25)[0] for layer in (1, 2)}
    monkeypatch.setattr(cache, "encode_layers", counting)
    first = cache.embeddings(tiny_encoder, texts, layers=[1], pooling="mean", max_length=25, memo=False,
                             share_layers=[1, 2])
    second = cache.embeddings(tiny_encoder, texts, layers=[2], pooling="mean", max_length=25, memo=False,
                              share_layers=[1, 2])
    assert calls == [(1, 2)]  # one pass computed both; the layer-2 call read the cache
    for layer, vec in ((1, first[1]), (2, second[2])):
        assert abs(vec - alone[layer]).max() < 1e-5
    cache.embeddings(tiny_encoder, ["fever"], layers=[1], pooling="mean", max_length=25)  # not asked: no siblings
    assert calls[-1] == (1,)


def test_local_grid_encodes_the_names_once_per_pooling(tiny_encoder_dir, facts, monkeypatch):
    from probekit import cache

    calls = []
    real = cache.encode_layers
    monkeypatch.setattr(cache, "encode_layers",
                        lambda model, texts, *, layers, **kw: calls.append((len(texts), tuple(layers)))
                        or real(model, texts, layers=layers, **kw))
    res = run_grid(spec_for(str(tiny_encoder_dir), facts), backend="local")
    assert (res.cells.status == "done").all() and len(res.cells) == 4  # 2 poolings x 2 layers
    names = [c for c in calls if c[0] > 8]  # the candidate names (queries are the 8 facts)
    assert sorted(layers for _, layers in names) == [(1, 2), (1, 2)]  # one pass per pooling, both layers


def test_ray_scheduler_never_encodes_the_same_thing_twice_at_once():
    """An idle worker skips cells whose encodings another worker is computing right now."""
    from probekit.grid.backends import next_cell

    spec = GridSpec.from_dict({"models": ["m"], "datasets": ["d"], "relations": ["r1", "r2"],
                               "probes": [{"name": "retrieval", "options": {"pooling": ["cls", "mean"]}}],
                               "layers": [2, 4]})
    cells = spec.cells()
    pending = list(cells)
    first = pending.pop(next_cell(pending, busy=set(), last=None, waiting_ok=False))
    j = next_cell(pending, busy={first.share_key}, last=None, waiting_ok=True)
    assert pending[j].share_key != first.share_key
    only_same = [c for c in pending if c.share_key == first.share_key]
    assert next_cell(only_same, busy={first.share_key}, last=None, waiting_ok=True) is None
    assert next_cell(only_same, busy={first.share_key}, last=None, waiting_ok=False) == 0


def test_relation_groups_are_an_axis_and_keep_the_sets_vocabulary(tiny_encoder_dir, facts):
    spec = spec_for(str(tiny_encoder_dir), facts, relation_groups=[["may_treat"], ["may_prevent"]])
    cells = spec.cells()
    assert len(cells) == 2 * 4 and {c.relations for c in cells} == {("may_treat",), ("may_prevent",)}
    assert GridSpec.from_dict(spec.to_dict()).cells() == cells
    assert "relation_groups" not in spec_for(str(tiny_encoder_dir), facts).to_dict()  # old grid ids unchanged
    res = run_grid(spec, backend="local")
    assert (res.cells.status == "done").all()
    from probekit.bench import runs

    sizes = {runs.load_run(r).frame.n_candidates.iloc[0] for r in res.cells.run_id}
    assert len(sizes) == 1  # every group ranked among the same set's names
    with pytest.raises(ProbekitError, match="either relations"):
        spec_for("m", facts, relations=["may_treat"], relation_groups=[["may_treat"]])


def test_cells_have_intervals_and_the_model_ranking_is_checked_across_conditions(tiny_encoder_dir, tiny_mlm_dir,
                                                                                facts, capsys):
    """Two models x two layers: each cell's score lies in its interval (Wilson for micro acc@k, a bootstrap for
    macro: probekit.metrics.intervals), and the ranking of the two models is read per layer (the conditions) by
    probekit.metrics.stability, from the same per-query hits the cells' stored scores count."""
    from probekit.cli import main
    from probekit.grid import scores
    from probekit.metrics.stability import condition_scores

    spec = GridSpec.from_dict({"name": "two", "models": [str(tiny_encoder_dir), str(tiny_mlm_dir)],
                               "datasets": [facts], "probes": ["retrieval"], "layers": [1, 2], "k": 5})
    result = run_grid(spec)
    cells = scores.cell_intervals(result.grid_id, metric="acc@5", n_boot=200)
    assert (cells.status == "done").all() and "Wilson" in cells.attrs["note"] and "bootstrap" in cells.attrs["note"]
    for avg in ("macro", "micro"):
        assert (cells[f"{avg} acc@5 lo"] <= cells[f"{avg} acc@5 hi"]).all()
    assert ((cells["macro acc@5 lo"] <= cells["macro acc@5"]) & (cells["macro acc@5"] <= cells["macro acc@5 hi"])).all()
    assert cells["macro acc@5 [lo, hi]"].str.fullmatch(r"\[\d+\.\d, \d+\.\d\]").all()

    table = scores.grid_table(result.grid_id, metric="acc@5")
    assert set(table.condition) == {"layer=1", "layer=2"}
    stored = condition_scores(table)  # the same numbers the cells show, from the per-query hits
    for r in cells.itertuples():
        cond = f"layer={json.loads(r.settings)['options']['layer']}"
        model = json.loads(r.settings)["model"]
        assert stored.loc[cond, model] == pytest.approx(cells.loc[r.Index, "macro acc@5"])
    held = scores.grid_stability(result.grid_id, metric="acc@5", n_boot=100)
    assert held["conditions"] == ["layer=1", "layer=2"] and len(held["pairs"]) == 1
    assert held["pairs"]["verdict"].iloc[0] in ("holds", "flips", "uncertain", "tied") and "query" in held["counting"]

    assert main(["grid", "show", result.grid_id, "--metric", "acc@5", "--resamples", "100"]) == 0
    out = capsys.readouterr().out
    assert "counting: query" in out and "acc@5 [" in out and "Wilson score" in out
    assert "Does the model ranking hold across the grid's conditions? macro acc@5" in out and "resamples" in out
    assert main(["grid", "show", result.grid_id, "--format", "json", "--resamples", "100"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["ranking"]["conditions"] == ["layer=1", "layer=2"] and "macro acc@10 [lo, hi]" in \
        shown["cells"][0]



def test_checkpoints_of_one_rewiring_run_are_told_apart_in_labels():
    """The rule: a local folder is named by its last two path parts wherever a cell is labelled, so the checkpoints
    of one rewiring run (paths equal up to ``step-…``) never read the same (a label cut from the right did)."""
    from probekit.grid import Cell, distinguishing_labels

    run = "/home/me/.cache/probekit/rewired/rw-20261129-100431-8975"
    cells = [Cell(f"{run}/step-{s:06d}", "medlama:hard", "retrieval", {"pooling": p})
             for s in (40, 120) for p in ("cls", "mean")]
    assert [c.label for c in cells][:2] == [
        "rw-20261129-100431-8975/step-000040 · medlama:hard · retrieval (pooling=cls)",
        "rw-20261129-100431-8975/step-000040 · medlama:hard · retrieval (pooling=mean)"]
    assert len({c.label for c in cells}) == 4
    assert distinguishing_labels(cells) == [f"rw-20261129-100431-8975/step-{s:06d} · pooling={p}"
                                            for s in (40, 120) for p in ("cls", "mean")]
    hub = Cell("dmis-lab/biobert-v1.1", "demo", "retrieval", {})
    assert hub.label == "dmis-lab/biobert-v1.1 · demo · retrieval"  # an id that is not a path keeps its name
