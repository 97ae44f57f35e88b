"""Context: rank-change curves for one triple with a document, and UCM over a dataset (Yao et al.)."""

import streamlit as st

from pages import _context_dataset as dataset_mode
from pages import _context_result as shown
from pages import _ui as ui
from probekit import context as ctx
from probekit import views
from probekit.context import documents
from probekit.probes import probes_for

ROLE_COLOURS = shown.ROLE_COLOURS
SOURCES = ["Paste", "Upload", "Search a corpus"]

ui.title("Context variance")
model, ds = ui.current_model(), ui.current_dataset()
if model is None or ds is None:
    st.stop()


def restore(params) -> None:
    """First visit: the triple, variant and document of a shared link (probekit.views) into the widgets' state."""
    view = views.context_view(params, ignored=(ignored := []))
    by_id = {q.id: q for q in ds.queries}
    q = by_id.get(view.query)
    state = {"ctx_probe": view.probe if view.probe in probes_for(model) else None,
             "ctx_rel": q.relation if q else (view.relation if view.relation in ds.relations else None),
             "ctx_qid": q.id if q else None, "ctx_target": view.target if q and view.target in q.golds else None,
             "ctx_variant": view.variant if view.variant in ctx.VARIANTS else None,
             "ctx_perms": view.permutations, "ctx_seed": view.seed}
    if view.doc:
        text = documents.load_document(view.doc)
        if text is None:
            ignored.append("doc (this server does not hold that document: paste it again)")
        else:
            state.update(ctx_src="Paste", ctx_doc=text, ctx_autorun=q is not None)
    elif view.corpus:
        state.update(ctx_src="Search a corpus", ctx_corpus=view.corpus)
    st.session_state.update({k: v for k, v in state.items() if v is not None})
    st.session_state.ctx_ignored = ignored


if "ctx_ignored" not in st.session_state:
    restore(st.query_params)
if bad := st.session_state.ctx_ignored:
    st.caption(f"The link's {ui.md(', '.join(bad))} could not be used; the defaults are used there.")
    st.session_state.ctx_ignored = []
probe = st.sidebar.selectbox("Context probe", probes_for(model), key="ctx_probe", persist_state="session",
                             help="retrieval for encoders, mask_average for MLMs (one forward per candidate length)")
with st.expander("What O_t, O_cor, O_incor, UCM and the variants mean"):
    st.markdown("\n".join(f"- **{t}**: {line}" for t, line in ctx.TERMS.items()))
    st.markdown("\n".join(f"- **{v}**: {line}" for v, line in ctx.VARIANT_HELP.items()))
single, dataset = st.tabs(["Single triple", "Dataset (UCM)"])

with single:
    # the result first, the triple and document folded above it once there is one (a 1024×768 screen too)
    result_box = st.container(key="ctx_result")
    first = "ctx_result" not in st.session_state and not st.session_state.get("ctx_autorun")
    with st.expander("Triple, variant and document", expanded=first, icon=":material/tune:"):
        left, right = st.columns([2, 1])
        rel = left.selectbox("Relation", ds.relations, key="ctx_rel", persist_state="session")
        qs = ds.queries_for(rel)
        by_id = {q.id: q for q in qs}
        if st.session_state.get("ctx_qid") not in by_id:
            st.session_state.ctx_qid = max(qs, key=lambda q: len(q.golds)).id
        left.selectbox("Query (S, R)", list(by_id), key="ctx_qid",
                       persist_state="session", format_func=lambda i: f"{by_id[i].subject}  ({i})")
        query = by_id[st.session_state.ctx_qid]
        target = right.selectbox("Target O_t", query.golds, key="ctx_target", persist_state="session")
        variant = right.selectbox("Variant", ctx.VARIANTS, key="ctx_variant",
                                  persist_state="session", help=ctx.VARIANT_HELP["real"])
        right.caption(ctx.VARIANT_HELP[variant])
        perms = right.number_input("Permutations", 1, 10, 3, key="ctx_perms",
                                   persist_state="session", disabled=variant != "knowledge-random")
        seed = right.number_input("Seed", 0, 10**6, 0, key="ctx_seed", persist_state="session")
        st.caption(f"Prompt: **{ui.md(query.text(model.mask_token))}** — golds: {ui.md(', '.join(query.golds))}")

        source = st.segmented_control("Document", SOURCES, key="ctx_src", persist_state="session", default="Paste")
        document, corpus = "", None
        if source == "Upload":
            up = st.file_uploader("Text file", type=["txt", "md"], key="ctx_upload")
            document = up.getvalue().decode("utf-8", errors="replace") if up else ""
        elif source == "Search a corpus":
            files = {p.name: p for p in ctx.corpus_files()}
            corpus = st.selectbox("Corpus", list(files) or ["(no corpus found)"], key="ctx_corpus",
                                  persist_state="session")
            if st.button("Find sentences with S and O_t", key="ctx_search") and corpus in files:
                with ui.guard("Search"):
                    st.session_state.ctx_hits = ctx.search_sentences(query.subject, target, files=[files[corpus]])
            hits = st.session_state.get("ctx_hits", [])
            if hits:
                chosen = st.multiselect("Sentences to use", hits, default=hits[:3], key="ctx_chosen",
                                        persist_state="session")
                document = " ".join(chosen)
            elif "ctx_hits" in st.session_state:
                st.info("No sentence in this corpus mentions both the subject and the target.")
        else:
            document = st.text_area("Document (e.g. a clinical note mentioning S and O_t)", key="ctx_doc",
                                    persist_state="session", height=150)

        pool = ds.candidates("relation", rel).names
        seg = None
        if document.strip():
            with ui.guard("Segmentation"):
                seg = ctx.segment_document(document, target, ctx.unique_names([*pool, *query.golds]))
                if variant == "negative-target":
                    seg = ctx.negative_target(seg, query.golds)
                pieces = ctx.document_pieces(seg, [*query.golds, target])
                marked = "".join(
                    ui.html_text(p["text"]) if p["role"] is None else
                    f"<mark style='background:{ROLE_COLOURS[p['role']]}22;border-bottom:2px solid "
                    f"{ROLE_COLOURS[p['role']]}'>{ui.html_text(p['text'])}<sup><b>S{p['segment']}</b></sup></mark>"
                    for p in pieces)
                # no blank line may end the HTML block: Markdown after it would render (an image named in the note)
                marked = marked.replace("\r", "").replace("\n", "<br>")
                st.markdown(f"<div style='line-height:1.9'>{marked}</div>", unsafe_allow_html=True)
                st.caption(f"{len(seg)} segments; blue = O_t, green = O_cor, red = O_incor; S-numbers give the order "
                           f"in which segments are added (left first, then alternating).")

        # the result on screen is the one computed from exactly these settings and this document
        doc_hash = documents.document_hash(document) if document.strip() else None
        inputs = {"model": model.id, "dataset": st.session_state.get(ui.DATASET_KEY), "device": ui.selected_device(),
                  "probe": probe, "query": query.id, "target": target, "variant": variant, "doc": doc_hash,
                  "perms": int(perms) if variant == "knowledge-random" else None, "seed": int(seed)}
        autorun = st.session_state.pop("ctx_autorun", False) and seg is not None
        if st.button("Run", type="primary", key="ctx_run", disabled=seg is None) or autorun:
            ui.forget("ctx_result")
            with ui.guard("Context run"), (bar := st.empty()).container():
                report = ui.progress("Ranking the pool", stop_key="ctx_stop")
                result = ctx.run_context(
                    model, query, target=target, pool=pool, document=document, variant=variant, probe=probe,
                    seed=int(seed), permutations=int(perms), progress=report)
                documents.save_document(document)  # the share link names it by its hash
                ui.keep("ctx_result", inputs, result)
            bar.empty()
    with result_box:  # above the settings
        if ui.stopped("ctx_stop"):
            st.info("Stopped: nothing was computed or cached. Press **Run** to start again.",
                    icon=":material/stop_circle:")
        result = ui.kept("ctx_result", inputs)
        view = views.ContextView(relation=rel, query=query.id, target=target, variant=variant, probe=probe,
                                 permutations=int(perms), seed=int(seed), doc=doc_hash if result else None,
                                 corpus=ctx.short_name(corpus) if corpus else None)
        if result is not None:
            shown.draw(result)
        ui.share_link(views.context_params(view), show=result is not None)

with dataset:
    dataset_mode.draw(model, ds, probe)
