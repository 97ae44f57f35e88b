"""Probing methods behind one interface; look them up by name in :data:`PROBES`.

A new probe is one module with a :class:`Probe` and one :func:`register` line below: its options become CLI
flags, page widgets and Grid entries, and the contract test over :data:`PROBES` checks it.

>>> get_probe("retrieval").name
'retrieval'
"""

from __future__ import annotations

from ..errors import ProbekitError, Registry
from ..ranking import NOTHING_EXCLUDED, Excluded, ranking_from_scores
from .base import COMMON_OPTIONS, Call, Explanation, Option, Probe, ProbeContractError
from .generative import PROBE as _generative
from .likelihood import PROBE as _likelihood
from .mask_average import PROBE as _mask_average
from .mask_predict import PROBE as _mask_predict
from .retrieval import PROBE as _retrieval


def _check_probe(name: str, probe) -> None:
    """The rules a registered probe obeys: a :class:`Probe` registered under its own name, option names that are
    identifiers, and an option name shared with another probe has the same value type there (one CLI flag and one
    page widget serve every probe taking it)."""
    if not isinstance(probe, Probe):
        raise ProbekitError(f"probe {name!r} must be a probekit.probes.Probe, got {type(probe).__name__}")
    if probe.name != name:
        raise ProbekitError(f"probe {probe.name!r} registered under another name, {name!r}")
    for o in probe.options:
        if not o.name.isidentifier():
            raise ProbekitError(f"option {o.name!r} of probe {name!r} is not an identifier (letters, digits, _)")
        for other in PROBES.values():
            if other.name == name:
                continue
            same = next((x for x in other.options if x.name == o.name), None)
            if same is not None and same.value_type is not o.value_type:
                raise ProbekitError(f"option {o.name!r} of probe {name!r} is a {o.value_type.__name__}, but "
                                    f"probe {other.name!r} has it as a {same.value_type.__name__}: rename one")


PROBES: Registry = Registry("probe")
PROBES.add_check(_check_probe)


def register(probe: Probe) -> Probe:
    """Add ``probe`` to :data:`PROBES` under its name (checked by every rule the registry's users add)."""
    PROBES[probe.name] = probe
    return probe


def unregister(name: str) -> None:
    """Remove a registered probe (tests and plugins that add one for a while)."""
    PROBES.pop(name, None)


for _p in (_retrieval, _mask_average, _mask_predict, _generative, _likelihood):
    register(_p)


ONE_QUERY_DEFAULTS = {"exclude_subject": True}
"""Where one query is probed (the Probe page, ``probekit probe``) its own subject, or a typed query's named
candidates, are left out unless the user keeps them: an untuned encoder returns "Metformin" for "Metformin might
treat [MASK]." A whole-dataset run keeps the papers' reference behaviour (:data:`~probekit.probes.base.
EXCLUDE_SUBJECT` off)."""


def get_probe(name: str) -> Probe:
    """The probe called ``name``; unknown names fail with close matches and the list."""
    return PROBES.get_or_raise(name)


def probes_for(model) -> list[str]:
    """Probe names usable with ``model`` (:meth:`Probe.usable_with`): MLM probes only when it has an MLM head,
    seq2seq probes only for encoder-decoders (whose encoder also serves retrieval)."""
    return [n for n, p in PROBES.items() if p.usable_with(model)]


__all__ = ["COMMON_OPTIONS", "NOTHING_EXCLUDED", "ONE_QUERY_DEFAULTS", "PROBES", "Call", "Excluded", "Explanation",
           "Option", "Probe", "ProbeContractError", "get_probe", "probes_for", "ranking_from_scores", "register",
           "unregister"]
