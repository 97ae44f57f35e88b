"""Is a difference between two runs real? Paired tests over the queries both runs answered.

Two runs of the same dataset answer the same queries, so their scores are paired: each query contributes
``d = score_a - score_b`` (item scores of a registered metric, :mod:`probekit.metrics.registry`, one item per query
scored by its best gold). Treating the two runs as independent samples (lm-evaluation-harness's z-test) wastes that
pairing and overstates the noise. Here:

- **McNemar's test, exact** (a binary metric: acc@k). Only the discordant queries carry information: ``b`` that A
  gets and B misses, ``c`` the reverse. Under "no difference" each discordant query is a fair coin, so the two-sided
  p-value is the exact binomial test of ``b`` successes in ``b + c`` trials at 1/2 (McNemar 1947; Edwards'
  chi-square approximation is not needed when the exact tail is cheap). It tests the micro (pooled) difference.
- **Sign-flip permutation test** (any metric, and every macro average). Under "no difference" each query's ``d``
  is as likely ``+d`` as ``-d``; the p-value is the share of random sign assignments whose statistic is at least as
  far from 0 as the observed one, counted with the observed assignment itself (``(1 + hits) / (1 + n)``), so it
  is never 0.
- **Paired bootstrap confidence interval** of the difference: queries resampled with replacement *within each
  relation* (the relations and their sizes stay those of the dataset, as a macro average needs), the percentile
  interval of the resampled differences.
- **Correction across relations**: one test per relation is many tests; their p-values are adjusted by Holm's
  step-down method (family-wise error) or Benjamini-Hochberg (false discovery rate), named in the table.

>>> mcnemar_exact(8, 2)
0.109375
>>> holm([0.01, 0.04, 0.03]), benjamini_hochberg([0.01, 0.04, 0.03])
([0.03, 0.06, 0.06], [0.03, 0.04, 0.04])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ProbekitError, UnknownNameError, positive_int
from .compare import _check_frame, align, subset
from .registry import get_metric

CORRECTIONS = {
    "holm": "Holm's step-down adjustment (controls the family-wise error rate)",
    "bh": "Benjamini-Hochberg adjustment (controls the false discovery rate)",
}
"""How the per-relation p-values are adjusted for testing every relation."""
_CELLS = 2_000_000  # resampled values held at once (bootstrap and permutation draws go in chunks of this many)


# ---------------------------------------------------------------- tests and adjustments
def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts ``b`` (A right, B wrong) and ``c`` (the reverse):
    ``min(1, 2 * P(X <= min(b, c)))`` for ``X ~ Binomial(b + c, 1/2)``; 1 when there is no discordant pair."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ProbekitError(f"discordant counts must be >= 0, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    from scipy import stats

    return float(min(1.0, 2.0 * stats.binom.cdf(min(b, c), n, 0.5)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest (1-based) is multiplied by
    ``m - i + 1``, made non-decreasing along that order, and capped at 1. NaN stays NaN and is not counted."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m, running = len(order), 0.0
    for i, idx in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[idx]))
        out[idx] = running
    return [float(x) for x in out]


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input order: the i-th smallest is multiplied by
    ``m / i``, then made non-decreasing from the largest down, and capped at 1. NaN stays NaN and is not counted."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m, running = len(order), 1.0
    for rank in range(m, 0, -1):
        idx = order[rank - 1]
        running = min(running, m / rank * p[idx])
        out[idx] = min(1.0, running)
    return [float(x) for x in out]


def adjust(pvalues: Sequence[float], correction: str) -> list[float]:
    if correction not in CORRECTIONS:
        raise UnknownNameError("correction", str(correction), list(CORRECTIONS))
    return holm(pvalues) if correction == "holm" else benjamini_hochberg(pvalues)


# ---------------------------------------------------------------- resampling, stratified by relation
def _chunks(n_draws: int, width: int):
    step = max(1, _CELLS // max(1, width))
    for start in range(0, n_draws, step):
        yield min(step, n_draws - start)


def _bootstrap_means(d: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot,) means of ``d`` resampled with replacement."""
    out = []
    for size in _chunks(n_boot, len(d)):
        idx = rng.integers(0, len(d), size=(size, len(d)))  # (size, n)
        out.append(d[idx].mean(axis=1))
    return np.concatenate(out)


def _flip_means(d: np.ndarray, n_perm: int, rng: np.random.Generator) -> np.ndarray:
    """(n_perm,) means of ``d`` with random signs."""
    out = []
    for size in _chunks(n_perm, len(d)):
        signs = rng.integers(0, 2, size=(size, len(d))) * 2 - 1  # (size, n) of ±1
        out.append((signs * d).mean(axis=1))
    return np.concatenate(out)


def _p_from_draws(observed: float, draws: np.ndarray) -> float:
    """Two-sided permutation p-value, the observed assignment counted: (1 + #(|draw| >= |observed|)) / (1 + n)."""
    tol = 1e-12 * max(1.0, abs(observed))
    return float((1 + np.count_nonzero(np.abs(draws) >= abs(observed) - tol)) / (1 + len(draws)))


# ---------------------------------------------------------------- two runs
@dataclass(frozen=True)
class PairedComparison:
    """A paired comparison of run A against run B: ``table`` has one row per relation, then ``macro`` and
    ``micro`` (columns ``relation, n, A, B, diff, lo, hi, test, p, p adjusted``; ``diff = A - B``, ``lo``/``hi`` its
    bootstrap interval, ``p adjusted`` only on relation rows), computed with the settings named alongside."""

    table: pd.DataFrame
    metric: str
    which: str
    confidence: float
    n_boot: int
    n_perm: int
    seed: int
    correction: str

    def row(self, relation: str = "micro") -> dict:
        return self.table.set_index("relation").loc[relation].to_dict()

    def sentence(self, relation: str = "micro", *, a: str = "A", b: str = "B") -> str:
        """``A − B = +2.10 points [0.40, 3.90], p = 0.012 (McNemar, exact; 3,437 paired queries)``."""
        r = self.row(relation)
        level = f"{100 * self.confidence:g} %"
        return (f"{a} − {b} = {100 * r['diff']:+.2f} points [{100 * r['lo']:.2f}, {100 * r['hi']:.2f}] ({level} "
                f"bootstrap), p {_p_text(r['p'])} ({r['test']}; {int(r['n']):,} paired queries, {relation} "
                f"{self.metric})")

    def to_dict(self) -> dict:
        rows = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
                for r in self.table.to_dict(orient="records")]
        return {"metric": self.metric, "subset": self.which, "confidence": self.confidence, "n_boot": self.n_boot,
                "n_perm": self.n_perm, "seed": self.seed, "correction": self.correction,
                "correction_rule": CORRECTIONS[self.correction], "rows": rows}


def _p_text(p: float) -> str:
    """The p-value with its relation sign: ``= 0.012``, ``< 0.001`` (three decimals say no more), ``= –`` (none).

    >>> _p_text(0.0123), _p_text(1e-9)
    ('= 0.012', '< 0.001')
    """
    return "= –" if p != p else ("< 0.001" if p < 0.001 else f"= {p:.3f}")


def paired_scores(a: pd.DataFrame, b: pd.DataFrame, *, metric: str, which: str = "full",
                  hard_set: tuple[bool, bool] = (False, False)) -> pd.DataFrame:
    """The queries both runs hold (of the ``which`` subset), one row each: ``relation``, ``a``, ``b`` (each run's
    item score of ``metric`` from the query's best gold rank). Runs sharing no query are refused."""
    m = get_metric(metric)
    pairs = align(subset(_check_frame(a), which, hard_set=hard_set[0]), subset(_check_frame(b), which,
                                                                                hard_set=hard_set[1]))
    if pairs.empty:
        raise ProbekitError(f"the two runs share no {which} query (same dataset, same queries): nothing to pair")
    ranks = {s: pd.to_numeric(pairs[f"best_gold_rank_{s}"], errors="coerce").astype(float).to_numpy()
             for s in ("a", "b")}
    return pd.DataFrame({"relation": pairs["relation_a"].to_numpy(), "a": m.score(ranks["a"]),
                         "b": m.score(ranks["b"])})


def compare_paired(a: pd.DataFrame, b: pd.DataFrame, *, metric: str = "acc@10", which: str = "full",
                   hard_set: tuple[bool, bool] = (False, False), confidence: float = 0.95, n_boot: int = 2000,
                   n_perm: int = 2000, seed: int = 0, correction: str = "holm",
                   depths: tuple[int | None, int | None] = (None, None)) -> PairedComparison:
    """Run A against run B on their shared queries: per relation, macro and micro, the difference of ``metric``
    with a paired bootstrap interval and a paired test (module docstring): exact McNemar for a binary metric's
    relation and micro rows, the sign-flip permutation test otherwise and for the macro row. Seeded: the same
    inputs give the same numbers. A metric a run cannot have (acc@10 of a one-answer method, ``depths``) is
    refused."""
    m = get_metric(metric)
    for depth, label in zip(depths, "AB"):
        if not m.defined_at(depth):
            raise ProbekitError(f"run {label} gives {depth} answer(s) per query: it has no {m.name}")
    if not 0 < confidence < 1:
        raise ProbekitError(f"confidence must be between 0 and 1, got {confidence}")
    n_boot, n_perm = positive_int("n_boot", n_boot), positive_int("n_perm", n_perm)
    if correction not in CORRECTIONS:
        raise UnknownNameError("correction", str(correction), list(CORRECTIONS))
    scores = paired_scores(a, b, metric=m.name, which=which, hard_set=hard_set)
    binary = bool(np.isin(scores[["a", "b"]].to_numpy(), (0.0, 1.0)).all()) and m.depth is not None
    rng = np.random.default_rng(seed)
    tail = (1 - confidence) / 2
    rows, boot, flips, sizes = [], [], [], []
    for rel, part in scores.groupby("relation", sort=True):
        d = (part["a"] - part["b"]).to_numpy()
        means = _bootstrap_means(d, n_boot, rng)  # (n_boot,)
        flip = _flip_means(d, n_perm, rng)  # (n_perm,)
        boot.append(means)
        flips.append(flip)
        sizes.append(len(d))
        rows.append(_row(str(rel), part["a"].to_numpy(), part["b"].to_numpy(), means, flip, tail, binary))
    adjusted = adjust([r["p"] for r in rows], correction)
    for r, p in zip(rows, adjusted):
        r["p adjusted"] = p
    boot_m, flip_m = np.vstack(boot), np.vstack(flips)  # (relations, draws)
    w = np.asarray(sizes, dtype=float)[:, None] / sum(sizes)  # (relations, 1) share of the queries
    every_a, every_b = scores["a"].to_numpy(), scores["b"].to_numpy()
    per_rel_a = scores.groupby("relation", sort=True)["a"].mean().to_numpy()
    per_rel_b = scores.groupby("relation", sort=True)["b"].mean().to_numpy()
    macro_diff = float(np.mean(per_rel_a - per_rel_b))
    rows.append({"relation": "macro", "n": len(scores), "A": float(per_rel_a.mean()), "B": float(per_rel_b.mean()),
                 "diff": macro_diff, **_interval(boot_m.mean(axis=0), tail),
                 "test": "sign-flip permutation, by relation", "p": _p_from_draws(macro_diff, flip_m.mean(axis=0)),
                 "p adjusted": np.nan})
    micro = _row("micro", every_a, every_b, (boot_m * w).sum(axis=0), (flip_m * w).sum(axis=0), tail, binary)
    rows.append({**micro, "p adjusted": np.nan})
    table = pd.DataFrame(rows, columns=["relation", "n", "A", "B", "diff", "lo", "hi", "test", "p", "p adjusted"])
    return PairedComparison(table=table, metric=m.name, which=which, confidence=confidence, n_boot=n_boot,
                            n_perm=n_perm, seed=seed, correction=correction)


def _interval(draws: np.ndarray, tail: float) -> dict:
    lo, hi = np.quantile(draws, [tail, 1 - tail])
    return {"lo": float(lo), "hi": float(hi)}


def _row(relation: str, a: np.ndarray, b: np.ndarray, boot: np.ndarray, flip: np.ndarray, tail: float,
         binary: bool) -> dict:
    diff = float(a.mean() - b.mean())
    if binary:
        test, p = "McNemar, exact", mcnemar_exact(int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum()))
    else:
        test, p = "sign-flip permutation", _p_from_draws(diff, flip)
    return {"relation": relation, "n": len(a), "A": float(a.mean()), "B": float(b.mean()), "diff": diff,
            **_interval(boot, tail), "test": test, "p": p}
