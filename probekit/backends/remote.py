"""A served model as the probes see a loaded one, and the canary that decides whether its log-probs can be trusted.

:class:`RemoteModel` has what the likelihood probe and the run store read from a
:class:`~probekit.models.LoadedModel` (id, source, revision, tokenizer, device, ``is_causal``, ``describe``), a
local tokenizer, and its :attr:`~RemoteModel.backend`; it has no weights, so every probe but ``likelihood`` refuses
it as it refuses a decoder-only LM.

:func:`canary` runs before a served model is handed out: a server that silently scores something else would
otherwise report chance-level rankings as a finding. It needs no reference model, only invariants of correct prompt
log-probs (module docstring of :mod:`probekit.backends`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ProbekitError
from ..types import MASK
from .openai import BackendRefused, Completions, align

CANARY = ("Metformin might treat diabetes.", "The heart pumps blood through the body.",
          "Aspirin may prevent a stroke.", "Insulin lowers the level of sugar in the blood.")
"""Statements the canary scores: plain ASCII, so every byte-level and sentencepiece tokenizer agrees on the text of
their tokens."""
SAME_TOL = 1e-4
"""Largest difference between two echoes of one prompt (a batching engine's float noise) the canary accepts."""
FORCED_TOL = 1e-3
"""Largest difference (absolute, plus this much relative) between a token's echoed and forced log-prob."""
FINGERPRINT_DECIMALS = 2
"""The canary's log-probs rounded to this many decimals fingerprint the served weights (part of the revision):
coarse enough that float noise does not change it, fine enough that other weights do."""


class RemoteDevice:
    """Where a served model runs, as a run records it (``str``) and as precision rules read it (``type``)."""

    type = "remote"

    def __str__(self) -> str:
        return "remote"


@dataclass(eq=False)
class RemoteModel:
    """A model served by an engine (``openai:URL#NAME``), scored through :attr:`backend`."""

    id: str
    source: str
    revision: str
    tokenizer: Any
    backend: Completions
    spec: Any
    bos_text: str
    """Put before each statement's text: the BOS the in-process scorer adds itself (empty when the tokenizer adds
    its own, or has none)."""
    context: int
    meta: dict = field(default_factory=dict)
    device: RemoteDevice = field(default_factory=RemoteDevice)
    companions: dict = field(default_factory=dict, repr=False)
    companion_loader: Callable[..., Any] | None = field(default=None, repr=False)
    encoder: Any = None
    mlm: Any = None
    seq2seq: Any = None
    causal: Any = None
    num_layers: int = 0
    hidden_size: int = 0

    @property
    def is_causal(self) -> bool:
        """Scored like a causal LM (the chain rule), and refused like one by probes that need an encoder."""
        return True

    @property
    def has_mlm(self) -> bool:
        return False

    @property
    def is_seq2seq(self) -> bool:
        return False

    @property
    def mask_token(self) -> str:
        return MASK

    @property
    def label(self) -> str:
        return f"{self.backend.model} (served)"

    def companion(self, model_id: str):
        """Another model a probe of this one needs (the likelihood probe's retrieval first stage), loaded locally
        and held by this one (released with it)."""
        if self.companion_loader is None:
            raise ProbekitError(f"served model {self.id!r} cannot load a companion model here")
        held = self.companions.get(model_id)
        if held is None:
            self.companions.clear()
            held = self.companions[model_id] = self.companion_loader(model_id)
        return held

    def in_memory(self) -> list:
        return [self, *self.companions.values()]

    def describe(self) -> dict:
        return {"model": self.id, "source": self.source, "revision": self.revision, "device": str(self.device),
                "causal": True, **{k: v for k, v in self.meta.items() if not k.startswith("_")}}

    def prompt(self, text: str) -> str:
        return self.bos_text + text

    def token_logprobs(self, texts: Sequence[str], ids: Sequence[Sequence[int]],
                       progress: Callable[[int], None] | None = None) -> list[list[float]]:
        """Each statement's per-token log-probs (NaN at position 0), its tokens ``ids`` as the tokenizer gave them
        (the server must agree on their number)."""
        firsts = [row[1] if len(row) > 1 else -1 for row in ids]
        return self.backend.scored([self.prompt(t) for t in texts], [len(r) for r in ids], bos_text=self.bos_text,
                                   first_ids=firsts, first_texts=[self.piece(i) for i in firsts], progress=progress)

    def piece(self, token_id: int) -> str:
        """The text of one token, as a server prints it."""
        return self.tokenizer.decode([token_id]) if token_id >= 0 else ""

    def ids(self, text: str) -> list[int]:
        """The tokens the in-process scorer reads for ``text``: the tokenizer's, after the BOS it adds itself."""
        ids = list(self.tokenizer(text, add_special_tokens=True)["input_ids"])
        bos = getattr(self.tokenizer, "bos_token_id", None)
        if self.bos_text and (not ids or ids[0] != bos):
            ids = [bos, *ids]
        return ids


def bos_to_add(tokenizer) -> str:
    """The BOS text to put before a statement: the tokenizer's BOS when it does not add it itself (GPT-2), as the
    in-process causal scorer does (:func:`probekit.probes.likelihood_scoring.encode`)."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None or not tokenizer.bos_token:
        return ""
    first = tokenizer("a", add_special_tokens=True)["input_ids"]
    return "" if first and first[0] == bos else str(tokenizer.bos_token)


def canary(model: RemoteModel) -> dict:
    """Refuse (:class:`~probekit.backends.openai.BackendRefused`, one line) a server whose prompt log-probs are
    missing, cover generated tokens only, disagree with the tokenizer on a statement's tokens, are not log-probs
    (not finite, above 0), are constant, change between two identical requests, or (when its echo leaves a
    statement's first token out) whose forced-token log-probs disagree with its echo. Returns what it learnt: the
    echo layout and a fingerprint of the served weights."""
    backend, where = model.backend, model.backend.where
    rows, first_missing = [], False
    for text in CANARY:
        ids = model.ids(text)
        echo = backend.echo(model.prompt(text))
        if not echo.logprobs:
            raise BackendRefused(f"{where} echoes none of the {len(ids)} prompt tokens: it returns log-probs of "
                                 "generated tokens only (no echo of the prompt), which score at chance")
        values, missing = align(echo, len(ids), where)
        first_missing |= missing
        for j, (tok, t_id) in enumerate(zip(echo.tokens, ids[len(ids) - len(echo.tokens):])):
            pos = len(ids) - len(echo.tokens) + j
            if pos > 0 and tok != model.piece(t_id):
                raise BackendRefused(f"{where} splits {text!r} differently from the tokenizer: token {pos} is "
                                     f"{tok!r} there, {model.piece(t_id)!r} here (wrong tokenizer? set "
                                     "PROBEKIT_OPENAI_TOKENIZER to the served model's)")
        gaps = [p for p in range(2 if missing else 1, len(ids)) if math.isnan(values[p])]
        if gaps:
            raise BackendRefused(f"{where} gives no log-prob for token {gaps[0]} of {text!r} (null prompt "
                                 "log-probs)")
        bad = [v for v in values if not math.isnan(v) and not (math.isfinite(v) and v <= 1e-6)]
        if bad:
            raise BackendRefused(f"{where} returns {bad[0]!r} as a log-prob of {text!r}: not a log-probability "
                                 "(finite, at most 0)")
        rows.append((text, ids, values))
    flat = [v for _, _, values in rows for v in values if not math.isnan(v)]
    if max(flat) - min(flat) < 1e-9:
        raise BackendRefused(f"{where} gives every prompt token the same log-prob ({flat[0]:g}): constant, not the "
                             "model's")
    text, ids, values = rows[0]
    again, _ = align(backend.echo(model.prompt(text)), len(ids), where)
    drift = max((abs(a - b) for a, b in zip(values, again) if not (math.isnan(a) and math.isnan(b))),
                default=0.0)
    if drift > SAME_TOL or any(math.isnan(a) != math.isnan(b) for a, b in zip(values, again)):
        raise BackendRefused(f"{where} scores {text!r} differently twice in a row (by {drift:.3g}): not "
                             "deterministic at temperature 0")
    if first_missing:
        _check_forced(model, rows)
    digest = hashlib.sha1(json.dumps([[round(v, FINGERPRINT_DECIMALS) for v in values if not math.isnan(v)]
                                      for _, _, values in rows]).encode()).hexdigest()[:12]
    return {"echo": "without the first token (forced-token requests fill it)" if first_missing else "every token",
            "weights_fingerprint": digest}


def _check_forced(model: RemoteModel, rows) -> None:
    """A token's log-prob read from a forced generation must equal its echoed one (the server reports the model's
    own distribution, not the biased one), on a canary statement whose two first tokens tokenise alone as they do
    in the statement."""
    for _, ids, values in rows:
        if len(ids) < 3:
            continue
        prefix = model.tokenizer.decode(ids[:2], skip_special_tokens=True)
        if model.ids(prefix) != ids[:2]:
            continue
        forced = model.backend.forced(model.prompt(prefix), ids[2], model.piece(ids[2]))
        if abs(forced - values[2]) > FORCED_TOL * (1 + abs(values[2])):
            raise BackendRefused(f"{model.backend.where} leaves a statement's first token out of its echo, and its "
                                 f"forced-token log-prob ({forced:.4f}) differs from the echoed one ({values[2]:.4f})"
                                 f" for the same token: it cannot score a statement's first token")
        return
    raise BackendRefused(f"{model.backend.where} leaves a statement's first token out of its echo, and no canary "
                         "statement could check its forced-token log-probs")
