"""Corpora: index a corpus once against a dataset's entity names (in the background, with progress and
cancel), see what it holds (documents, sentences, mentions, facts with a real context), and look up the real
contexts of a fact."""


import pandas as pd
import plotly.express as px
import streamlit as st

from pages import _ui as ui
from probekit import corpus as cp
from probekit.jobs import Job

ui.title("Corpora")
st.caption("Every mention of every entity name (case-insensitive, whole words, longest first) in every document, "
           "indexed once and reused until the corpus changes. Yao et al. retrieve documents mentioning both S and "
           "O_t; Shaier et al. build template-free prompts from sentences mentioning one entity.")
SOURCES = {"elicit": "Shipped elicit corpora (110k sentences)", "path": "A folder or file on the server",
           "upload": "Upload a file (.txt one sentence a line, .jsonl, .csv)"}
job = st.session_state.get("cp_job")
running = job is not None and not job.finished

with st.container(border=True):
    c1, c2 = st.columns(2)
    choice = c1.radio("Corpus", list(SOURCES), format_func=SOURCES.get, key="cp_source", persist_state="session")
    kind = c1.selectbox("Kind", ["auto", *cp.KINDS], key="cp_kind", persist_state="session",
                        help="lines: a document per line; txt: a folder of .txt files, one document each; "
                             "jsonl: {id, text}; csv: a text column (MIMIC-III NOTEEVENTS: TEXT)")
    column = c1.text_input("Text column (CSV / JSONL)", "", key="cp_column",
                           persist_state="session", placeholder="text")
    names_from = c2.radio("Entity names", ["dataset", "upload"], key="cp_names", persist_state="session",
                          format_func={"dataset": "The sidebar dataset's heads and tails",
                                       "upload": "Upload a list (one name a line, or CSV name[,type])"}.get)
    source = ents = None
    with ui.guard("Reading the corpus"):
        path = None
        if choice == "path":
            path = c1.text_input("Path", key="cp_path",
                                 persist_state="session", placeholder="/data/mimic/NOTEEVENTS.csv") or None
        elif choice == "upload" and (up := c1.file_uploader("Corpus file", type=["txt", "jsonl", "csv"],
                                                            key="cp_upload")) is not None:
            path = str(cp.save_upload(up.name, up.getvalue()))
        if choice == "elicit" or path:
            source = cp.open_source(path or "elicit", kind=None if kind == "auto" else kind,
                                    text_column=column or None)
    with ui.guard("Reading the entity names"):
        if names_from == "dataset":
            ds = ui.current_dataset()
            ents = cp.from_dataset(ds) if ds is not None else None
        elif (up := c2.file_uploader("Names", type=["txt", "csv"], key="cp_names_file")) is not None:
            ents = cp.from_file(cp.save_upload(up.name, up.getvalue(), folder="entity_lists"))
    found, stale = None, None
    if source is not None and ents is not None:
        with ui.guard("Looking for an index"):
            try:
                found = cp.find_index(source, ents)
            except cp.CorpusChangedError as e:
                stale = str(e)
        c2.markdown(f"**{ui.md(source.name)}** ({source.kind}, {len(source.files)} file(s)) × **{len(ents):,}** names")
        if stale:
            c2.warning(ui.message(stale), icon=":material/sync_problem:")
        elif found is not None:
            c2.success(f"Indexed as `{found.fingerprint}`", icon=":material/check_circle:")
        label = "Re-index" if stale else "Index"
        if c2.button(label, type="primary", icon=":material/play_arrow:", key="cp_start",
                     disabled=running or found is not None):
            src, es = source, ents
            st.session_state.cp_job = Job(lambda progress, should_cancel: cp.build_index(
                src, es, progress=progress, should_cancel=should_cancel).fingerprint, label="corpus index").start()
            st.rerun()

ui.job_panel("cp_job")
if job is not None and job.finished and job.status != "done":
    (st.info if job.status == "cancelled" else st.error)(job.error or job.status)

indexes = pd.DataFrame(cp.list_indexes())
if indexes.empty:
    st.info("No corpus is indexed yet: pick a corpus and names above, then **Index**.")
    st.stop()
complete = indexes[indexes.status.str.startswith(("ok", "stale"))] if "corpus" in indexes else indexes.iloc[:0]
st.subheader("Indexes")
st.dataframe(indexes, hide_index=True, key="cp_table")
if complete.empty:
    st.stop()
default = found.fingerprint if found is not None else complete.fingerprint.iloc[0]
options = list(complete.fingerprint)
sel = st.selectbox("Index", options, index=options.index(default) if default in options else 0, key="cp_sel",
                   persist_state="session",
                   format_func=lambda f: f"{f} · {complete.set_index('fingerprint').corpus[f]} × "
                                         f"{complete.set_index('fingerprint').entities[f]}")


@st.cache_resource(max_entries=2)
def _open(fingerprint: str):
    return cp.open_index(fingerprint, allow_stale=True)


with ui.guard("Opening the index"):
    idx = _open(sel)
    if not complete.set_index("fingerprint").status[sel].startswith("ok"):
        st.warning(f"This index is {complete.set_index('fingerprint').status[sel]}: re-index before relying on it.")
    counts = idx.counts
    cols = st.columns(5)
    for col, (label, value) in zip(cols, [("Documents", counts["documents"]), ("Sentences", counts["sentences"]),
                                          ("Mentions", counts["mentions"]),
                                          ("Names mentioned", counts["entities_mentioned"]),
                                          ("Facts with a context", counts.get("facts_with_document", "–"))]):
        col.metric(label, f"{value:,}" if isinstance(value, int) else value)
    if counts.get("facts"):
        st.caption(f"{counts['facts_with_document']:,} of {counts['facts']:,} facts have a document mentioning both "
                   f"S and O_t ({counts['facts_with_sentence']:,} a sentence). The shipped corpora are single short "
                   "sentences, so their coverage is low: real contexts need real documents (e.g. MIMIC-III notes).")
        facts = [tuple(r) for r in idx.sql("SELECT s.name, f.relation, o.name FROM facts f JOIN entities s ON "
                                          "s.entity_id = f.subject_id JOIN entities o ON o.entity_id = f.object_id")]
        cov = cp.coverage(idx, facts)
        frame = pd.DataFrame([{"relation": r, **v} for r, v in cov["by_relation"].items()])
        frame["relation"] = frame["relation"].map(ui.chart_text)
        st.plotly_chart(ui.legible(px.bar(frame, x="with_context", y="relation", orientation="h",
                                          hover_data=["facts"]), height=max(250, 22 * len(frame) + 80),
                                   legend=False), key="cp_cov")

    st.subheader("Real contexts of a fact")
    c1, c2, c3, c4 = st.columns([3, 3, 2, 1])
    subject = c1.text_input("Subject S", key="cp_s", persist_state="session")
    target = c2.text_input("Target O_t", key="cp_o", persist_state="session")
    unit = c3.selectbox("Unit", cp.UNITS, key="cp_unit",
                        persist_state="session", help="the paper's unit is the document")
    window = int(c4.number_input("Window", 0, 50, 1, key="cp_window",
                                 persist_state="session", disabled=unit != "window"))
    if subject and target:
        found_ctx = cp.contexts_for(idx, subject, target, unit=unit, window=window, limit=20)
        st.caption(f"{len(found_ctx)} context(s) (at most 20)")
        for c in found_ctx:
            spans = sorted([(a, b, "#1565c0") for a, b in c.target_spans] + [(a, b, "#2e7d32") for a, b in
                                                                             c.subject_spans if (a, b) not in
                                                                             c.target_spans])
            out, pos = [], 0
            for a, b, colour in spans:
                out += [ui.html_text(c.text[pos:a]), f"<b style='color:{colour}'>{ui.html_text(c.text[a:b])}</b>"]
                pos = b
            out.append(ui.html_text(c.text[pos:]))
            # one HTML block (ui.html_text): Markdown in the note never renders
            st.markdown(f"<div><code>{ui.html_text(f'{c.file}:{c.key}')}</code> {''.join(out)}</div>",
                        unsafe_allow_html=True)
