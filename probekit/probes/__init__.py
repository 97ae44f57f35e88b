"""Probing methods behind one interface; look them up by name in :data:`PROBES`.

>>> sorted(PROBES)
['generative', 'mask_average', 'mask_predict', 'retrieval']
"""

from __future__ import annotations

from ..errors import Registry
from .base import Option, Probe, ranking_from_scores
from .generative import PROBE as _generative
from .mask_average import PROBE as _mask_average
from .mask_predict import PROBE as _mask_predict
from .retrieval import PROBE as _retrieval

PROBES: Registry = Registry("probe")
for _p in (_retrieval, _mask_average, _mask_predict, _generative):
    PROBES[_p.name] = _p


def get_probe(name: str) -> Probe:
    """The probe called ``name``; unknown names fail with close matches and the list."""
    return PROBES.get_or_raise(name)


def probes_for(model) -> list[str]:
    """Probe names usable with ``model``: MLM probes only when it has an MLM head, seq2seq probes
    (``requires_seq2seq``) only for encoder-decoders (whose encoder also serves retrieval)."""
    is_s2s = bool(getattr(model, "is_seq2seq", False))
    return [n for n, p in PROBES.items()
            if (model.has_mlm or not p.requires_mlm) and (is_s2s or not getattr(p, "requires_seq2seq", False))]


__all__ = ["PROBES", "Option", "Probe", "get_probe", "probes_for", "ranking_from_scores"]
