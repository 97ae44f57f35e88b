"""The Annotation results page's ordinal agreement and rater quality tables (drawn from :func:`probekit.annotations.
stats`'s result; nothing computed here)."""

import streamlit as st


def quality_panel(result: dict) -> None:
    """ICC, weighted kappa and ordinal alpha side by side; each rater's bias, consistency and reliability; expert
    acc@k from the plain consensus beside the one weighted by rater reliability."""
    st.markdown("**Ordinal agreement**: ICC(2,1) and ICC(2,k) (two-way random, absolute agreement; Shrout & "
                "Fleiss 1979), Krippendorff's alpha (ordinal) and weighted kappa (linear, quadratic).")
    st.dataframe(result["ordinal"], hide_index=True, key="rs_ordinal",
                 column_config={"value": st.column_config.NumberColumn(format="%.3f")})
    st.markdown("**Rater quality**: bias = mean (own score − mean of the other raters of the same answer); "
                "consistency = correlation with that mean; reliability = Dawid–Skene's probability of reporting "
                "the true score (chance: 0.2).")
    st.dataframe(result["raters"], hide_index=True, key="rs_raters",
                 column_config={c: st.column_config.NumberColumn(format="%.3f")
                                for c in ("bias", "consistency", "reliability")})
    acc = result["adjusted_accuracy"]
    pct = [c for c in acc.columns if "acc" in c]
    st.markdown("**Expert acc@k weighted by rater reliability**: each answer's score is the reliability-weighted "
                "median of its ratings, beside the plain consensus.")
    st.dataframe(acc.assign(**{c: acc[c] * 100 for c in pct}), hide_index=True, key="rs_adjusted",
                 column_config={c: st.column_config.NumberColumn(format="%.1f") for c in pct})
