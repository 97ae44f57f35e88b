"""How much memory a (large) language model needs and in which precision it loads: the checks ``models.load`` makes
before loading a causal LM, so a model that will not fit is refused in one line instead of running out of memory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import ModelLoadError
from .lazy import lazy_module

if TYPE_CHECKING:
    import torch
else:
    torch = lazy_module("torch")  # imported on first use (probekit.lazy)

DTYPES = ("float32", "float16", "bfloat16", "int8", "int4")
"""Weight precisions :func:`load` takes for a causal LM (``int8``/``int4`` need ``bitsandbytes`` and CUDA)."""
DTYPE_ENV = "PROBEKIT_DTYPE"
"""The variable naming the precision of causal LMs when ``load`` is given none (every command and page loads
through ``load``); read by :func:`probekit.config.causal_dtype`."""
_BYTES_PER_PARAM = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "int8": 1.0, "int4": 0.5}
MEMORY_OVERHEAD = 1.2
"""Weights times this: room for activations, the KV cache and the allocator (a rule of thumb, not a measurement)."""


def count_params(cfg, spec=None) -> float:
    """Parameters of a model (a count): the registry's size when it has one, else an estimate from the config
    (embeddings + 12 h^2 per layer, the transformer's attention and feed-forward weights).

    >>> from types import SimpleNamespace as NS
    >>> round(count_params(NS(vocab_size=50257, hidden_size=768, num_hidden_layers=12)) / 1e6)
    124
    """
    params_b = getattr(spec, "params_b", None)  # a models.ModelSpec's size, in billions
    if params_b:
        return params_b * 1e9
    h = int(getattr(cfg, "hidden_size", 0) or 0)
    layers = int(getattr(cfg, "num_hidden_layers", 0) or 0)
    inter = int(getattr(cfg, "intermediate_size", 0) or 4 * h)
    vocab = int(getattr(cfg, "vocab_size", 0) or 0)
    return float(vocab * h + layers * (4 * h * h + 2 * h * inter))


def memory_needed(n_params: float, dtype: str) -> float:
    """Bytes a model of ``n_params`` parameters needs in ``dtype``, :data:`MEMORY_OVERHEAD` included.

    >>> round(memory_needed(7.24e9, "float16") / 1e9, 1)
    17.4
    """
    return n_params * _BYTES_PER_PARAM[dtype] * MEMORY_OVERHEAD


def memory_free(dev: torch.device) -> float | None:
    """Bytes free on ``dev`` (CUDA: the driver's count; CPU: MemAvailable of /proc/meminfo), None when unknown."""
    if dev.type == "cuda":
        return float(torch.cuda.mem_get_info(dev)[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def placement(need: float, free: Sequence[float], index: int) -> str | None:
    """Where a causal LM needing ``need`` bytes goes on CUDA, given each visible GPU's ``free`` bytes and the asked
    GPU's ``index``: ``"one"`` when that GPU holds it, ``"auto"`` when only all of them together do (its layers
    sharded across them by accelerate's ``device_map="auto"``, each GPU holding whole layers, so a little more than
    the sum is kept free: the largest share is never filled past its free memory), None when it does not fit.

    >>> placement(10e9, [12e9, 12e9], 0)
    'one'
    >>> placement(17.4e9, [12e9, 12e9], 0)
    'auto'
    >>> placement(30e9, [12e9, 12e9], 0) is None, placement(17.4e9, [12e9], 0) is None
    (True, True)
    """
    if need <= free[index]:
        return "one"
    if len(free) > 1 and need <= sum(free):
        return "auto"
    return None


def gpu_free() -> list[float]:
    """Free bytes of every visible CUDA GPU (the driver's count), in index order."""
    return [float(torch.cuda.mem_get_info(i)[0]) for i in range(torch.cuda.device_count())]


def check_memory(model_id: str, n_params: float, dtype: str, dev: torch.device, free: float | None = None) -> None:
    """Refuse, in one line, a model that will not fit in ``free`` bytes (default: :func:`memory_free`; on CUDA
    with several GPUs, all of them together: :func:`placement` shards it).

    >>> check_memory("m", 7.24e9, "float16", torch.device("cuda"), free=12e9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    probekit.errors.ModelLoadError: model 'm' needs ~17.4 GB in float16; this GPU has 12.0 GB free; try ...
    """
    need = memory_needed(n_params, dtype)
    if free is None and dev.type == "cuda" and torch.cuda.device_count() > 1:
        frees = gpu_free()
        if placement(need, frees, dev.index or 0) is not None:
            return
        free = sum(frees)
    free = memory_free(dev) if free is None else free
    if free is None or need <= free:
        return
    where = "this GPU" if dev.type == "cuda" else "this machine"
    smaller = [d for d in ("int8", "int4") if _BYTES_PER_PARAM[d] < _BYTES_PER_PARAM[dtype]] if dev.type == "cuda" \
        else [d for d in ("bfloat16",) if _BYTES_PER_PARAM[d] < _BYTES_PER_PARAM[dtype]]
    hint = f"try {DTYPE_ENV}={smaller[0]} or a smaller model" if smaller else "try a smaller model"
    raise ModelLoadError(f"model {model_id!r} needs ~{need / 1e9:.1f} GB in {dtype}; {where} has "
                         f"{free / 1e9:.1f} GB free; {hint}")


def _causal_dtype(dtype: str | None, dev: torch.device) -> str:
    """The precision a causal LM loads in: as asked, else half precision on CUDA (bf16 where supported), fp32 on CPU."""
    if dtype is not None:
        if dtype not in DTYPES:
            raise ModelLoadError(f"unknown dtype {dtype!r}; available: {', '.join(DTYPES)}")
        if dtype in ("int8", "int4") and dev.type != "cuda":
            raise ModelLoadError(f"dtype {dtype} needs a CUDA GPU (bitsandbytes); on CPU use float32 or bfloat16")
        return dtype
    if dev.type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float32"


def _causal_kwargs(dtype: str, dev: torch.device, need: float | None = None) -> dict:
    """from_pretrained arguments for a causal LM in ``dtype`` on ``dev``: weights straight onto the GPU
    (``device_map``, needs ``accelerate``; ``"auto"``, sharded across the visible GPUs, when ``need`` bytes fit only
    on all of them: :func:`placement`) and 8/4-bit quantisation through ``bitsandbytes``."""
    kw: dict = {"dtype": getattr(torch, dtype) if dtype not in ("int8", "int4") else torch.float16}
    if dev.type != "cuda":
        return kw
    try:
        import accelerate  # type: ignore[import-not-found]  # noqa: F401  # optional: device_map needs it
        kw["device_map"] = {"": str(dev)}
        if need is not None and torch.cuda.device_count() > 1 and placement(need, gpu_free(), dev.index or 0) == "auto":
            kw["device_map"] = "auto"
    except ImportError:
        pass
    if dtype in ("int8", "int4"):
        try:
            import bitsandbytes  # type: ignore[import-not-found]  # noqa: F401  # optional: 8/4-bit weights
            from transformers import BitsAndBytesConfig
        except ImportError:
            raise ModelLoadError(f"dtype {dtype} needs the package bitsandbytes: pip install bitsandbytes") from None
        kw["quantization_config"] = BitsAndBytesConfig(load_in_8bit=dtype == "int8", load_in_4bit=dtype == "int4")
    return kw
