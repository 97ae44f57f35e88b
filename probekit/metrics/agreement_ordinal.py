"""Agreement on an ordinal 1–5 scale: ICC (two-way random, absolute agreement), weighted kappa, ordinal alpha.

The existing measures (:mod:`.agreement`) treat the ratings as codes with partial credit; an expert panel is also
asked "would another panel give the same *numbers*?", which is what the intraclass correlation answers.

- **ICC(2,1)** and **ICC(2,k)** (Shrout & Fleiss 1979, case 2: every target rated by the same k raters, drawn at
  random from a population of raters; McGraw & Wong 1996 call them ICC(A,1) and ICC(A,k), "absolute agreement"):
  from the two-way ANOVA mean squares of targets (MSR), raters (MSC) and residual (MSE) over n targets,

      ICC(2,1) = (MSR − MSE) / (MSR + (k − 1)·MSE + k·(MSC − MSE)/n)
      ICC(2,k) = (MSR − MSE) / (MSR + (MSC − MSE)/n)

  ICC(2,1) is the reliability of one rater's score, ICC(2,k) of the mean of the k raters' scores. A rater who
  scores everything one point higher lowers both (absolute agreement, unlike the consistency forms ICC(3,·)).
  **Missing ratings**: the ANOVA needs a complete targets × raters table, so only the answers rated by *every*
  rater are used; the others are dropped and the output says how many (:func:`icc`). With "n annotators per
  query" sessions the raters differ between queries and few answers may be complete: alpha (which allows
  missing ratings) is the measure to read there.
- **Weighted kappa** (Cohen 1968), linear (|i − j|/4) and quadratic ((i − j)²/16) disagreement weights over the
  fixed scale 1..5, per pair of raters over the answers both rated (:func:`probekit.metrics.agreement.
  pairwise_kappa`, scikit-learn's implementation), averaged over pairs.
- **Krippendorff's alpha, ordinal** (Krippendorff 2011): every pairable rating, missing ones allowed
  (:func:`probekit.metrics.agreement.krippendorff_alpha`, the ``krippendorff`` package).

>>> import numpy as np
>>> out = icc_matrix(np.array([[1, 2], [3, 4], [5, 5]]))  # MSR = 37/6, MSC = 2/3, MSE = 1/6
>>> round(out["ICC(2,1)"], 3), round(out["ICC(2,k)"], 3)  # 6 / (20/3) and 6 / (19/3)
(0.9, 0.947)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ProbekitError
from .agreement import _check_scores, krippendorff_alpha, pairwise_kappa

ICC_FORM = ("two-way random effects, absolute agreement: Shrout & Fleiss (1979) ICC(2,1) and ICC(2,k), "
            "McGraw & Wong (1996) ICC(A,1) and ICC(A,k)")
"""The one ICC form reported, named as both papers do."""
KAPPA_WEIGHTS = ("linear", "quadratic")


def icc_matrix(matrix) -> dict:
    """ICC(2,1) and ICC(2,k) of a complete targets × raters table (no missing values).

    Returns ``{"ICC(2,1)", "ICC(2,k)", "n" (targets), "k" (raters), "MSR", "MSC", "MSE"}``; the two ICCs are
    None when undefined: fewer than two targets or raters, or a zero denominator (every score equal).
    """
    x = np.asarray(matrix, dtype=float)
    if x.ndim != 2:
        raise ProbekitError(f"an ICC needs a targets × raters table, got {x.ndim} dimension(s)")
    if np.isnan(x).any():
        raise ProbekitError("an ICC needs a complete table: drop the targets some rater did not rate first")
    n, k = x.shape
    out: dict = {"ICC(2,1)": None, "ICC(2,k)": None, "n": int(n), "k": int(k), "MSR": None, "MSC": None, "MSE": None}
    if n < 2 or k < 2:
        return out
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_err = ((x - grand) ** 2).sum() - ss_rows - ss_cols
    msr, msc, mse = ss_rows / (n - 1), ss_cols / (k - 1), ss_err / ((n - 1) * (k - 1))
    out.update(MSR=float(msr), MSC=float(msc), MSE=float(mse))
    single = msr + (k - 1) * mse + k * (msc - mse) / n
    average = msr + (msc - mse) / n
    if single > 0:
        out["ICC(2,1)"] = float((msr - mse) / single)
    if average > 0:
        out["ICC(2,k)"] = float((msr - mse) / average)
    return out


def complete_table(ratings: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The answers × raters table of the answers rated by every rater, and how many answers were dropped
    (rated by some raters only). A rater's later rating of an answer replaces their earlier one."""
    ratings = _check_scores(ratings)
    if ratings.empty:
        return pd.DataFrame(), 0
    wide = ratings.pivot_table(index="item_id", columns="annotator", values="score", aggfunc="last")
    full = wide.dropna()
    return full, int(len(wide) - len(full))


def icc(ratings: pd.DataFrame) -> dict:
    """:func:`icc_matrix` over the answers rated by every rater (long ratings: ``item_id``, ``annotator``,
    ``score``), plus ``dropped`` (answers left out as incomplete) and ``form`` (:data:`ICC_FORM`)."""
    table, dropped = complete_table(ratings)
    out = icc_matrix(table.to_numpy(dtype=float))
    out.update(dropped=dropped, form=ICC_FORM)
    return out


def mean_kappa(ratings: pd.DataFrame, *, weights: str = "quadratic") -> tuple[float | None, int]:
    """Weighted kappa averaged over the pairs of raters where it is defined, and the number of such pairs."""
    if weights not in KAPPA_WEIGHTS:
        raise ProbekitError(f"unknown kappa weights {weights!r}; available: {', '.join(KAPPA_WEIGHTS)}")
    kappas = pairwise_kappa(ratings, weights=weights)["kappa"].dropna()
    return (float(kappas.mean()) if len(kappas) else None), int(len(kappas))


def ordinal_agreement(ratings: pd.DataFrame) -> pd.DataFrame:
    """The ordinal measures side by side, one row each: ``measure``, ``value`` (None: undefined), ``answers``
    (how many it used), ``raters`` and a ``note`` saying what was used or left out."""
    ratings = _check_scores(ratings)
    raters = int(ratings["annotator"].nunique())
    pairable = int((ratings.groupby("item_id")["annotator"].nunique() >= 2).sum()) if len(ratings) else 0
    c = icc(ratings)
    complete = (f"{c['n']} answers rated by all {c['k']} raters; {c['dropped']} dropped (not rated by every "
                "rater: the ANOVA needs a complete table)")
    rows = [{"measure": "ICC(2,1) absolute agreement, one rater", "value": c["ICC(2,1)"], "answers": c["n"],
             "raters": c["k"], "note": complete},
            {"measure": "ICC(2,k) absolute agreement, mean of the raters", "value": c["ICC(2,k)"], "answers": c["n"],
             "raters": c["k"], "note": complete},
            {"measure": "Krippendorff's alpha (ordinal)", "value": krippendorff_alpha(ratings), "answers": pairable,
             "raters": raters, "note": "every answer rated twice or more; missing ratings allowed"}]
    for w in KAPPA_WEIGHTS:
        value, pairs = mean_kappa(ratings, weights=w)
        rows.append({"measure": f"weighted kappa ({w}), mean over pairs", "value": value, "answers": pairable,
                     "raters": raters, "note": f"{pairs} pair(s) of raters, each over the answers both rated"})
    return pd.DataFrame(rows, columns=["measure", "value", "answers", "raters", "note"])
