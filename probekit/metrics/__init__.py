"""Metrics over rankings and runs: pure functions, tested against naive loops.

``registry`` (every reported metric: acc@k, MRR), ``accuracy`` (any metric over gold ranks, macro/micro, either
counting), ``ucm`` (rank change, UCM), ``compare`` (run tables and comparisons),
``agreement`` (expert ratings: Table 5, Krippendorff's alpha, kappa), ``concept`` (hits by CUI: the match rules).
"""

from __future__ import annotations

from .accuracy import (  # noqa: F401
    COUNTINGS,
    DEFAULT_COUNTING,
    Summary,
    acc_at_k,
    counted_hits,
    counting_label,
    counts_accuracy,
    depth_of,
    frame_accuracy,
    frame_metric,
    gold_rank_accuracy,
    hits,
    item_scores,
    metric_value,
    per_relation,
    rank_accuracy,
    rank_summary,
    summary,
)
from .registry import METRICS, Metric, get_metric, metric_names  # noqa: F401
from .ucm import (  # noqa: F401
    UCM_KEYS,
    rank_changes,
    ucm,
    ucm_k,
    ucm_m,
)
