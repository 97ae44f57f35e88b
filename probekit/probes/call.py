"""What one :meth:`~probekit.probes.Probe.rank` call hands a probe, and what a probe may hand back besides its
rankings: plain data, shared by the probe interface and the ranking helpers."""

from __future__ import annotations

from dataclasses import dataclass

from ..jobs import Progress  # progress(done, total, stage): probes report each stage (encoding, search, scoring)
from ..ranking import NOTHING_EXCLUDED, Excluded

__all__ = ["NOTHING_EXCLUDED", "Call", "Excluded", "Explanation"]


@dataclass(frozen=True)
class Call:
    """Everything one :meth:`Probe.rank` call asks of a probe beyond the probe's own options.

    ``excluded`` holds one :class:`Excluded` per query (aligned with the queries); ``share_layers`` are layers an
    encoding pass should also compute and cache (a grid's sibling cells: a hint, probes that encode no hidden
    layer have nothing to share)."""

    k: int
    excluded: tuple[Excluded, ...]
    progress: Progress | None = None
    share_layers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Explanation:
    """How a probe reached one query's ranking, as tables any page or command can show without knowing the probe.

    ``views`` maps a label (e.g. a number of masks) to table rows (column -> value); ``default`` is the label
    shown first; ``choose`` names what the labels are."""

    title: str
    views: dict[str, list[dict]]
    default: str
    choose: str = ""
    help: str = ""
    caption: str = ""
