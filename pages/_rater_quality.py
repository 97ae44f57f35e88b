"""The Annotation results page's ordinal agreement and rater quality tables (drawn from :func:`probekit.annotations.
stats`'s result; nothing computed here)."""

import streamlit as st


def quality_panel(result: dict) -> None:
    """ICC, weighted kappa and ordinal alpha side by side."""
    st.markdown("**Ordinal agreement**: ICC(2,1) and ICC(2,k) (two-way random, absolute agreement; Shrout & "
                "Fleiss 1979), Krippendorff's alpha (ordinal) and weighted kappa (linear, quadratic).")
    st.dataframe(result["ordinal"], hide_index=True, key="rs_ordinal",
                 column_config={"value": st.column_config.NumberColumn(format="%.3f")})
