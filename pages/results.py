"""Annotation results (organiser): create a session from a fresh probe or a stored run, share its link, and read
the experts' ratings: MedLAMA Table 5, expert-adjusted acc@k, agreement and candidate missing facts."""

import streamlit as st

from pages import _ui as ui
from pages._experts import experts_panel
from pages._queue_start import queue_start
from pages._rater_quality import quality_panel
from pages._review import review_panel
from probekit import annotations as ann
from probekit.bench import runs
from probekit.metrics import agreement
from probekit.metrics import intervals as ci
from probekit.probes import PROBES

ui.title("Annotation results")
qp = st.query_params
sessions = None
with ui.guard("Listing sessions"):
    sessions = ann.list_sessions()
if sessions is None:
    st.stop()


LINKS: dict = st.session_state.setdefault("rs_links", {})  # the link just created, per session (shown once)


# ---- a new session
with st.expander("New annotation session", expanded=sessions.empty, icon=":material/add:"):
    source = st.segmented_control("Answers from", ["Fresh probe", "Stored run"], default="Fresh probe",
                                  key="rs_source") or "Fresh probe"
    c1, c2, c3 = st.columns(3)
    name = c1.text_input("Session name", "Expert check", key="rs_name", max_chars=200)
    organiser = c1.text_input("Organiser", key="rs_org", max_chars=ann.MAX_NAME)
    ds, run_id, relations = None, None, []
    if source == "Fresh probe":
        ds = ui.current_dataset()
        probe = c1.selectbox("Probe", list(PROBES), key="rs_probe", help="mask_average needs a model with an MLM head")
        relations = ds.relations if ds is not None else []
        c1.caption(f"Model **{ui.model_label()}** and dataset from the sidebar.")
    else:
        done = runs.list_runs(status="done")
        labels = dict(zip(done.run_id, done.label + " · k=" + done.k.astype(str)))
        run_id = c1.selectbox("Stored run", list(labels), format_func=labels.get, key="rs_run", index=None,
                              placeholder="Benchmark runs…" if labels else "No finished runs yet")
        if run_id:
            relations = sorted(runs.load_run(run_id).frame.relation.unique())
    chosen = c2.multiselect("Relations (none: all)", relations, key="rs_rels")
    n = int(c2.number_input("Queries (seeded sample, spread over relations)", 1, 1000, 15, key="rs_n"))
    seed = int(c2.number_input("Seed", 0, 10**9, 0, key="rs_seed"))
    k = int(c3.number_input("Top-k answers per query", 1, 50, 10, key="rs_k"))
    raters = int(c3.number_input("Annotators per query (0: everyone rates all)", 0, 50, 0, key="rs_raters"))
    blind = c3.toggle("Blind (no gold marks, ranks or scores)", True, key="rs_blind")
    exclude = c3.toggle("Leave out the query's own subject", True, key="rs_exclude", disabled=source != "Fresh probe",
                        help=ann.SUBJECT_NOTE)
    if source == "Fresh probe":
        c3.caption(ann.SUBJECT_NOTE)
    if st.button("Create session", type="primary", key="rs_create", icon=":material/play_arrow:"):
        with ui.guard("Creating the session"):
            common = dict(name=name, organiser=organiser, relations=chosen, n_queries=n, k=k, seed=seed,
                          blind=blind, raters_per_item=raters or None)
            sid = None
            if source == "Stored run":
                if not run_id:
                    st.warning("Pick a stored run first.")
                else:
                    sid = ann.from_run(run_id, **common)
            elif ds is not None and (model := ui.current_model()) is not None:
                bar = ui.progress("Probing the sampled queries", stop_key="rs_stop")
                sid = ann.from_probe(model, ds, probe=probe, exclude_subject=exclude, progress=bar, **common)
                bar.clear()
            if sid:
                st.session_state.rs_session = sid
                qp["session"] = sid
                st.rerun()

if ui.stopped("rs_stop"):
    st.info("Stopped: no session was created. Press **Create session** to start again.", icon=":material/stop_circle:")
queue_start(qp, sessions)

if sessions.empty:
    st.info("No annotation session yet: create one above, then create a personal link for each expert.")
    st.stop()
names = dict(zip(sessions.session_id, sessions.name + " · " + sessions.created_at.astype(str).str[:16]))
if st.session_state.get("rs_session") not in names:
    st.session_state.rs_session = qp.get("session") if qp.get("session") in names else sessions.session_id[0]
sid = st.selectbox("Session", list(names), key="rs_session", format_func=lambda s: f"{names[s]} [{s}]")
qp["session"] = sid
meta = ann.get_session(sid)
per_query = f"{meta['raters_per_item']} annotators per query" if meta["raters_per_item"] else "everyone rates all"
st.caption(f"{meta['n_queries']} queries × top-{meta['k']} · {'blind' if meta['blind'] else 'not blind'} · {per_query}"
           f" · {meta['source']}: {ui.md(meta['model'] or '–')} on {ui.md(meta['dataset'] or '–')} "
           f"({ui.md(meta['probe'] or '–')})"
           + {True: " · the query's own subject left out", False: " · the query's own subject kept",
              None: ""}[meta["exclude_subject"]]
           + (f" · queries chosen by {ui.md(ann.describe(meta['selection']))}" if meta["selection"] else ""))

# ---- the ratings first (MedLAMA Table 5), the session's progress and links folded below once ratings exist: Table 5
# sat under ~600 px of links and settings at 1024×768
result_box = st.container(key="rs_result")
head = result_box.empty()  # the heading, once there are ratings to read
c1, c2, c3 = result_box.columns([3, 8, 4])  # the four consensus rules whole at 1024 px ("min" was cut)
threshold = c1.segmented_control("Expert hit: score ≥", [5, 4], default=5, key="rs_threshold") or 5
consensus = c2.segmented_control("Consensus", list(agreement.CONSENSUS), default="median", key="rs_consensus",
                                 help="Over the annotators of an answer. median = lower median: with two raters both "
                                      "must agree")
result = None
with result_box, ui.guard("Computing the statistics"):
    result = ann.stats(sid, threshold=threshold, consensus=consensus or "median")
rated = result is not None and bool(result["n_ratings"])
with st.expander("Progress, experts and their links", expanded=not rated, icon=":material/group:"):
    st.dataframe(ann.overview(sid), hide_index=True, key="rs_overview")
    experts_panel(sid, LINKS)
if result is None:
    st.stop()
if not rated:
    result_box.info("No ratings yet. Send each expert their link; results appear here as the experts rate.")
    st.stop()

head.subheader("Expert score × gold hit (MedLAMA Table 5)")
with result_box:
    whose = c3.selectbox("Ratings of", ["consensus", *result["table5_by_annotator"]], key="rs_whose")
    st.dataframe(result["table5"] if whose == "consensus" else result["table5_by_annotator"][whose],
                 hide_index=True, key="rs_table5")
    st.caption(agreement.MEDLAMA_NOTE)
s = result["shares"]
m1, m2, m3 = st.columns(3)
m1.metric(f"Rated top-{s['k']} answers", s["rated"], help=f"{s['unrated']} not rated yet")
m2.metric("Gold hits (share of answers)", f"{100 * s['gold_share']:.1f}%", help=f"{s['gold_hits']} of {s['rated']}")
m3.metric(f"Rated ≥ {s['threshold']} (share of answers)", f"{100 * s['expert_share']:.1f}%",
          help=f"{s['expert_hits']} of {s['rated']}: MedLAMA §5.3's expert acc@10")

st.subheader("acc@k two ways: per query and as a share of answers")
acc = result["accuracy"].merge(result["accuracy_intervals"], on=["k", "relation"], how="left")
pct = [c for c in acc.columns if "acc" in c and not c.endswith("[lo, hi]")]  # the intervals are text, in % already
acc = acc[[x for c in acc.columns if not c.endswith("[lo, hi]")
           for x in (c, f"{c} [lo, hi]") if x in acc.columns]]  # each interval right after its value
st.markdown("**Per query**: a query is a hit when one of its top-k answers is gold (gold acc) or rated "
            f"≥ {threshold} by the experts (expert acc).")
st.dataframe(acc.assign(**{c: acc[c] * 100 for c in pct}), hide_index=True, key="rs_acc",
             column_config={c: st.column_config.NumberColumn(format="%.1f") for c in pct})
st.caption("A query counts once all its top-k answers are rated; gold acc is on the same queries. "
           f"{ci.interval_note(None, ['macro'])}; a relation and all (shares of queries): Wilson score (Wilson 1927).")
shares = result["answer_shares"]
spct = [c for c in shares.columns if "share" in c]
st.markdown(f"**Share of answers** (MedLAMA §5.3's acc@10): of the rated top-k answers, the share that are gold "
            f"and the share rated ≥ {threshold}.")
st.dataframe(shares.assign(**{c: shares[c] * 100 for c in spct}), hide_index=True, key="rs_shares",
             column_config={c: st.column_config.NumberColumn(format="%.1f") for c in spct})

st.subheader("Inter-annotator agreement")
st.dataframe(result["agreement"], hide_index=True, key="rs_agreement",
             column_config={c: st.column_config.NumberColumn(format="%.3f")
                            for c in ("alpha (ordinal)", "mean kappa (quadratic)")})
if len(result["kappa"]):
    st.dataframe(result["kappa"], hide_index=True, key="rs_kappa")
st.caption("Krippendorff's alpha (ordinal) over all annotators; Cohen's kappa (quadratic weights) per pair.")
quality_panel(result)

review_panel(sid)
st.caption(result["verdict_note"][0].upper() + result["verdict_note"][1:] + ".")

st.subheader(f"Candidate missing facts: rated ≥ {threshold}, not gold")
facts = result["missing_facts"]
st.dataframe(facts, hide_index=True, key="rs_facts")
ui.download("Missing facts (CSV)", lambda: ann.frame_bytes(facts, "csv"), file_name=f"{sid}_missing_facts.csv",
            memo=("annotations", sid, ann.data_version(sid), "facts", threshold, consensus), mime="text/csv",
            key="rs_facts_dl")

st.subheader("Exports")
table = st.segmented_control("Table", ann.EXPORT_TABLES, default="ratings", key="rs_export_table") or "ratings"
cols = st.columns(len(ann.EXPORT_FORMATS))
for col, fmt in zip(cols, ann.EXPORT_FORMATS):
    with col:
        ui.download(f"{table} ({fmt.upper()})", lambda fmt=fmt: ann.frame_bytes(ann.export_frame(sid, table), fmt),
                    memo=("annotations", sid, ann.data_version(sid), table, fmt),
                    file_name=f"{sid}_{table}.{fmt}", key=f"rs_dl_{fmt}")
ui.share_link({"session": sid})
