"""Metrics over rankings and runs: pure functions, tested against naive loops.

``accuracy`` (acc@k, macro/micro), ``ucm`` (rank change, UCM), ``compare`` (run tables and comparisons),
``agreement`` (expert ratings: Table 5, Krippendorff's alpha, kappa), ``concept`` (hits by CUI: the match rules).
"""

from __future__ import annotations

from .accuracy import (  # noqa: F401
    COUNTINGS,
    DEFAULT_COUNTING,
    DEFAULT_KS,
    acc_at_k,
    counted_hits,
    counting_label,
    counts_accuracy,
    depth_of,
    frame_accuracy,
    gold_rank_accuracy,
    hits,
    per_relation,
    rank_accuracy,
    rank_summary,
    relation_accuracy,
    summary,
)
from .ucm import (  # noqa: F401
    UCM_KEYS,
    rank_changes,
    ucm,
    ucm_k,
    ucm_m,
)
