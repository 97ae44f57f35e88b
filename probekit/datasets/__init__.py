"""Dataset loaders behind one registry: ``load_dataset(name, ...) -> Dataset``.

Names: ``demo`` (shipped in git), ``medlama`` (full/hard), ``biolama``, ``triples`` (a user file),
``freetext`` (template-free prompts: natural sentences with one ``[MASK]``, a user file).
"""

from __future__ import annotations

from pathlib import Path

from .. import config
from ..errors import ProbekitError, Registry
from ..memo import Memo
from . import biolama, freetext, medlama, triples
from .base import HARD_IN_FULL, SUBSETS, VOCABS, Dataset

LOADERS: Registry = Registry("dataset")
CACHE_SIZE = 8
_CACHE: Memo[tuple, Dataset] = Memo(max_entries=CACHE_SIZE)
"""Loaded datasets, the least recently used leaving first beyond :data:`CACHE_SIZE` (a long-lived server that
loads many user files no longer keeps each one for its whole life)."""
_DEFAULT_DIRS = {"demo": config.demo_dir, "medlama": config.medlama_dir, "biolama": config.biolama_dir}


@LOADERS.register("demo")
def _demo(path=None, *, which="full", **kw) -> Dataset:
    return medlama.load(path or config.demo_dir(), which=which, name="demo", **kw)


@LOADERS.register("medlama")
def _medlama(path=None, *, which="full", **kw) -> Dataset:
    return medlama.load(path or config.medlama_dir(), which=which, **kw)


@LOADERS.register("biolama")
def _biolama(path=None, **kw) -> Dataset:
    return biolama.load(path or config.biolama_dir(), **kw)


@LOADERS.register("triples")
def _triples(path=None, **kw) -> Dataset:
    if path is None:
        raise ProbekitError("dataset 'triples' needs a file: --data-dir FILE (CSV or JSONL)")
    return triples.load(path, **kw)


@LOADERS.register("freetext")
def _freetext(path=None, **kw) -> Dataset:
    if path is None:
        raise ProbekitError("dataset 'freetext' needs a file: --data-dir FILE (CSV or JSONL with prompt, object)")
    return freetext.load(path, **kw)


def load_dataset(name: str, *, path: str | Path | None = None, which: str = "full", use_cache: bool = True,
                 **options) -> Dataset:
    """Load (and memoise) a dataset; ``which`` selects MedLAMA's full or hard set."""
    loader = LOADERS.get_or_raise(name)
    if path is None and name in _DEFAULT_DIRS:  # resolve now: the memo key must follow PROBEKIT_* changes
        path = _DEFAULT_DIRS[name]()
    if name in ("demo", "medlama"):
        options["which"] = which
    key = (name, str(path), tuple(sorted((k, str(v)) for k, v in options.items())))
    hit = _CACHE.get(key) if use_cache else None
    if hit is not None:
        return hit
    ds = loader(path, **options)
    _CACHE.put(key, ds)
    return ds


def available_datasets() -> list[tuple[str, str]]:
    """(spec, label) for pickers; a spec is ``name`` or ``name:set``. Only what is present here."""
    out = [("demo", "Demo (shipped, illustrative)")]
    if (config.medlama_dir() / "2021AA").is_dir():
        out += [("medlama:full", "MedLAMA full (19 × 1000)"), ("medlama:hard", "MedLAMA hard")]
    if config.biolama_dir().exists():
        out.append(("biolama", "BioLAMA"))
    return out


def load_spec(spec: str, *, path: str | Path | None = None) -> Dataset:
    """Load ``name`` or ``name:set`` as listed by :func:`available_datasets`."""
    name, _, which = spec.partition(":")
    return load_dataset(name, path=path, which=which or "full")


__all__ = ["HARD_IN_FULL", "LOADERS", "SUBSETS", "VOCABS", "Dataset", "available_datasets", "load_dataset", "load_spec"]
