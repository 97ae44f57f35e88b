"""A model known from its local folder without loading it: enough to find a stored run, or to rank from cached vectors.

:class:`ModelIdentity` gives what a run's settings and the embedding cache's keys need (source, revision, spec,
layers, hidden size, device) from ``config.json`` and the folder's fingerprint, without importing transformers or
reading the weights. :class:`CachedModel` adds the mask token (from the tokenizer's files) and loads the real model
the first time anything else is asked of it, so a benchmark whose vectors are all in the cache ranks without ever
loading the weights (a warm ``probekit bench`` spent about a quarter of its time loading a model it never used),
while one missing vector loads the model and encodes exactly as before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import models
from ..errors import ProbekitError


class ModelIdentity:
    """What a run's settings need from a model (source, revision, spec, layers, device), read from a local
    model folder without importing transformers or loading weights: enough to find a stored run.

    Only for local folders (the embedded default, checkpoints); ``None`` from :meth:`of` otherwise.
    The revision is :func:`probekit.models.load`'s folder fingerprint, so keys are the same as a loaded model's.
    """

    def __init__(self, model_id, source, revision, spec, cfg, device, meta: dict | None = None):
        self.id, self.source, self.revision, self.spec, self.device = model_id, source, revision, spec, device
        self.num_layers = int(cfg["num_hidden_layers"])
        self.hidden_size = int(cfg["hidden_size"])
        self.config = cfg
        self.meta = dict(meta or {})
        self.label = self.meta.get("label") or spec.label or model_id

    @classmethod
    def of(cls, model_id: str, device: str | None = None) -> ModelIdentity | None:
        try:
            source, spec, meta = models.resolve_model(str(model_id).strip())
            folder = Path(source)
            if not (folder / "config.json").is_file():
                return None
            cfg = json.loads((folder / "config.json").read_text())
            return cls(model_id, source, models.folder_fingerprint(folder), spec, cfg, models.device_name(device),
                       meta)
        except (OSError, ValueError, KeyError, TypeError, ProbekitError):
            return None  # anything unusual: the caller loads the model as usual

    def describe(self) -> dict:
        return {"model": self.id, "source": self.source, "revision": self.revision, "device": str(self.device),
                "layers": self.num_layers, "hidden": self.hidden_size}


def _token_of(value) -> str | None:
    """A special token as the tokenizer files write it: a string, or an AddedToken's ``{"content": ...}``."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str) and value["content"]:
        return value["content"]
    return None


def mask_token_of(folder: Path) -> str | None:
    """The mask token the folder's tokenizer files name (``special_tokens_map.json``, else ``tokenizer_config.json``),
    or None when neither names one (T5's sentinel, a causal LM's placeholder: the loaded model decides those)."""
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        try:
            found = _token_of(json.loads((folder / name).read_text()).get("mask_token"))
        except (OSError, ValueError, AttributeError):
            continue
        if found:
            return found
    return None


class _DeferredTokenizer:
    """The tokenizer of a :class:`CachedModel`, loaded with the model on first real use: ``probe.rank`` hands the
    tokenizer to its ranking checks, which only read it when a query excludes names."""

    def __init__(self, owner: CachedModel):
        self._owner = owner

    def __getattr__(self, name: str):
        return getattr(self._owner.loaded().tokenizer, name)

    def __call__(self, *args, **kwargs):
        return self._owner.loaded().tokenizer(*args, **kwargs)


class CachedModel(ModelIdentity):
    """A local encoder whose weights are loaded only when something needs them (an encoding pass).

    Serves the identity's fields, :attr:`mask_token` (from the tokenizer files) and ``is_causal`` / ``is_seq2seq``
    / ``has_mlm`` (False: :meth:`lazy` only wraps plain encoders); any other attribute loads the model once
    (``loader``, :func:`probekit.models.load` by default) and is read from it. Cache keys are the identity's, which
    are the loaded model's (same source, revision, hidden size and device)."""

    is_causal = False
    is_seq2seq = False

    def __init__(self, identity: ModelIdentity, mask_token: str, loader: Callable[[], Any]):
        super().__init__(identity.id, identity.source, identity.revision, identity.spec, identity.config,
                         identity.device, identity.meta)
        self.mask_token = mask_token
        self.tokenizer = _DeferredTokenizer(self)
        self._loader = loader
        self._model: Any = None
        self._lock = threading.Lock()

    @classmethod
    def lazy(cls, model_id: str, device: str | None = None, *, loader: Callable[[], Any] | None = None):
        """A :class:`CachedModel` for a local plain encoder (no MLM head, not seq2seq or causal, a mask token in
        its tokenizer files); otherwise the model loaded now, as :func:`probekit.models.load` gives it."""
        def load():
            return models.load(model_id, device=device)

        identity = ModelIdentity.of(model_id, device)
        if identity is None or identity.spec.has_mlm or identity.spec.seq2seq or identity.spec.causal:
            return (loader or load)()
        cfg = identity.config
        archs = cfg.get("architectures") or []
        if (not archs or cfg.get("is_encoder_decoder")
                or any(not a.endswith("Model") or a.endswith("LMHeadModel") for a in archs)):
            return (loader or load)()  # a head (MLM, causal, seq2seq) decides more than the identity knows
        mask = mask_token_of(Path(identity.source))
        if mask is None:
            return (loader or load)()
        return cls(identity, mask, loader or load)

    @property
    def has_mlm(self) -> bool:
        return False

    def describe(self) -> dict:
        """As the loaded model describes itself (a plain encoder: no MLM head, not seq2seq, not causal)."""
        return {**super().describe(), "mlm": False, "seq2seq": False, "causal": False}

    @property
    def is_loaded(self) -> bool:
        return self._model is not None

    def loaded(self):
        """The real model, loaded on the first call."""
        with self._lock:
            if self._model is None:
                self._model = self._loader()
            return self._model

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_model", "_loader", "_lock"):
            raise AttributeError(name)
        return getattr(self.loaded(), name)

    def release(self) -> None:
        """Drop the weights when they were loaded (:func:`probekit.models.release`)."""
        if self._model is not None:
            models.release(self._model)
