"""``load()``: a model id turned into the handles every probe uses (tokenizer, encoder, MLM, seq2seq or causal LM),
one model in memory at a time (:func:`release` on switch).

Whoever holds a model (the app's one-entry cache, a grid's slot, a tour's loader, a job that loaded an id) releases
it with :func:`release` when it switches. A second model a probe needs beside it (the likelihood probe's retrieval
first stage) is the held model's :meth:`LoadedModel.companion`: kept by that model, not by a module, so the holder
accounts for it and the same :func:`release` frees it.

What an id means (registry, aliases, local folders, rewired checkpoints) is :mod:`probekit.model_registry`'s
business; the precision and memory checks are :mod:`probekit.model_memory`'s. Both are re-exported here, so
``models.REGISTRY`` and ``models.check_memory`` keep working for callers. Loading never downloads silently in
offline mode and fails with a message that says what was tried and how to fix it.
"""

from __future__ import annotations

import gc
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

from . import backends, config
from .errors import ModelLoadError
from .lazy import lazy_module
from .model_loaders import LOADERS, LoadRequest, is_causal_arch, model_kind
from .model_memory import (  # noqa: F401  # the precision and memory side of loading, re-exported
    DTYPE_ENV,
    DTYPES,
    MEMORY_OVERHEAD,
    _causal_dtype,
    check_memory,
    count_params,
    memory_free,
    memory_needed,
)
from .model_registry import (  # noqa: F401  # what an id means, re-exported
    ALIASES,
    CHECKPOINT_META,
    REGISTRY,
    T5_SENTINEL,
    ModelSpec,
    available_models,
    default_model_path,
    folder_fingerprint,
    list_checkpoints,
    resolve_model,
)
from .types import MASK

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA when present (unless ``prefer='cpu'`` or ``PROBEKIT_DEVICE=cpu``), else CPU."""
    if prefer == "cpu" or config.force_cpu():
        return torch.device("cpu")
    if prefer and prefer not in ("auto", "cpu") and not prefer.startswith("cuda"):
        raise ModelLoadError(f"unknown device {prefer!r}; use 'cpu', 'cuda', 'cuda:N' or leave it empty for automatic")
    if prefer and prefer.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ModelLoadError(f"device {prefer!r} was asked for but CUDA is not available here; use 'cpu'")
        try:
            return torch.device(prefer)
        except RuntimeError as e:
            raise ModelLoadError(f"invalid device {prefer!r}: {e}") from None
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class DeviceName(str):
    """A device as text (``"cpu"``, ``"cuda"``, ``"cuda:1"``), with ``.type`` as :class:`torch.device` has it: what
    a model's identity records without importing torch. torch takes it wherever it takes a device string."""

    @property
    def type(self) -> str:
        return self.split(":", 1)[0]


def gpu_possible() -> bool:
    """False only where torch can find no CUDA (or ROCm) device: macOS, or Linux without the device files the
    drivers create (``/dev/nvidia*``; Jetson's ``/dev/nvhost*`` and ``/dev/nvmap``; ROCm's ``/dev/kfd``; WSL's
    ``/dev/dxg``). Elsewhere torch has to be asked."""
    if sys.platform == "darwin":
        return False
    if not sys.platform.startswith("linux"):
        return True
    dev = Path("/dev")
    return (any(dev.glob("nvidia*")) or any(dev.glob("nvhost*"))
            or any((dev / name).exists() for name in ("nvmap", "kfd", "dxg")))


def device_name(prefer: str | None = None) -> DeviceName:
    """:func:`pick_device`'s choice as text, importing torch (1.3 s or more) only where a GPU may be present: a model
    identity read from a folder (:class:`probekit.bench.identity.ModelIdentity`) needs no more."""
    if prefer == "cpu" or config.force_cpu() or (prefer in (None, "", "auto") and not gpu_possible()):
        return DeviceName("cpu")
    return DeviceName(str(pick_device(prefer)))


@dataclass
class LoadedModel:
    """Everything a probe needs from one loaded PLM.

    ``encoder`` is the bare transformer (shared with ``mlm`` when the model has an MLM head), so a
    model is in memory once whichever probe runs. An encoder-decoder (BART, T5) is loaded whole as
    ``seq2seq``; ``encoder`` is then its encoder stack, and ``mlm`` is None.
    """

    id: str
    source: str
    revision: str
    tokenizer: PreTrainedTokenizerBase
    encoder: PreTrainedModel
    mlm: PreTrainedModel | None
    device: torch.device
    spec: ModelSpec
    meta: dict = field(default_factory=dict)
    seq2seq: PreTrainedModel | None = None
    causal: PreTrainedModel | None = None
    companions: dict[str, LoadedModel] = field(default_factory=dict, repr=False, compare=False)
    """Models loaded for this one (:meth:`companion`), by id; released with it."""

    def companion(self, model_id: str) -> LoadedModel:
        """Another model a probe of this one needs (the likelihood probe's retrieval first stage), held by this
        model: loaded once on its device, one at a time (asking for another releases the previous), and released
        with it by :func:`release`, so whoever holds this model holds the companion too and a switch frees both.
        This model's own id gives this model."""
        if model_id == self.id:
            return self
        with _COMPANIONS_LOCK:
            held = self.companions.get(model_id)
            if held is None:
                for old in self.companions.values():
                    release(old)
                self.companions.clear()
                held = self.companions[model_id] = load(model_id, device=str(self.device))
        return held

    def in_memory(self) -> list[LoadedModel]:
        """This model and its companions: every model its holder keeps in memory through it."""
        return [self, *self.companions.values()]

    @property
    def has_mlm(self) -> bool:
        return self.mlm is not None

    @property
    def is_seq2seq(self) -> bool:
        return self.seq2seq is not None

    @property
    def is_causal(self) -> bool:
        """A decoder-only LM loaded with its LM head (``causal``); ``encoder`` is then its decoder stack."""
        return self.causal is not None

    @property
    def num_layers(self) -> int:
        return int(self.encoder.config.num_hidden_layers)

    @property
    def hidden_size(self) -> int:
        return int(self.encoder.config.hidden_size)

    @property
    def mask_token(self) -> str:
        """The model's own mask: ``[MASK]``, BART's ``<mask>``, T5's first sentinel ``<extra_id_0>``."""
        mask = self.tokenizer.mask_token or (T5_SENTINEL if self.is_seq2seq else None)
        if mask is None and self.is_causal:  # no mask: prompts show probekit's placeholder, read as plain text
            return MASK
        if mask is None:  # load() refuses such a model
            raise ModelLoadError(f"model {self.id!r} has no mask token")
        return mask

    @property
    def label(self) -> str:
        return self.meta.get("label") or self.spec.label or self.id

    def describe(self) -> dict:
        return {"model": self.id, "source": self.source, "revision": self.revision, "device": str(self.device),
                "layers": self.num_layers, "hidden": self.hidden_size, "mlm": self.has_mlm,
                "seq2seq": self.is_seq2seq, "causal": self.is_causal}


def _hub_reachable(timeout: float = 2.0) -> bool:
    """One quick TCP probe of the hub, so an offline machine fails in seconds, not after retries."""
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def load(model_id: str = config.DEFAULT_MODEL, *, device: str | None = None, mlm: bool | None = None,
         dtype: str | None = None) -> LoadedModel:
    """Load tokenizer and weights once; the MLM head only when the checkpoint has one.

    ``mlm=None`` loads the head when the weights contain it, ``False`` never, ``True`` requires it.
    A decoder-only checkpoint (``...ForCausalLM``) loads with its LM head as ``causal``, in ``dtype``
    (default: :data:`DTYPE_ENV` when set, else half precision on CUDA, fp32 on CPU), after :func:`check_memory`
    says it fits. Which handles a checkpoint gets is :func:`~probekit.model_loaders.model_kind`'s rule; each
    kind's loader is in :data:`~probekit.model_loaders.LOADERS`.
    """
    if not model_id or not str(model_id).strip():
        raise ModelLoadError("no model given: pick one from the list or type a Hugging Face id / local folder")
    model_id = str(model_id).strip()
    if backends.is_backend_id(model_id):  # a served model (openai:URL#NAME): scored through its engine
        return cast("LoadedModel", backends.load(model_id, companion_loader=load))
    source, spec, meta = resolve_model(model_id)
    is_local = Path(source).is_dir()
    dev = pick_device(device)
    cfg, tok, local_only = _open(model_id, source, is_local=is_local)
    kind = model_kind(cfg, spec, mlm=mlm, model_id=model_id)
    want_dtype = "float32"
    if kind == "causal":
        want_dtype = _causal_dtype(dtype or config.causal_dtype(), dev)
        check_memory(model_id, count_params(cfg, spec), want_dtype, dev)
    request = LoadRequest(model_id=model_id, source=source, local_only=local_only, device=dev, dtype=want_dtype,
                          mlm=mlm)
    try:
        weights = LOADERS[kind](request)
    except ModelLoadError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"could not load the weights of {model_id!r} from {source!r}: "
                             f"{str(e).splitlines()[0][:300]}") from e
    is_s2s = weights.seq2seq is not None
    if tok.mask_token is None and not is_causal_arch(cfg, spec) and not (is_s2s and T5_SENTINEL in tok.get_vocab()):
        raise ModelLoadError(f"model {model_id!r} has no mask token; probekit probes need a masked-LM tokenizer "
                             f"(or an encoder-decoder with a mask token or {T5_SENTINEL})")
    root = weights.root
    if getattr(root, "hf_device_map", None) is None:
        root.to(dev)  # type: ignore[arg-type]  # (device_map already placed it); mypy reads transformers' @wraps'd .to without its self
    root.eval()
    revision = folder_fingerprint(Path(source)) if is_local else (getattr(cfg, "_commit_hash", None) or "unknown")
    return LoadedModel(id=model_id, source=source, revision=revision, tokenizer=tok, encoder=weights.encoder,
                       mlm=weights.mlm, device=dev, spec=spec, meta=meta, seq2seq=weights.seq2seq,
                       causal=weights.causal)


def _open(model_id: str, source: str, *, is_local: bool):
    """The checkpoint's config and tokenizer, and whether the weights come from local files only.

    Local files first; the hub only when the id is not a folder, offline mode is off and the hub answers (one
    quick probe, so an offline machine fails in seconds). The error says everything that was tried and the fix.
    """
    from transformers import AutoConfig, AutoTokenizer
    from transformers.utils import logging as hf_logging

    offline = config.hf_offline()
    tried = [f"local folder {source!r}" if is_local else f"the local Hugging Face cache for {source!r}"]
    if offline and not is_local:
        tried.append("not the Hugging Face hub (offline mode: PROBEKIT_OFFLINE / HF_HUB_OFFLINE is set)")
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    local_only = True
    try:
        try:
            cfg = AutoConfig.from_pretrained(source, local_files_only=True)
        except OSError:
            if is_local or offline:
                raise
            if not _hub_reachable():
                tried.append("the Hugging Face hub (not reachable: offline?)")
                raise
            tried.append("the Hugging Face hub")
            local_only = False
            cfg = AutoConfig.from_pretrained(source)
        tok = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError, KeyError) as e:
        if is_local:
            fix = ("Fix: give a folder saved with save_pretrained (config.json, tokenizer files and weights), "
                   "or a Hugging Face id; the embedded model 'default' always works.")
        else:
            fix = ("Fix: check the spelling; on a machine with internet, unset PROBEKIT_OFFLINE or download the "
                   "model (`hf download ID`) and pass its local folder; the embedded model 'default' "
                   "always works.")
        raise ModelLoadError(
            f"could not load model {model_id!r}: tried {', '.join(tried)}. {str(e).splitlines()[0][:200]} {fix}"
        ) from e
    return cfg, tok, local_only


_COMPANIONS_LOCK = threading.RLock()
"""Two threads asking a shared model (the app's) for a companion load it once (reentrant: asking for another
companion releases the previous one under it)."""


def release(model: LoadedModel | None) -> None:
    """Drop a model's weights, and its companions', and give GPU memory back (used when the app switches model)."""
    if model is None:
        return
    with _COMPANIONS_LOCK:
        companions = list(model.companions.values())
        model.companions.clear()
    for other in companions:
        release(other)
    model.encoder = None  # type: ignore[assignment]  # a released model is never used again: this drops the weights
    model.mlm = None
    model.seq2seq = None
    model.causal = None
    model.meta.pop("_int8_encoder", None)  # the fast-mode copy (probekit.encode)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
