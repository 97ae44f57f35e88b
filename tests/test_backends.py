"""Served models (probekit.backends): the client logic against a small real HTTP server started here on 127.0.0.1.

The fixture server (``http.server``, standard library) answers ``/v1/models`` and ``/v1/completions`` as the
OpenAI completions API does, its log-probs computed by the in-process tiny GPT-2: ``echo`` lists each prompt token
with the log-prob the model gives it after the tokens before it (the first null), then the generated token
(OpenAI's legacy completions reference, "echo" and "logprobs"). Its modes imitate what engines really do:
``vllm`` echoes the BOS (null); ``llamacpp`` leaves a leading BOS out and nulls the first token left (llama-cpp-python
0.3's ``Llama._create_completion``), and honours ``logit_bias`` on a generated token whose log-prob comes from the
unbiased distribution. The broken modes are the ways a server silently scores at chance. Equality with a real
engine is the heavy test's claim (tests/test_backends_engine.py); here: the canary's refusals, retries, timeouts,
the id form, and that rankings through a protocol-correct server equal the in-process ones.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch
from _tiny_causal import save_tiny_gpt2

from probekit import backends, cli, config, models
from probekit.backends.http import Client, ServerError
from probekit.backends.openai import BackendRefused, Echo, align
from probekit.datasets import load_dataset
from probekit.errors import ProbekitError, UnknownNameError
from probekit.probes import get_probe, probes_for

NAME = "tiny"


class Engine:
    """What the fixture server computes with: the tiny GPT-2 and its tokenizer."""

    def __init__(self, folder):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(folder)
        self.lm = AutoModelForCausalLM.from_pretrained(folder).eval()
        self.lock = threading.Lock()

    def logprobs(self, ids: list[int]) -> np.ndarray:
        """(len(ids), vocab) log-softmax rows: row i is the distribution after ids[:i + 1]."""
        with self.lock, torch.inference_mode():
            return torch.log_softmax(self.lm(torch.tensor([ids])).logits[0].double(), -1).numpy()


def _answer(engine: Engine, body: dict, mode: str) -> dict:
    ids = list(engine.tok(body["prompt"])["input_ids"])
    if mode == "extra_token":
        ids = ids + ids[-1:]
    rows = engine.logprobs(ids)
    bias = {int(k): float(v) for k, v in (body.get("logit_bias") or {}).items()}
    last = rows[-1].copy()
    for k, v in bias.items():
        last[k] += v
    gen = int(np.argmax(last))
    gen_lp = float(rows[-1][gen])  # the unbiased distribution's, as llama-cpp-python reports it
    piece = engine.tok.decode
    if body.get("echo") and mode not in ("generated_only",):
        tokens = [piece([t]) for t in ids]
        values: list = [None] + [float(rows[i - 1][ids[i]]) for i in range(1, len(ids))]
        if mode == "llamacpp" and ids[0] == engine.tok.bos_token_id:
            tokens, values = tokens[1:], [None] + values[2:]
        if mode == "null":
            values = [None] * len(values)
        if mode == "constant":
            values = [None] + [-1.0] * (len(values) - 1)
        tokens, values = tokens + [piece([gen])], values + [gen_lp]
    else:
        tokens, values = [piece([gen])], [gen_lp]
    logprobs = None if mode == "no_logprobs" else {"tokens": tokens, "token_logprobs": values,
                                                   "text_offset": [0] * len(tokens), "top_logprobs": None}
    return {"id": "cmpl-1", "object": "text_completion", "model": body.get("model"),
            "choices": [{"index": 0, "text": piece([gen]), "logprobs": logprobs, "finish_reason": "length"}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1}}


class Served:
    """A fixture server on 127.0.0.1 in a thread; ``mode`` may change between requests, ``fail`` lists statuses to
    answer first (then it answers normally), ``delay`` seconds before each answer."""

    def __init__(self, engine: Engine, mode: str = "vllm"):
        self.engine, self.mode, self.fail, self.delay, self.requests = engine, mode, [], 0.0, 0
        self.auth: str | None = None
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except BrokenPipeError:  # the client gave up (the timeout test)
                    pass

            def do_GET(self):
                if self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": NAME, "object": "model", "created": time.time(),
                                                                 "owned_by": "test"}]})
                else:
                    self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                outer.requests += 1
                outer.auth = self.headers.get("Authorization")
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(outer.delay)
                if outer.fail:
                    self._send(outer.fail.pop(0), {"error": {"message": "busy, try again"}})
                elif self.path != "/v1/completions" or outer.mode == "chat_only":
                    self._send(404, {"detail": "Not Found"})
                else:
                    self._send(200, _answer(outer.engine, body, outer.mode))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def model_id(self) -> str:
        return f"openai:{self.url}#{NAME}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_gpt2(tmp_path_factory.mktemp("served") / "gpt2")


@pytest.fixture(scope="module")
def engine(tiny):
    return Engine(tiny)


@pytest.fixture
def served(engine, tiny, monkeypatch):
    monkeypatch.setenv("PROBEKIT_OPENAI_TOKENIZER", str(tiny))
    monkeypatch.setenv("PROBEKIT_OPENAI_RETRIES", "0")
    server = Served(engine)
    yield server
    server.close()


# ---------------------------------------------------------------- the id form and the registry
def test_the_id_names_kind_address_and_served_model():
    assert backends.parse_id("openai:http://127.0.0.1:8080/v1/#m-1") == ("openai", "http://127.0.0.1:8080/v1", "m-1")
    assert backends.is_backend_id("openai:https://host/v1#m") and backends.is_backend_id("opnai:http://h/v1#m")
    assert not backends.is_backend_id("gpt2") and not backends.is_backend_id("/models/gpt2")
    assert not backends.is_backend_id("http://host/v1")
    with pytest.raises(UnknownNameError, match=r"^unknown backend 'opnai'; did you mean 'openai'; available: openai"):
        backends.parse_id("opnai:http://h/v1#m")
    with pytest.raises(ProbekitError, match="name the served model after '#'"):
        backends.parse_id("openai:http://h/v1")


@pytest.mark.parametrize("kind", sorted(backends.BACKENDS))
def test_every_registered_backend_refuses_an_unreachable_address_in_one_line(kind, monkeypatch):
    """The registry's contract: a loader takes (id, URL, name, companion loader) and fails in one line."""
    monkeypatch.setenv("PROBEKIT_OPENAI_RETRIES", "0")
    with pytest.raises(ServerError, match=r"^cannot reach http://127\.0\.0\.1:9/v1/models: .*is the server running"):
        backends.BACKENDS[kind](f"{kind}:http://127.0.0.1:9/v1#m", "http://127.0.0.1:9/v1", "m", None)


def test_settings_are_read_when_called(monkeypatch):
    for var in ("PROBEKIT_OPENAI_API_KEY", "PROBEKIT_OPENAI_TOKENIZER", "PROBEKIT_OPENAI_CONCURRENCY",
                "PROBEKIT_OPENAI_RETRIES", "PROBEKIT_OPENAI_TIMEOUT_S"):
        monkeypatch.delenv(var, raising=False)
    assert (config.openai_api_key(), config.openai_tokenizer(), config.openai_concurrency(), config.openai_retries(),
            config.openai_timeout_s()) == (None, None, 4, 4, 60.0)
    monkeypatch.setenv("PROBEKIT_OPENAI_CONCURRENCY", "0")
    with pytest.raises(ProbekitError, match="^PROBEKIT_OPENAI_CONCURRENCY must be positive, got '0'"):
        config.openai_concurrency()
    monkeypatch.setenv("PROBEKIT_OPENAI_RETRIES", "x")
    with pytest.raises(ProbekitError, match="^PROBEKIT_OPENAI_RETRIES must be a whole number"):
        config.openai_retries()
    monkeypatch.setenv("PROBEKIT_OPENAI_RETRIES", "0")
    monkeypatch.setenv("PROBEKIT_OPENAI_API_KEY", " k ")
    assert config.openai_retries() == 0 and config.openai_api_key() == "k"


def test_align_places_the_echo_on_the_local_tokens():
    """The echoed entries are the last tokens of the server's prompt; its count must be the tokenizer's."""
    assert align(Echo(("a", "b", "c", "d"), (None, -1.0, -2.0, -3.0), 4), 4, "s")[1] is False
    values, missing = align(Echo(("b", "c", "d"), (None, -2.0, -3.0), 4), 4, "s")
    assert missing and np.isnan(values[:2]).all() and values[2:] == [-2.0, -3.0]
    with pytest.raises(BackendRefused, match="reads 5 tokens where the tokenizer has 4"):
        align(Echo(("a", "b", "c", "d", "e"), (None, -1.0, -1.0, -1.0, -1.0), 5), 4, "s")
    with pytest.raises(BackendRefused, match="reads 4 tokens and echoes 2 where"):
        align(Echo(("c", "d"), (None, -1.0), 4), 4, "s")


# ---------------------------------------------------------------- equal rankings through a correct server
@pytest.mark.parametrize("mode", ["vllm", "llamacpp"])
def test_rankings_through_the_server_equal_the_in_process_ones(served, tiny, mode, monkeypatch):
    """Both echo layouts give every scored token's log-prob (llamacpp: the first one through a forced token):
    the same scores within float noise (the server runs each statement alone, in float64 log-softmax), so the
    same rankings; the run records the backend."""
    served.mode = mode
    monkeypatch.setenv("PROBEKIT_OPENAI_CONCURRENCY", "3")
    remote = models.load(served.model_id)
    local = models.load(str(tiny))
    assert remote.meta["backend"] == "openai" and remote.meta["endpoint"] == served.url
    assert remote.meta["canary"] == ("every token" if mode == "vllm" else
                                     "without the first token (forced-token requests fill it)")
    ds = load_dataset("demo")
    probe = get_probe("likelihood")
    queries = ds.queries[:4]
    for span in ("statement", "answer"):
        for q in queries:
            cands = ds.candidates("relation", q.relation)
            a = probe.rank(remote, [q], cands, k=len(cands), span=span)[0]
            b = probe.rank(local, [q], cands, k=len(cands), span=span)[0]
            np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)
            assert a.gold_ranks == b.gold_ranks
    stages: list[str] = []
    probe.rank(remote, queries[:2], ds.candidates("relation", queries[0].relation), k=3,
               progress=lambda done, total, stage: stages.append(stage))
    speeds = [float(m.replace(",", "")) for st in stages for m in re.findall(r"([\d,]+) tokens/s", st)]
    assert speeds and max(speeds) > 0  # the one Progress says how fast the engine scores
    assert probes_for(remote) == probes_for(local) == ["likelihood"]  # as for any decoder-only LM
    with pytest.raises(ProbekitError, match="^probe 'retrieval' needs an encoder"):
        get_probe("retrieval").rank(remote, queries[:1], ds.candidates("relation", queries[0].relation))


@pytest.mark.parametrize("mode", ["vllm", "llamacpp"])
def test_a_tokenizer_that_adds_its_own_bos_scores_the_same_through_the_server(tmp_path, mode, monkeypatch):
    """Llama's tokenizer adds ``<s>`` itself: the prompt is the bare statement and the server adds the BOS."""
    from _tiny_causal import save_tiny_llama

    folder = save_tiny_llama(tmp_path / "llama")
    monkeypatch.setenv("PROBEKIT_OPENAI_TOKENIZER", str(folder))
    server = Served(Engine(folder), mode)
    try:
        remote, local = models.load(server.model_id), models.load(str(folder))
        assert remote.bos_text == ""
        ds = load_dataset("demo")
        q = ds.queries[0]
        cands = ds.candidates("relation", q.relation)
        a, b = (get_probe("likelihood").rank(m, [q], cands, k=len(cands))[0] for m in (remote, local))
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-4)
    finally:
        server.close()


def test_the_api_key_is_sent_and_never_recorded(served, monkeypatch):
    monkeypatch.setenv("PROBEKIT_OPENAI_API_KEY", "sk-secret")
    model = models.load(served.model_id)
    assert served.auth == "Bearer sk-secret"
    assert "sk-secret" not in json.dumps(model.describe(), default=str) + model.revision + model.source


def test_the_revision_is_stable_across_loads_and_follows_the_weights(served, engine, tmp_path):
    a, b = models.load(served.model_id), models.load(served.model_id)
    assert a.revision == b.revision and a.source == served.model_id.replace("/v1#", "/v1#")
    other = Served(Engine(save_tiny_gpt2(tmp_path / "other", seed=1)))
    try:
        assert models.load(other.model_id).revision.split("-")[1] != a.revision.split("-")[1]
    finally:
        other.close()


# ---------------------------------------------------------------- the canary refuses a broken server
@pytest.mark.parametrize("mode, says", [
    ("generated_only", "returns log-probs of generated tokens only"),
    ("no_logprobs", "returns no log-probs"),
    ("null", "gives no log-prob for token 2"),
    ("constant", "every prompt token the same log-prob"),
    ("extra_token", "disagree on the statement's tokens"),
    ("chat_only", "has no /completions endpoint"),
])
def test_the_canary_refuses_a_broken_server_in_one_line(served, tmp_path, mode, says):
    served.mode = mode
    with pytest.raises(ProbekitError, match=says) as e:
        models.load(served.model_id)
    assert "\n" not in str(e.value)


def test_the_cli_refuses_a_broken_server_with_rc_2_and_stores_nothing(served, tmp_path, monkeypatch, capsys):
    db = tmp_path / "runs.duckdb"
    monkeypatch.setenv("PROBEKIT_DB", str(db))
    served.mode = "generated_only"
    code = cli.main(["bench", "--model", served.model_id, "--probe", "likelihood", "--dataset", "demo", "--save",
                     "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().count("\n") == 0 and "generated tokens only" in err, err
    assert not db.exists() or not _stored_runs(db)
    for bad, says in ((served.model_id.replace(f"#{NAME}", "#other"), "does not serve a model named 'other'; it "
                       "serves 'tiny'"), ("openai:http://127.0.0.1:9/v1#m", "cannot reach")):
        code = cli.main(["probe", "--model", bad, "--probe", "likelihood", "--dataset", "demo", "--query-id",
                         "may_treat:0001"])
        err = capsys.readouterr().err
        assert code == 2 and says in err and err.strip().count("\n") == 0, err


def _stored_runs(db) -> list:
    from probekit.bench import results

    return results.store().fetch("SELECT run_id FROM runs")


# ---------------------------------------------------------------- retries, backoff, timeouts
def test_retries_back_off_on_429_and_503_then_succeed(served):
    served.fail = [429, 503]
    client = Client(served.url, api_key=None, timeout=5, retries=2, backoff=0.05)
    t0 = time.perf_counter()
    assert client.get("/models")["data"][0]["id"] == NAME  # GET is not failed by the fixture
    out = client.post("/completions", {"model": NAME, "prompt": "a b", "echo": True, "logprobs": 1,
                                       "max_tokens": 1})
    assert out["choices"] and client.retried == 2 and time.perf_counter() - t0 >= 0.05 + 0.1
    served.fail = [503, 503, 503]
    with pytest.raises(ServerError, match=r"answered 503 \(after 3 tries\): busy, try again"):
        client.post("/completions", {"model": NAME, "prompt": "a"})


def test_a_slow_server_times_out_in_one_line(served):
    served.delay = 1.0
    client = Client(served.url, api_key=None, timeout=0.3, retries=3, backoff=0.01)
    t0 = time.perf_counter()
    with pytest.raises(ServerError, match=r"gave no answer within 0\.3 s \(PROBEKIT_OPENAI_TIMEOUT_S\)"):
        client.post("/completions", {"model": NAME, "prompt": "a"})
    assert time.perf_counter() - t0 < 1.0  # not retried


# ---------------------------------------------------------------- stored runs: a stable key, resumed by relation
def test_a_stopped_run_through_a_server_resumes_from_the_store(served, tmp_path, monkeypatch):
    """The server fails after the first relation's statements: the run stops with one line, the finished relation
    stays stored; loaded again (same address, name and weights: the same settings key), the run scores only the
    relations left, and its results equal an uninterrupted run's."""
    from probekit.bench import runner

    monkeypatch.setenv("PROBEKIT_DB", str(tmp_path / "runs.duckdb"))
    ds = load_dataset("demo")
    ds = ds.filter(query_ids=[q.id for rel in ds.relations[:2] for q in ds.queries_for(rel)[:2]])
    first = ds.queries_for(ds.relations[0])
    n_first = sum(len(ds.candidates("relation", q.relation)) for q in first)
    model = models.load(served.model_id)
    assert model.describe()["backend"] == "openai"
    calls = {"n": 0}
    real = model.backend.echo

    def echo_then_fail(prompt):
        calls["n"] += 1
        if calls["n"] > n_first:
            raise ServerError("the server went away")
        return real(prompt)

    monkeypatch.setattr(model.backend, "echo", echo_then_fail)
    with pytest.raises(ServerError, match="went away"):
        runner.run_benchmark(model, ds, probe="likelihood", vocab="relation", k=5)
    monkeypatch.undo()
    monkeypatch.setenv("PROBEKIT_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.setenv("PROBEKIT_OPENAI_TOKENIZER", str(served.engine.tok.name_or_path))
    again = models.load(served.model_id)
    before = served.requests
    resumed = runner.run_benchmark(again, ds, probe="likelihood", vocab="relation", k=5)
    rest = sum(len(ds.candidates("relation", q.relation)) for q in ds.queries_for(ds.relations[1]))
    assert served.requests - before == rest  # only the second relation's statements
    whole = runner.run_benchmark(again, ds, probe="likelihood", vocab="relation", k=5, save=False)
    assert [r.gold_ranks for r in resumed.rankings()] == [r.gold_ranks for r in whole.rankings()]
    assert resumed.meta["status"] == "done"
