"""Dataset loaders behind one registry: ``load_dataset(name, ...) -> Dataset``.

Names (each a :class:`~probekit.datasets.formats.DatasetFormat` in :data:`FORMATS`, which every surface reads):
``demo`` (shipped in git), ``medlama`` (full/hard), ``biolama``, ``triples`` (a user file), ``freetext``
(template-free prompts: natural sentences with one ``[MASK]``, a user file), ``lama`` (LAMA's JSON lines, a user
file). A new one is a module with a ``FORMAT`` and a :func:`register` line below (docs/extending-datasets.md).
"""

from __future__ import annotations

from pathlib import Path

from .. import config
from ..errors import ProbekitError
from ..memo import Memo
from . import biolama, freetext, lama, medlama, triples
from .base import HARD_IN_FULL, SUBSETS, VOCABS, Dataset
from .formats import (
    AUTO,
    FORMATS,
    DatasetFormat,
    available_datasets,
    dataset_help,
    get_format,
    parse_upload,
    register,
    unregister,
)

LOADERS = FORMATS
"""The registry under its former name (it held loader functions; each entry's ``load`` is that function now)."""
CACHE_SIZE = 8
_CACHE: Memo[tuple, Dataset] = Memo(max_entries=CACHE_SIZE)
"""Loaded datasets, the least recently used leaving first beyond :data:`CACHE_SIZE` (a long-lived server that
loads many user files no longer keeps each one for its whole life)."""
_FILES = (".csv", ".jsonl", ".json", ".ndjson")


def _demo(path, **kw) -> Dataset:
    return medlama.load(path, name="demo", **kw)


for _fmt in (
    DatasetFormat("demo", "the shipped demo set, MedLAMA's layout (illustrative only)", _demo,
                  location=config.demo_dir, present=lambda _where: True, sets=medlama.SETS,
                  picks=(("demo", "Demo (shipped, illustrative)"),)),
    DatasetFormat("medlama", "MedLAMA (Meng et al. 2022), 19 UMLS relations", medlama.load,
                  location=config.medlama_dir, present=lambda where: (where / "2021AA").is_dir(), sets=medlama.SETS,
                  picks=(("medlama:full", "MedLAMA full (19 × 1000)"), ("medlama:hard", "MedLAMA hard"))),
    DatasetFormat("biolama", "BioLAMA (Sung et al. 2021) JSON lines and their manual.jsonl templates",
                  biolama.load, location=config.biolama_dir, picks=(("biolama", "BioLAMA"),)),
    DatasetFormat("triples", "your facts: subject, relation, object[, template with [X] and [Y]]", triples.load,
                  suffixes=_FILES, parse=triples.parse, file_hint="CSV or JSONL",
                  example="subject,relation,object,template\naspirin,may_treat,pain,[X] may treat [Y] .\n"
                          "aspirin,may_treat,fever,[X] may treat [Y] .\nmetformin,may_treat,diabetes,\n"),
    DatasetFormat("freetext", "template-free prompts: a sentence with one [MASK] and its object", freetext.load,
                  suffixes=_FILES, parse=freetext.parse, marks=("prompt",),
                  file_hint="CSV or JSONL with prompt, object",
                  example="prompt,object,relation\nAspirin is taken for [MASK].,pain,may_treat\n"
                          "Metformin lowers [MASK] in the blood.,glucose,\n"),
    lama.FORMAT,
):
    register(_fmt)


def load_dataset(name: str, *, path: str | Path | None = None, which: str = "full", use_cache: bool = True,
                 **options) -> Dataset:
    """Load (and memoise) a dataset; ``which`` selects the set of a dataset that has sets (MedLAMA's full or
    hard), and is ignored by the others."""
    fmt = get_format(name)
    if path is None and fmt.location is not None:  # resolve now: the memo key must follow PROBEKIT_* changes
        path = fmt.location()
    if path is None:
        raise ProbekitError(f"dataset {name!r} needs a file: --data-dir FILE ({fmt.file_hint})")
    if fmt.sets:
        options["which"] = which
    key = (name, str(path), tuple(sorted((k, str(v)) for k, v in options.items())))
    hit = _CACHE.get(key) if use_cache else None
    if hit is not None:
        return hit
    try:
        ds = fmt.load(path, **options)
    except OSError as e:  # a folder given for a file, a file it may not read: one line, never a traceback
        raise ProbekitError(f"dataset {name!r}: cannot read {path} ({e.strerror or type(e).__name__})") from None
    _CACHE.put(key, ds)
    return ds


def load_spec(spec: str, *, path: str | Path | None = None) -> Dataset:
    """Load ``name`` or ``name:set`` as listed by :func:`available_datasets`."""
    name, _, which = spec.partition(":")
    return load_dataset(name, path=path, which=which or "full")


__all__ = ["AUTO", "FORMATS", "HARD_IN_FULL", "LOADERS", "SUBSETS", "VOCABS", "Dataset", "DatasetFormat",
           "available_datasets", "dataset_help", "get_format", "load_dataset", "load_spec", "parse_upload", "register",
           "unregister"]
