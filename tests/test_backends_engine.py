"""The likelihood probe through a real inference engine that no one here wrote: llama-cpp-python's OpenAI-compatible
server (llama.cpp), started on 127.0.0.1 serving the tests' tiny GPT-2 converted to GGUF in float32.

The claim: rankings through the server equal the in-process rankings of the same weights. The rule, stated once:
every token's log-prob through the server is within ``TOKEN_TOL`` of the in-process one; so a candidate's score (the
sum over its n scored tokens) is within ``n * TOKEN_TOL``, and any two candidates of a query whose in-process scores
differ by more than twice that bound (n: the query's longest statement) are in the same order through the server (a
pair closer than that is a tie within the tolerance and may swap).

Why not equal to 1e-6: llama.cpp computes in float32, but its CPU GELU reads a float16 table (``GGML_GELU_FP16`` in
ggml-cpu/vec.h: the input rounded to float16), which moves each log-prob by up to ~3e-3 on this model (2.9e-3 the
largest seen); the KV cache is float32 here (llama.cpp's default float16 adds as much again).

And the canary refuses that same real server when it is asked in a broken mode: the prompt not echoed (log-probs
of the generated token only), no log-probs, or a tokenizer that is not the served model's.

Marked ``heavy`` (it starts an engine); skipped when llama-cpp-python is not installed
(``pip install -r requirements-engines.txt``, which ``make test-heavy`` runs: it compiles llama.cpp).
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.heavy

from _tiny_causal import (  # noqa: E402
    save_tiny_gpt2,
    save_tiny_gpt2_gguf,
    save_tiny_llama,
    serve_gguf,
    skip_without_engine,
    stop,
)

skip_without_engine()

from probekit import models  # noqa: E402
from probekit.backends.openai import Completions, parse_echo  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402
from probekit.errors import ProbekitError  # noqa: E402
from probekit.probes import get_probe  # noqa: E402

TOKEN_TOL = 5e-3
"""Largest |served - in-process| of one token's log-prob (float32 GGUF weights; the rule: module docstring)."""
ALIAS = "tiny-gpt2"


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    folder = save_tiny_gpt2(tmp_path_factory.mktemp("engine") / "gpt2")
    gguf_file = save_tiny_gpt2_gguf(folder, folder.parent / "tiny-gpt2-f32.gguf")
    proc, url = serve_gguf(gguf_file, alias=ALIAS)
    yield folder, url
    stop(proc)


@pytest.fixture
def served_id(engine, monkeypatch):
    folder, url = engine
    monkeypatch.setenv("PROBEKIT_OPENAI_TOKENIZER", str(folder))
    return f"openai:{url}#{ALIAS}"


def assert_same_order(served: np.ndarray, local: np.ndarray, tol: float) -> None:
    """Every pair of candidates more than ``2 * tol`` apart in process is in the same order through the server."""
    far = np.abs(local[:, None] - local[None, :]) > 2 * tol
    agree = np.sign(served[:, None] - served[None, :]) == np.sign(local[:, None] - local[None, :])
    assert agree[far].all(), "a ranking through the server differs beyond ties within the tolerance"


def test_each_tokens_log_prob_through_llama_cpp_is_the_in_process_one(engine, served_id):
    from probekit.probes.likelihood import statement
    from probekit.probes.likelihood_scoring import causal_logprobs, encode

    folder, _ = engine
    remote, local = models.load(served_id), models.load(str(folder))
    ds = load_dataset("demo")
    texts = [statement(q, n)[0] for q in ds.queries[::10] for n in ds.candidates("relation", q.relation).names[:5]]
    enc = encode(local, texts, [(0, 0)] * len(texts), "statement")
    ours = causal_logprobs(local.causal, enc, batch_size=16)
    theirs = remote.token_logprobs(texts, [e.ids for e in enc])
    for a, b in zip(ours, theirs):
        assert np.isnan(a).tolist() == np.isnan(b).tolist()  # the same tokens scored (all but the first)
        np.testing.assert_allclose(b, a, atol=TOKEN_TOL)


def test_rankings_through_llama_cpp_equal_the_in_process_ones(engine, served_id):
    folder, _ = engine
    remote = models.load(served_id)
    local = models.load(str(folder))
    assert remote.meta["backend"] == "openai" and remote.meta["served_model"] == ALIAS
    assert remote.meta["canary"].startswith("without the first token")  # llama-cpp-python 0.3's echo
    ds = load_dataset("demo")
    probe = get_probe("likelihood")
    for span in ("statement", "answer"):
        for q in ds.queries[::4][:30]:
            cands = ds.candidates("relation", q.relation)
            a = probe.rank(remote, [q], cands, k=len(cands), span=span)[0]
            b = probe.rank(local, [q], cands, k=len(cands), span=span)[0]
            sa = np.array(a.scores)[np.argsort(a.ids)]
            sb = np.array(b.scores)[np.argsort(b.ids)]
            longest = max(len(local.tokenizer(statement_of(q, n))["input_ids"]) for n in cands.names)
            tol = TOKEN_TOL * longest
            assert np.abs(sa - sb).max() <= tol
            assert_same_order(sa, sb, tol)


def statement_of(q, name: str) -> str:
    from probekit.probes.likelihood import statement

    return statement(q, name)[0]


def test_the_canary_refuses_the_real_server_asked_in_a_broken_mode(engine, served_id, monkeypatch):
    def echo_off(self, prompt):  # the prompt not echoed: log-probs of the generated token only
        return parse_echo(self._post({"prompt": prompt, "echo": False, "logprobs": 1, "max_tokens": 1}), self.where)

    def no_logprobs(self, prompt):
        return parse_echo(self._post({"prompt": prompt, "echo": True, "max_tokens": 1}), self.where)

    for broken, says in ((echo_off, "generated tokens only"), (no_logprobs, "returns no log-probs")):
        with monkeypatch.context() as m:
            m.setattr(Completions, "echo", broken)
            with pytest.raises(ProbekitError, match=says) as e:
                models.load(served_id)
            assert "\n" not in str(e.value)
    assert models.load(served_id).meta["backend"] == "openai"  # asked properly, the same server passes


def test_the_canary_refuses_a_tokenizer_that_is_not_the_served_models(engine, tmp_path, monkeypatch):
    _, url = engine
    monkeypatch.setenv("PROBEKIT_OPENAI_TOKENIZER", str(save_tiny_llama(tmp_path / "llama")))
    with pytest.raises(ProbekitError, match="disagree on the statement's tokens|splits .* differently"):
        models.load(f"openai:{url}#{ALIAS}")
    monkeypatch.delenv("PROBEKIT_OPENAI_TOKENIZER")
    with pytest.raises(ProbekitError, match="does not serve a model named 'nope'; it serves 'tiny-gpt2'"):
        models.load(f"openai:{url}#nope")
