"""probekit.metrics.agreement_ordinal: ICC(2,1)/ICC(2,k), weighted kappa and ordinal alpha, each checked against
the published example or formula (a naive loop) and a maintained library on the same ratings.

Tolerances: every measure here is a closed form over at most a few hundred scores in float64, as are the
references, so they differ only by rounding in the last bits: ``rel=1e-9``. Published values are compared at the
precision they were printed with."""

import itertools

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from probekit.errors import ProbekitError
from probekit.metrics import agreement
from probekit.metrics import agreement_ordinal as ordinal

# Shrout & Fleiss (1979), "Intraclass correlations: uses in assessing rater reliability", Table 2: 6 targets, 4 judges.
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]


def _long(matrix, raters):
    """Targets × raters (NaN = missing) to long ratings."""
    return pd.DataFrame([{"item_id": i, "annotator": r, "score": int(v)} for i, row in enumerate(matrix)
                         for r, v in zip(raters, row) if not np.isnan(v)])


def _panel(seed, n=40, raters=4, missing=0.0):
    """Simulated 1..5 ratings: a true score per answer, each rater off by at most one, a few gaps."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, n)
    x = np.clip(truth[:, None] + rng.integers(-1, 2, (n, raters)), 1, 5).astype(float)
    x[rng.random((n, raters)) < missing] = np.nan
    return x


def _naive_icc(x):
    """Shrout & Fleiss's mean squares written out as loops, then their ICC(2,1) and ICC(2,k) formulas."""
    n, k = len(x), len(x[0])
    grand = sum(sum(row) for row in x) / (n * k)
    row_means = [sum(row) / k for row in x]
    col_means = [sum(x[i][j] for i in range(n)) / n for j in range(k)]
    bms = k * sum((m - grand) ** 2 for m in row_means) / (n - 1)
    jms = n * sum((m - grand) ** 2 for m in col_means) / (k - 1)
    ems = sum((x[i][j] - row_means[i] - col_means[j] + grand) ** 2 for i in range(n) for j in range(k)) \
        / ((n - 1) * (k - 1))
    return ((bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n), (bms - ems) / (bms + (jms - ems) / n))


def test_icc_reproduces_shrout_and_fleiss_table_4():
    out = ordinal.icc_matrix(SHROUT_FLEISS)
    assert (round(out["ICC(2,1)"], 2), round(out["ICC(2,k)"], 2)) == (0.29, 0.62)  # printed: .29 and .62
    assert (out["n"], out["k"]) == (6, 4)
    assert (out["ICC(2,1)"], out["ICC(2,k)"]) == pytest.approx(_naive_icc(SHROUT_FLEISS), rel=1e-9)


@pytest.mark.parametrize("seed", range(3))
def test_icc_against_naive_loop_and_absolute_agreement(seed):
    x = _panel(seed)
    single, average = _naive_icc(x.tolist())
    out = ordinal.icc(_long(x, "ABCD"))
    assert (out["ICC(2,1)"], out["ICC(2,k)"]) == pytest.approx((single, average), rel=1e-9)
    assert out["dropped"] == 0 and out["form"] == ordinal.ICC_FORM
    # absolute agreement: one rater scoring everything a point higher lowers it (a consistency ICC would not move)
    shifted = x.copy()
    shifted[:, 0] = np.clip(shifted[:, 0] + 1, 1, 5)
    assert ordinal.icc(_long(shifted, "ABCD"))["ICC(2,1)"] < out["ICC(2,1)"]


def test_icc_against_pingouin():
    """pingouin.intraclass_corr's "ICC(A,1)" and "ICC(A,k)" rows (McGraw & Wong's names for the same forms).
    pingouin is not a test dependency (it pulls in matplotlib, seaborn, statsmodels and xarray, ~160 MB): with
    it installed this compares on the same ratings."""
    pingouin = pytest.importorskip("pingouin")
    for seed in range(3):
        x = _panel(seed)
        long = _long(x, "ABCD")
        ref = pingouin.intraclass_corr(long, targets="item_id", raters="annotator", ratings="score").set_index("Type")
        out = ordinal.icc(long)
        assert out["ICC(2,1)"] == pytest.approx(ref.loc["ICC(A,1)", "ICC"], rel=1e-9)
        assert out["ICC(2,k)"] == pytest.approx(ref.loc["ICC(A,k)", "ICC"], rel=1e-9)


def test_icc_drops_incomplete_answers_and_says_so():
    x = _panel(5, missing=0.1)
    complete = x[~np.isnan(x).any(axis=1)]
    out = ordinal.icc(_long(x, "ABCD"))
    assert out["n"] == len(complete) and out["dropped"] == len(x) - len(complete) > 0
    assert (out["ICC(2,1)"], out["ICC(2,k)"]) == pytest.approx(_naive_icc(complete.tolist()), rel=1e-9)
    table = ordinal.ordinal_agreement(_long(x, "ABCD")).set_index("measure")
    row = table.loc["ICC(2,1) absolute agreement, one rater"]
    assert row["answers"] == len(complete) and f"{len(x) - len(complete)} dropped" in row["note"]


def test_icc_undefined_cases():
    assert ordinal.icc_matrix([[3, 3], [3, 3]])["ICC(2,1)"] is None  # every score equal
    assert ordinal.icc_matrix([[1, 2, 3]])["ICC(2,k)"] is None  # one target
    one = pd.DataFrame({"item_id": [1, 2], "annotator": ["a", "a"], "score": [1, 5]})
    assert ordinal.icc(one)["ICC(2,1)"] is None  # one rater
    with pytest.raises(ProbekitError, match="complete"):
        ordinal.icc_matrix([[1, np.nan], [2, 3]])


def _naive_weighted_kappa(a, b, power):
    """Cohen (1968): 1 - sum w·observed / sum w·expected, w = |i-j|^power / 4^power over the scale 1..5."""
    n = len(a)
    obs = {(i, j): sum(x == i and y == j for x, y in zip(a, b)) / n for i in range(1, 6) for j in range(1, 6)}
    pa = {i: sum(x == i for x in a) / n for i in range(1, 6)}
    pb = {j: sum(y == j for y in b) / n for j in range(1, 6)}
    w = {(i, j): abs(i - j) ** power / 4 ** power for i in range(1, 6) for j in range(1, 6)}
    return 1 - sum(w[c] * obs[c] for c in w) / sum(w[(i, j)] * pa[i] * pb[j] for i, j in w)


@pytest.mark.parametrize("weights,power", [("linear", 1), ("quadratic", 2)])
def test_weighted_kappa_against_sklearn_and_naive_loop(weights, power):
    x = _panel(1, missing=0.15)
    long = _long(x, "ABCD")
    table = agreement.pairwise_kappa(long, weights=weights).set_index(["annotator_a", "annotator_b"])
    for (i, a), (j, b) in itertools.combinations(enumerate("ABCD"), 2):
        both = ~np.isnan(x[:, i]) & ~np.isnan(x[:, j])
        sa, sb = x[both, i].astype(int), x[both, j].astype(int)
        ref = cohen_kappa_score(sa, sb, labels=[1, 2, 3, 4, 5], weights=weights)
        assert table.loc[(a, b), "kappa"] == pytest.approx(ref, rel=1e-9)
        assert table.loc[(a, b), "kappa"] == pytest.approx(_naive_weighted_kappa(sa, sb, power), rel=1e-9)
    value, pairs = ordinal.mean_kappa(long, weights=weights)
    assert pairs == 6 and value == pytest.approx(table["kappa"].mean(), rel=1e-9)


def test_kappa_weights_follow_the_scale_not_the_codes_used():
    """Raters who use only 1, 2 and 5: the weights are distances on 1..5 (a 2-vs-5 miss weighs 3/4, not 1/2 as
    the three codes taken as 0, 1, 2 would give)."""
    a, b = [1, 2, 5, 1, 5, 2, 2], [1, 5, 5, 2, 1, 2, 1]
    long = _long(np.array([a, b], dtype=float).T, "AB")
    got = agreement.pairwise_kappa(long, weights="linear")["kappa"].iloc[0]
    assert got == pytest.approx(_naive_weighted_kappa(a, b, 1), rel=1e-9)
    assert got != pytest.approx(cohen_kappa_score(a, b, weights="linear"))  # codes 1, 2, 5 taken as 0, 1, 2
    with pytest.raises(ProbekitError, match="unknown kappa weights 'cubic'"):
        ordinal.mean_kappa(long, weights="cubic")


def _naive_ordinal_alpha(x):
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": coincidences o_ck over pairable values,
    ordinal metric delta_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2,
    alpha = 1 - (n-1) sum o·delta / sum n_c·n_k·delta."""
    o = np.zeros((6, 6))
    for row in x:
        vals = [int(v) for v in row if not np.isnan(v)]
        m = len(vals)
        if m < 2:
            continue
        for p, q in itertools.permutations(range(m), 2):
            o[vals[p], vals[q]] += 1 / (m - 1)
    nc = o.sum(axis=1)
    n = nc.sum()

    def delta(c, k):
        lo, hi = min(c, k), max(c, k)
        return (sum(nc[g] for g in range(lo, hi + 1)) - (nc[c] + nc[k]) / 2) ** 2

    observed = sum(o[c, k] * delta(c, k) for c in range(1, 6) for k in range(1, 6))
    expected = sum(nc[c] * nc[k] * delta(c, k) for c in range(1, 6) for k in range(1, 6))
    return 1 - (n - 1) * observed / expected


def test_ordinal_alpha_against_krippendorff_package_and_naive_loop():
    import krippendorff

    x = _panel(2, missing=0.2)
    long = _long(x, "ABCD")
    got = agreement.krippendorff_alpha(long, level="ordinal")
    ref = krippendorff.alpha(reliability_data=x.T, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5])
    assert got == pytest.approx(ref, rel=1e-9)
    assert got == pytest.approx(_naive_ordinal_alpha(x), rel=1e-9)
    table = ordinal.ordinal_agreement(long).set_index("measure")
    assert table.loc["Krippendorff's alpha (ordinal)", "value"] == pytest.approx(got, rel=1e-12)
    assert list(table.index) == ["ICC(2,1) absolute agreement, one rater",
                                 "ICC(2,k) absolute agreement, mean of the raters", "Krippendorff's alpha (ordinal)",
                                 "weighted kappa (linear), mean over pairs",
                                 "weighted kappa (quadratic), mean over pairs"]
