"""The Annotation results page's "where judgement is needed" form: a session whose queries a selection rule
picks (:mod:`probekit.annotations.queue`), with a preview of what qualifies and why."""

import streamlit as st

from pages import _ui as ui
from probekit import annotations as ann
from probekit.bench import runs


def queue_start(qp, sessions) -> None:
    """Pick a rule, its sources and parameters, preview the qualifying queries, create the session. ``qp`` is
    ``st.query_params``; ``sessions`` :func:`probekit.annotations.list_sessions`'s frame."""
    with st.expander("New session where judgement is needed", icon=":material/rule:"):
        rule = st.selectbox("Selection rule", list(ann.SELECTIONS), key="rq_rule")
        spec = ann.get_rule(rule)
        st.caption(spec.description)
        c1, c2, c3 = st.columns(3)
        chosen_runs: list[str] = []
        session = None
        if spec.sources == "session":
            names = dict(zip(sessions.session_id, sessions.name))
            session = c1.selectbox("Session whose ratings to read", list(names), index=None, key="rq_session",
                                   format_func=lambda s: f"{names[s]} [{s}]", placeholder="Sessions…")
        else:
            done = runs.list_runs(status="done")
            labels = dict(zip(done.run_id, done.label + " · k=" + done.k.astype(str)))
            for i in range(int(spec.sources.split(":")[1])):
                pick = c1.selectbox(f"Stored run {'AB'[i]}", list(labels), format_func=labels.get, index=None,
                                    key=f"rq_run_{i}", placeholder="Benchmark runs…")
                if pick:
                    chosen_runs.append(pick)
        params = {key: c1.number_input(key.replace("_", " "), min_value=type(p.default)(p.minimum), value=p.default,
                                       help=p.help, key=f"rq_param_{rule}_{key}") for key, p in spec.params.items()}
        name = c2.text_input("Session name", "Where judgement is needed", key="rq_name", max_chars=200)
        organiser = c2.text_input("Organiser", key="rq_org", max_chars=ann.MAX_NAME)
        n = int(c2.number_input("Queries at most", 1, 1000, 15, key="rq_n"))
        k = int(c3.number_input("Top-k answers per query", 1, 50, 10, key="rq_k"))
        seed = int(c3.number_input("Seed", 0, 10**9, 0, key="rq_seed"))
        raters = int(c3.number_input("Annotators per query (0: everyone rates all)", 0, 50, 0, key="rq_raters"))
        blind = c3.toggle("Blind (no gold marks, ranks or scores)", True, key="rq_blind")
        if not (session if spec.sources == "session" else len(chosen_runs) == int(spec.sources.split(":")[1])):
            st.caption("Pick the sources to see which queries qualify.")
            return
        preview = None
        with ui.guard("Selecting"):
            preview = ann.select(rule, runs=chosen_runs, session=session, params=params, k=k)
        if preview is None:
            return
        picked, table, described = preview
        st.markdown(f"**{ui.md(ann.describe({**described, 'taken': min(n, len(picked))}))}**")
        st.dataframe(table.head(200), hide_index=True, key="rq_preview")
        if st.button("Create session", type="primary", key="rq_create", icon=":material/play_arrow:",
                     disabled=not picked):
            with ui.guard("Creating the session"):
                sid = ann.from_selection(rule, runs=chosen_runs, session=session, params=params, name=name,
                                         organiser=organiser, n_queries=n, k=k, seed=seed, blind=blind,
                                         raters_per_item=raters or None)
                st.session_state.rs_session = sid
                qp["session"] = sid
                st.rerun()
