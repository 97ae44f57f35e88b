"""One loader per kind of checkpoint, behind :data:`LOADERS`: what :func:`probekit.models.load` does once it knows
which kind a model is.

A probe needs different handles from different checkpoints: the masked-LM head of a BERT, the whole
encoder-decoder of a T5 or BART, the LM head of a decoder-only model, or only the bare encoder of a sentence
encoder (the embedded default). :func:`model_kind` reads the checkpoint's config and the caller's wish for an MLM
head and names the kind (refusing a combination that cannot work); each loader builds that kind's :class:`Weights`.
A new kind is one loader and one entry in :data:`LOADERS`; the contract test loads a tiny model of every kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .errors import ModelLoadError
from .lazy import lazy_module
from .model_memory import _causal_kwargs, count_params, memory_needed
from .model_registry import ModelSpec

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

if TYPE_CHECKING:
    from transformers import PretrainedConfig, PreTrainedModel


@dataclass(frozen=True)
class LoadRequest:
    """What every loader reads: where the weights are and how to open them."""

    model_id: str
    source: str
    local_only: bool
    device: torch.device
    dtype: str
    """The weights' precision name (``float32`` unless the causal precision rule chose another)."""
    mlm: bool | None
    """The caller's wish: ``None`` loads an MLM head when the weights contain a trained one, ``True`` requires it."""


@dataclass
class Weights:
    """The handles one loader produced; ``encoder`` is always set (shared with the head model when there is one)."""

    encoder: PreTrainedModel
    mlm: PreTrainedModel | None = None
    seq2seq: PreTrainedModel | None = None
    causal: PreTrainedModel | None = None

    @property
    def root(self) -> PreTrainedModel:
        """The outermost module: the one moved to the device and switched to eval mode."""
        return next(m for m in (self.seq2seq, self.causal, self.mlm, self.encoder) if m is not None)


def is_causal_arch(cfg: PretrainedConfig, spec: ModelSpec) -> bool:
    """A decoder-only LM checkpoint: its architecture is ``...ForCausalLM`` or ``...LMHeadModel`` (GPT-2), or the
    registry says so."""
    archs = getattr(cfg, "architectures", None) or []
    return spec.causal or (not getattr(cfg, "is_encoder_decoder", False) and any(
        a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs))


def model_kind(cfg: PretrainedConfig, spec: ModelSpec, *, mlm: bool | None, model_id: str) -> str:
    """The :data:`LOADERS` key for this checkpoint and wish.

    The rule: an encoder-decoder config is ``seq2seq``; a decoder-only architecture is ``causal`` (with
    ``mlm=False``: its bare decoder stack, ``encoder``); otherwise ``masked-lm`` when an MLM head is asked for or
    the architecture names one (``...MaskedLM``, ``...ForPreTraining``), else ``encoder``. Asking a seq2seq or
    causal model for an MLM head is refused: neither has one.
    """
    if getattr(cfg, "is_encoder_decoder", False):
        if mlm:
            raise ModelLoadError(f"model {model_id!r} is an encoder-decoder (BART/T5 family) and has no MLM head; "
                                 "use the 'generative' probe with it")
        return "seq2seq"
    if is_causal_arch(cfg, spec):
        if mlm:
            raise ModelLoadError(f"model {model_id!r} is a causal (decoder-only) LM and has no MLM head; "
                                 "use the 'likelihood' probe with it")
        return "causal" if mlm is None else "encoder"
    archs = " ".join(getattr(cfg, "architectures", None) or [])
    wants_head = mlm if mlm is not None else ("MaskedLM" in archs or "ForPreTraining" in archs)
    return "masked-lm" if wants_head else "encoder"


def _load_seq2seq(req: LoadRequest) -> Weights:
    from transformers import AutoModelForSeq2SeqLM

    model = AutoModelForSeq2SeqLM.from_pretrained(req.source, local_files_only=req.local_only)
    return Weights(encoder=model.get_encoder(), seq2seq=model)


def _load_causal(req: LoadRequest) -> Weights:
    """The LM head model in ``req.dtype``; on CUDA a model too large for the asked GPU but not for all visible GPUs
    together is sharded across them (``device_map="auto"``: :func:`probekit.model_memory.placement`)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    need = None
    if req.device.type == "cuda" and torch.cuda.device_count() > 1:
        cfg = AutoConfig.from_pretrained(req.source, local_files_only=req.local_only)
        need = memory_needed(count_params(cfg), req.dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(req.source, local_files_only=req.local_only,
                                                     **_causal_kwargs(req.dtype, req.device, need))
    except torch.OutOfMemoryError:
        raise ModelLoadError(f"model {req.model_id!r} ran out of memory while loading in {req.dtype} on "
                             f"{req.device}; try a smaller --dtype or model") from None
    # base_model is typed as a bare Module; for a decoder-only LM it is its (pretrained) decoder stack
    return Weights(encoder=cast("PreTrainedModel", model.base_model), causal=model)


def _load_masked_lm(req: LoadRequest) -> Weights:
    """The MLM head with its encoder; a head the weights lack (randomly initialised by transformers) is no MLM:
    refused when ``mlm=True`` asked for it, otherwise the bare encoder is loaded instead."""
    from transformers import AutoModelForMaskedLM

    model, info = AutoModelForMaskedLM.from_pretrained(req.source, local_files_only=req.local_only,
                                                       output_loading_info=True)
    head_missing = [k for k in info.get("missing_keys", []) if "predictions" in k or "lm_head" in k]
    if not head_missing:
        return Weights(encoder=model.base_model, mlm=model)
    if req.mlm is True:
        raise ModelLoadError(f"model {req.model_id!r} has no trained MLM head (missing {head_missing[:2]})")
    return _load_encoder(req)


def _load_encoder(req: LoadRequest) -> Weights:
    from transformers import AutoModel

    return Weights(encoder=AutoModel.from_pretrained(req.source, local_files_only=req.local_only))


LOADERS: dict[str, Callable[[LoadRequest], Weights]] = {
    "seq2seq": _load_seq2seq,
    "causal": _load_causal,
    "masked-lm": _load_masked_lm,
    "encoder": _load_encoder,
}
"""Kind (:func:`model_kind`) → loader."""
