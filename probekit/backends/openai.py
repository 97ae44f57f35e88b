"""Prompt log-probabilities from an OpenAI-compatible ``/v1/completions`` endpoint (llama-cpp-python's server, vLLM,
...), for the likelihood probe.

A statement is scored by asking the server to complete it with ``echo: true``, ``logprobs: 1``, ``max_tokens: 1``
and ``temperature: 0``: the answer then lists, for every prompt token, the log-probability the model gave it
(``choices[0].logprobs.token_logprobs``, the first entry null: nothing predicts it), followed by the one generated
token's (``usage.completion_tokens`` says how many to drop). ``max_tokens: 0`` would spare that token, but
llama-cpp-python reads 0 as "no limit".

The prompt is the statement's text, preceded by the tokenizer's BOS text when probekit puts a BOS first itself
(GPT-2's tokenizer adds none; the in-process scorer prepends it): so the server reads the tokens the in-process
scorer reads. Servers differ in what they echo back:

- the BOS too, its entry null (vLLM): every token after the BOS has its log-prob;
- everything but a leading BOS, and the first entry then null (llama-cpp-python 0.3): the statement's first token
  has none. Its log-prob given the BOS alone is asked once per distinct first token by a second kind of request:
  the BOS as the prompt, the token forced as the one generated (``logit_bias`` +100) and its log-prob read back.
  That is only sound when the server reports a forced token's log-prob from the model's own distribution (before
  the bias): the canary checks it on a token whose echoed log-prob is known, and refuses the server otherwise.

Each answer is checked against the local tokenisation: the server must count as many prompt tokens
(``usage.prompt_tokens``) as the tokenizer, or the two disagree on what is scored and the run stops with both
counts. :func:`canary` checks much more before any run (:mod:`probekit.backends`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..errors import ProbekitError
from .http import Client, ServerError

FORCE_BIAS = 100.0
"""The ``logit_bias`` that makes the wanted token the one generated (temperature 0)."""


class BackendRefused(ProbekitError):
    """The canary found that a server's prompt log-probs cannot be trusted; the message says why."""


@dataclass(frozen=True)
class Echo:
    """One prompt as the server scored it: its echoed tokens' text and log-probs (None where it gave none), and its
    count of prompt tokens (None when it reports no usage)."""

    tokens: tuple[str, ...]
    logprobs: tuple[float | None, ...]
    prompt_tokens: int | None


def parse_echo(answer: dict, where: str) -> Echo:
    """The echoed prompt of a ``/completions`` answer (the generated tokens dropped), refusing an answer with no
    log-probs or no usage to tell the prompt's entries from the generated ones."""
    try:
        choice = answer["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise ServerError(f"{where} answered without choices: not an OpenAI-compatible completion") from None
    lp = choice.get("logprobs")
    if not isinstance(lp, dict) or not isinstance(lp.get("token_logprobs"), list):
        raise BackendRefused(f"{where} returns no log-probs (choices[0].logprobs is {lp!r:.40}): the likelihood "
                             "probe needs the prompt's log-probs (echo with logprobs)")
    values, tokens = lp["token_logprobs"], lp.get("tokens") or [""] * len(lp["token_logprobs"])
    usage = answer.get("usage") or {}
    generated = usage.get("completion_tokens")
    if not isinstance(generated, int):
        raise BackendRefused(f"{where} reports no usage.completion_tokens: the prompt's log-probs cannot be told "
                             "from the generated token's")
    n = len(values) - generated
    prompt = usage.get("prompt_tokens")
    return Echo(tuple(str(t) for t in tokens[:max(n, 0)]),
                tuple(None if v is None else float(v) for v in values[:max(n, 0)]),
                prompt if isinstance(prompt, int) else None)


def align(echo: Echo, n_ids: int, where: str) -> tuple[list[float], bool]:
    """The echoed log-probs placed on the statement's ``n_ids`` local token positions (NaN at position 0 and where
    the server gave none), and whether the server left position 1 (the first token after a BOS) without one.

    The echoed entries are the last tokens of the server's prompt (a server may leave a leading BOS out); the
    server must count ``n_ids`` prompt tokens, and echo ``n_ids`` or ``n_ids - 1`` of them.

    >>> align(Echo(("a", "b", "c"), (None, -1.0, -2.0), 3), 3, "s")
    ([nan, -1.0, -2.0], False)
    >>> align(Echo(("b", "c"), (None, -2.0), 3), 3, "s")
    ([nan, nan, -2.0], True)
    """
    counted = echo.prompt_tokens if echo.prompt_tokens is not None else len(echo.logprobs)
    if counted != n_ids or not n_ids - 1 <= len(echo.logprobs) <= n_ids:
        shown = f"{counted} tokens" + (f" and echoes {len(echo.logprobs)}" if counted != len(echo.logprobs)
                                       else "")
        raise BackendRefused(f"{where}: the server reads {shown} where the tokenizer has {n_ids}: the two disagree "
                             "on the statement's tokens (wrong tokenizer, PROBEKIT_OPENAI_TOKENIZER, or a BOS added "
                             "twice or not at all)")
    out = [math.nan] * n_ids
    start = n_ids - len(echo.logprobs)
    for j, v in enumerate(echo.logprobs):
        if start + j > 0 and v is not None:
            out[start + j] = v
    return out, n_ids > 1 and math.isnan(out[1])


class Completions:
    """An OpenAI-compatible ``/completions`` endpoint serving ``model``, scored ``concurrency`` requests at a
    time."""

    def __init__(self, client: Client, model: str, *, concurrency: int):
        self.client, self.model, self.concurrency = client, model, concurrency
        self.tokens_scored = 0
        self.seconds = 0.0
        self._since: float | None = None
        self._forced: dict[tuple[str, int], float] = {}
        self._lock = threading.Lock()

    def speed(self) -> float:
        """Prompt tokens scored per second so far (the statements being scored now included)."""
        with self._lock:
            secs = self.seconds + (time.perf_counter() - self._since if self._since is not None else 0.0)
            return self.tokens_scored / secs if secs > 0 else 0.0

    @property
    def where(self) -> str:
        return f"{self.client.base_url}/completions ({self.model!r})"

    def _post(self, body: dict) -> dict:
        try:
            return self.client.post("/completions", {"model": self.model, "temperature": 0, **body})
        except ServerError as e:
            if e.status in (404, 405):
                raise ServerError(f"{self.client.base_url} has no /completions endpoint ({e}); the likelihood probe "
                                  "needs prompt log-probs, which chat-only APIs do not give", e.status) from None
            raise

    def echo(self, prompt: str) -> Echo:
        """The server's echo of ``prompt`` with each prompt token's log-prob."""
        answer = self._post({"prompt": prompt, "echo": True, "logprobs": 1, "max_tokens": 1})
        return parse_echo(answer, self.where)

    def forced(self, prefix: str, token_id: int, token_text: str | None = None) -> float:
        """log P(token | prefix) read from a generation forced to ``token_id`` (memoised per prefix and token);
        refused when the server generates another token or reports no log-prob."""
        key = (prefix, token_id)
        with self._lock:
            if key in self._forced:
                return self._forced[key]
        answer = self._post({"prompt": prefix, "echo": False, "logprobs": 1, "max_tokens": 1,
                             "logit_bias": {str(token_id): FORCE_BIAS}})
        try:
            lp = answer["choices"][0]["logprobs"]
            value, got = lp["token_logprobs"][0], (lp.get("tokens") or [None])[0]
        except (KeyError, IndexError, TypeError):
            raise BackendRefused(f"{self.where} gives no log-prob for a forced token: it cannot score a statement's "
                                 "first token (its echo leaves it out)") from None
        if value is None or (token_text is not None and got is not None and got != token_text):
            raise BackendRefused(f"{self.where} did not generate the forced token {token_text!r} (got {got!r}): "
                                 "it cannot score a statement's first token (its echo leaves it out)")
        with self._lock:
            self._forced[key] = float(value)
        return float(value)

    def scored(self, prompts: Sequence[str], n_ids: Sequence[int], *, bos_text: str, first_ids: Sequence[int],
               first_texts: Sequence[str], progress: Callable[[int], None] | None = None) -> list[list[float]]:
        """Per-position log-probs of each prompt (NaN at position 0), ``concurrency`` requests at a time, in order;
        a first token the echo leaves out is filled by :meth:`forced` after ``bos_text``."""
        t0 = time.perf_counter()
        with self._lock:
            self._since = t0
        out: list[list[float]] = [[] for _ in prompts]

        def one(i: int) -> None:
            values, first_missing = align(self.echo(prompts[i]), n_ids[i], self.where)
            if first_missing:
                values[1] = self.forced(bos_text, first_ids[i], first_texts[i])
            out[i] = values
            with self._lock:
                self.tokens_scored += n_ids[i]

        if self.concurrency == 1 or len(prompts) == 1:
            for i in range(len(prompts)):
                one(i)
                if progress:
                    progress(i + 1)
        else:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="probekit-serve") as pool:
                for done, _ in enumerate(pool.map(one, range(len(prompts))), 1):
                    if progress:
                        progress(done)
        with self._lock:
            self.seconds += time.perf_counter() - t0
            self._since = None
        return out
