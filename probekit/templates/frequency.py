"""Prediction frequency (Shaier et al. §5.4): do models give the same few answers whatever the prompt?

"We calculate the number of times each entity appears in each model's top-10 predictions" (Figure 1:
the 15 most frequent entities, and "the percentage of unique entities it predicts over all prompts for
top 1, 5, and 10"). Here ``k`` (how deep a prediction list counts) and ``n`` (how many of the most
frequent objects) are parameters; k defaults to the paper's 10, n to 5.

Objects are counted by normalised name (:func:`probekit.types.normalize_name`: case and spacing
folded), both in the predictions and in the golds, so ``share`` and ``gold_share`` of a row count
the same object; the row shows its most frequent spelling among the predictions.

All functions are pure and take a run's results frame (``top_names`` and ``golds`` list columns, one
row per prompt), so they work on any stored run of any probe.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from ..errors import ProbekitError, positive_int
from ..types import normalize_name


def _check(frame: pd.DataFrame, k: int, *columns: str) -> None:
    positive_int("k", k)
    missing = [c for c in ("top_names", *columns) if c not in frame.columns]
    if missing:
        raise ProbekitError(f"results have no {missing[0]!r} column (expected a run's results frame)")
    if not len(frame):
        raise ProbekitError("no predictions: the run has no results")
    short = [i for i, names in enumerate(frame["top_names"]) if len(names) < k]
    if short:
        raise ProbekitError(f"the run stored only {len(frame['top_names'].iloc[short[0]])} predictions per "
                            f"prompt; cannot count the top {k}")


def prediction_frequency(frame: pd.DataFrame, *, k: int = 10) -> pd.DataFrame:
    """One row per predicted object (by normalised name), most frequent first: ``prompts`` = how many prompts
    have it in their top ``k``, ``share`` = that over the number of prompts, ``gold_share`` = share of prompts
    whose gold answers include it (what a model that knew every answer would show).

    >>> f = pd.DataFrame({"top_names": [["a", "b"], ["A", "c"], ["b", "a"], ["a", "c"]],
    ...                   "golds": [["a"], ["c"], ["c"], ["x"]]})
    >>> prediction_frequency(f, k=1)[["object", "prompts", "share", "gold_share"]].values.tolist()
    [['a', 3, 0.75, 0.25], ['b', 1, 0.25, 0.0]]
    """
    _check(frame, k)
    n = len(frame)
    counts: Counter[str] = Counter()
    spellings: dict[str, Counter[str]] = {}
    for names in frame["top_names"]:
        seen: dict[str, str] = {}
        for name in names[:k]:
            seen.setdefault(normalize_name(name), name)
        counts.update(seen.keys())  # an object counts once per prompt
        for key, name in seen.items():
            spellings.setdefault(key, Counter())[name] += 1
    gold_counts: Counter[str] = Counter()
    if "golds" in frame.columns:
        for golds in frame["golds"]:
            gold_counts.update({normalize_name(g) for g in golds})

    def shown(key: str) -> str:  # the most frequent spelling, ties by the spelling itself
        return min(spellings[key].items(), key=lambda kv: (-kv[1], kv[0]))[0]

    rows = [(shown(key), c, c / n, gold_counts.get(key, 0) / n)
            for key, c in sorted(counts.items(), key=lambda kv: (-kv[1], shown(kv[0])))]
    return pd.DataFrame(rows, columns=["object", "prompts", "share", "gold_share"])


def top_share(frame: pd.DataFrame, *, k: int = 10, n: int = 5) -> float:
    """Share of all top-``k`` prediction slots taken by the ``n`` most frequent objects (by normalised name).

    For k = 1 this is the share of prompts whose top answer is one of the n favourites.

    >>> f = pd.DataFrame({"top_names": [["a", "b"], ["a", "c"], ["b", "a"], ["d", "a"]]})
    >>> top_share(f, k=1, n=1), top_share(f, k=2, n=1)
    (0.5, 0.5)
    """
    _check(frame, k)
    positive_int("n", n)
    slots: Counter[str] = Counter()
    for names in frame["top_names"]:
        slots.update(normalize_name(x) for x in names[:k])
    top = sorted(slots.values(), reverse=True)[:n]
    return sum(top) / (k * len(frame))


def distinct_predictions(frame: pd.DataFrame, *, ks: Sequence[int] = (1, 5, 10)) -> dict[int, dict]:
    """For each k: ``distinct`` objects among all top-k predictions, and that as a share of the top-k slots
    (100 % = every slot a different object; Figure 1's "percentage of unique entities ... for top 1, 5, 10").
    ks deeper than the stored predictions are left out.

    >>> distinct_predictions(pd.DataFrame({"top_names": [["a", "b"], ["a", "c"]]}), ks=(1, 2, 5))
    {1: {'distinct': 1, 'share': 0.5}, 2: {'distinct': 3, 'share': 0.75}}
    """
    out = {}
    depth = min(len(names) for names in frame["top_names"]) if len(frame) else 0
    for k in ks:
        if k > depth:
            continue
        _check(frame, k)
        seen = {normalize_name(name) for names in frame["top_names"] for name in names[:k]}
        out[k] = {"distinct": len(seen), "share": len(seen) / (k * len(frame))}
    return out


def flags(frame: pd.DataFrame, *, label: str = "this model", threshold: float = 0.1, k: int = 10) -> list[str]:
    """Sentences for every object in the top ``k`` of at least ``threshold`` of the prompts, e.g.
    "this model answers ESR1 to 40.0 % of prompts (it is the gold answer of 2.0 %)".

    >>> f = pd.DataFrame({"top_names": [["ESR1"], ["ESR1"], ["TP53"], ["ESR1"], ["BRCA1"]],
    ...                   "golds": [["TP53"], ["ESR1"], ["TP53"], ["BRCA1"], ["BRCA1"]]})
    >>> flags(f, threshold=0.5, k=1)
    ['this model answers ESR1 to 60.0 % of prompts (it is the gold answer of 20.0 %)']
    """
    if not 0 < threshold <= 1:
        raise ProbekitError(f"threshold must be in (0, 1], got {threshold!r}")
    freq = prediction_frequency(frame, k=k)
    where = "answers" if k == 1 else f"has in its top {k}"
    out = []
    for row in freq.itertuples(index=False):
        if row.share < threshold:
            break
        gold = f" (it is the gold answer of {100 * row.gold_share:.1f} %)" if "golds" in frame.columns else ""
        out.append(f"{label} {where} {row.object} to {100 * row.share:.1f} % of prompts{gold}")
    return out


def frequency_table(frames: dict[str, pd.DataFrame], *, k: int = 10, n: int = 5) -> pd.DataFrame:
    """Per run (label -> results frame): prompts, the top object and its share, the top-n share, distinct."""
    rows = []
    for label, frame in frames.items():
        freq = prediction_frequency(frame, k=k)
        dist = distinct_predictions(frame, ks=(k,)).get(k, {})
        rows.append({"run": label, "prompts": len(frame), "top object": freq.object.iloc[0],
                     "top object share": freq.share.iloc[0], f"top-{n} share": top_share(frame, k=k, n=n),
                     "distinct": dist.get("distinct"), "distinct share": dist.get("share")})
    return pd.DataFrame(rows)
