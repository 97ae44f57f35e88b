"""What decides a run's results: option resolution, argument checks, the settings dict and its key.

Runs with equal :func:`settings_of` are interchangeable, so the runner finds a stored run by
:func:`settings_key` instead of computing it again, whichever interface (app, CLI, sweep) started it.
"""

from __future__ import annotations

import functools
import hashlib
import json

from ..datasets import Dataset, hardness
from ..datasets.base import check_vocab, vocab_fingerprint
from ..encode import precision
from ..errors import ProbekitError, positive_int
from ..types import Query

MAX_K = 1000
KEY_EXCLUDED_OPTIONS = ("batch_size",)
"""Options that do not change results and so do not tell runs apart."""
KEY_OMITTED_DEFAULTS = {"exclude_subject": False, "reading": "probekit", "match": "string"}
"""Options added after runs were stored: left out of the key at these values (the behaviour runs stored
before they existed had), so those runs keep their keys and are still found."""
KEY_OMITTED_PROBE_DEFAULTS: dict[str, dict[str, object]] = {"mask_predict": {"preset": None},
                                                              "likelihood": {"preset": None, "capitalize": False,
                                                                             "pll": "original"}}
"""The same, for an option name another probe had from the start (retrieval's ``preset`` stays in its keys)."""


def get_probe(probe):
    """A probe object from a name or a probe."""
    from ..probes import get_probe as lookup

    return lookup(probe) if isinstance(probe, str) else probe


def resolve_options(model, probe, options: dict | None = None) -> dict:
    """Every option of ``probe`` with defaults filled in (pooling/layer resolved for ``model``)."""
    probe = get_probe(probe)
    opts = probe.checked_options(options)
    opts = probe.resolve(opts)  # a probe's own rules, e.g. retrieval's presets
    if "pooling" in opts and not opts["pooling"]:
        opts["pooling"] = model.spec.pooling
    if "layer" in opts and opts["layer"] in (None, -1, ""):
        opts["layer"] = model.num_layers
    if "layer" in opts:
        try:
            layer = int(opts["layer"])
        except (TypeError, ValueError):
            raise ProbekitError(f"layer must be an integer 0..{model.num_layers}, got {opts['layer']!r}") from None
        if not 0 <= layer <= model.num_layers:
            raise ProbekitError(f"layer {layer} out of range: {model.id} has layers 0..{model.num_layers}")
        opts["layer"] = layer
    return opts


def check_run_args(dataset, vocab, k) -> None:
    """Refuse a bad dataset, vocabulary or k before any work starts."""
    if not isinstance(dataset, Dataset):
        raise ProbekitError(f"expected a Dataset, got {type(dataset).__name__}")
    if not len(dataset):
        raise ProbekitError(f"dataset {dataset.name!r} has no queries")
    check_vocab_and_k(vocab, k)


def check_vocab_and_k(vocab, k) -> None:
    """The checks that need no dataset (the CLI makes them before loading anything)."""
    check_vocab(vocab)
    positive_int("k", k, maximum=MAX_K)


def dataset_spec(dataset: Dataset) -> str | None:
    """The sidebar spec (``demo``, ``medlama:hard``…) that reopens ``dataset``; None for uploads."""
    name, which = dataset.name, dataset.meta.get("set")
    if name.startswith("upload:"):
        return None
    if which and name.endswith(f"-{which}"):
        base = name[: -len(which) - 1]
        return base if (base == "demo" and which == "full") else f"{base}:{which}"
    return name


def settings_of(model, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                vocab: str = "heads+tails", k: int = 10) -> dict:
    """Everything that decides a run's results; runs with equal settings are interchangeable."""
    probe = get_probe(probe)
    check_run_args(dataset, vocab, k)
    opts = resolve_options(model, probe, options)
    omitted = {**KEY_OMITTED_DEFAULTS, **KEY_OMITTED_PROBE_DEFAULTS.get(probe.name, {})}
    kept = {k_: v for k_, v in sorted(opts.items())
            if k_ not in KEY_EXCLUDED_OPTIONS and not (k_ in omitted and v == omitted[k_])}
    return {
        "model_source": model.source, "model_revision": model.revision,
        "precision": precision(model, bool(opts.get("fast"))),
        "dataset": dataset.name, "dataset_version": dataset.version, "relations": dataset.relations,
        "n_queries": len(dataset), "probe": probe.name, "options": kept, "vocab": vocab, "k": int(k),
        **({"vocab_fingerprint": fp} if (fp := vocab_fingerprint(vocab)) else {}),
    }


def settings_key(settings: dict) -> str:
    """A stable hash of :func:`settings_of`."""
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:20]


def is_hard(q: Query) -> bool | None:
    """MedLAMA hardness of a query (None when undefined: no golds or no subject)."""
    return _hardness(q.subject, tuple(q.golds))


@functools.lru_cache(maxsize=65536)
def _hardness(subject: str, golds: tuple[str, ...]) -> bool | None:
    try:
        return hardness.is_hard(subject, list(golds))
    except ProbekitError:  # no golds or no subject (free queries): hardness undefined
        return None
