"""Every metric a run reports, registered once: its column name, what it means, how one item scores from its gold
rank, and which depth it needs. Tables, commands, pages, stored runs and layer sweeps loop over :data:`METRICS`.

A metric here is a pure function of gold ranks. The counting convention (:data:`~probekit.metrics.accuracy.
COUNTINGS`: an item is a query, scored by its best gold, or each (S, R, O) triple, scored by its own gold) and the
average (macro over relations, micro over items) are applied the same way to every metric by
:func:`probekit.metrics.accuracy.metric_value`; a metric only says what one item with rank ``r`` scores.

Ranks are 1-based; a missing rank (no gold among the candidates, or none given) is NaN and scores 0.

- ``acc@k``: 1 when ``r <= k``. It needs ``k`` answers per query: above a method's depth (X-FACTR's code gives
  one answer) it is not defined, NaN, shown as "-".
- ``MRR`` (mean reciprocal rank, as LAMA reports it next to P@k): ``1 / r``. It is defined at any depth: a gold
  beyond the answers a method gives has no rank and scores 0, so a one-answer method's MRR equals its acc@1.

>>> [get_metric(name).score(np.array([1.0, 3.0, np.nan])).tolist() for name in ("acc@1", "acc@5", "MRR")]
[[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.3333333333333333, 0.0]]
>>> get_metric("acc@3").name, get_metric("acc@10").defined_at(1), get_metric("MRR").defined_at(1)
('acc@3', False, True)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import Registry, UnknownNameError, positive_int


@dataclass(frozen=True)
class Metric:
    """One registered metric: ``name`` is its column name everywhere (``acc@10``, ``MRR``); ``item_score`` maps
    ranks (n,) float, NaN = missing, to item scores (n,) in [0, 1]; ``depth`` is the answers per query it needs
    (None: any number)."""

    name: str
    description: str
    item_score: Callable[[np.ndarray], np.ndarray]
    depth: int | None = None

    def score(self, ranks) -> np.ndarray:
        """(n,) float item scores of ``ranks`` (None/NaN: no rank, scores 0)."""
        r = np.asarray([np.nan if x is None else x for x in ranks] if not isinstance(ranks, np.ndarray) else ranks,
                       dtype=float)
        out = np.asarray(self.item_score(r), dtype=float)
        return np.where(np.isnan(r), 0.0, out)

    def defined_at(self, depth: int | None) -> bool:
        """Whether a method giving ``depth`` answers per query (None: no limit) has this metric."""
        return depth is None or self.depth is None or self.depth <= depth


METRICS: Registry = Registry("metric")
"""Name -> :class:`Metric`, in the order tables show them."""


def acc_at(k: int) -> Metric:
    """acc@k: an item is a hit when its gold ranks within the top ``k``."""
    k = positive_int("k", k)
    return Metric(f"acc@{k}", f"share of items whose gold ranks within the top {k}",
                  lambda r: (r <= k).astype(float), depth=k)


def _reciprocal_rank(r: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / r


def register(metric: Metric) -> Metric:
    """Add ``metric`` to :data:`METRICS` (its name must be new)."""
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} is already registered")
    METRICS[metric.name] = metric
    return metric


def unregister(name: str) -> None:
    METRICS.pop(name, None)


for _k in (1, 5, 10):
    register(acc_at(_k))
register(Metric("MRR", "mean reciprocal rank of the gold (0 when it is not ranked)", _reciprocal_rank))

_ACC = re.compile(r"acc@(\d+)")


def get_metric(name: str | Metric) -> Metric:
    """The registered metric ``name`` (case aside: ``mrr`` is ``MRR``); ``acc@k`` for any other positive ``k`` too.

    >>> get_metric("mrr").name
    'MRR'
    >>> get_metric("MMR")
    Traceback (most recent call last):
    ...
    probekit.errors.UnknownNameError: unknown metric 'MMR'; did you mean 'MRR'; available: MRR, acc@1, acc@10, acc@5
    """
    if isinstance(name, Metric):
        return name
    if name in METRICS:
        return METRICS[name]
    m = _ACC.fullmatch(str(name))
    if m and int(m.group(1)) > 0:
        return acc_at(int(m.group(1)))
    same = [n for n in METRICS if n.lower() == str(name).lower()]
    if same:
        return METRICS[same[0]]
    raise UnknownNameError("metric", str(name), sorted(METRICS))


def metric_names(names: Sequence[str] | None = None, *, depth: int | None = None) -> list[str]:
    """``names`` checked (default: every registered metric, in order), keeping those defined at ``depth`` when
    it is given (``bench --k 5`` reports no acc@10)."""
    chosen = [get_metric(n).name for n in (names if names is not None else list(METRICS))]
    return [n for n in chosen if depth is None or get_metric(n).defined_at(depth)]


def metric_from_params(params) -> str | None:
    """A shared link's metric: ``metric=NAME`` when registered, else an older link's ``k=1|5|10`` (its acc@k);
    None when the link names neither.

    >>> metric_from_params({"metric": "MRR"}), metric_from_params({"k": "5"}), metric_from_params({"k": "x"})
    ('MRR', 'acc@5', None)
    """
    name = params.get("metric")
    if name in METRICS:
        return str(name)
    k = params.get("k")
    return f"acc@{k}" if f"acc@{k}" in METRICS else None


def hit_depth(metric: str, *, default: int = 10) -> int:
    """The k of hit/miss views next to ``metric``: an acc@k's own k, else ``default`` (MRR has no top-k).

    >>> hit_depth("acc@5"), hit_depth("MRR")
    (5, 10)
    """
    m = get_metric(metric)
    return m.depth if m.depth is not None else default
