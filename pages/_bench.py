"""Benchmark page pieces: opening a shared link, and opening a run's query on the Probe page."""

import streamlit as st

from pages import _ui as ui
from probekit import models
from probekit.metrics.registry import metric_from_params
from probekit.probes import get_probe


def restore_link() -> None:
    """Once per browser session: a shared link (``?runs=…&k=…&set=…&relation=…``) selects its runs and view."""
    if st.session_state.get("_bm_link"):
        return
    st.session_state._bm_link = True
    qp = st.query_params
    if qp.get("runs"):
        st.session_state.bm_sel = qp["runs"].split(",")
    if qp.get("set"):
        st.session_state.bm_show_set = qp["set"]
    if metric_from_params(qp):
        st.session_state.bm_show_metric = metric_from_params(qp)
    if qp.get("relation"):  # the drill-down's relation (checked against the run's once it is loaded)
        st.session_state.bm_link_rel = qp["relation"]


def open_on_probe(meta: dict, relation: str, query_id: str) -> None:
    """Callback: point the sidebar and the Probe page at this query, then switch pages (in the script)."""
    known = [m for m, _ in models.available_models()]
    st.session_state[ui.MODEL_KEY] = meta["model"] if meta["model"] in known else ui.CUSTOM
    if meta["model"] not in known:
        st.session_state[ui.CUSTOM_KEY] = meta["model"]
    st.session_state[ui.DATASET_KEY] = meta["dataset_spec"]
    st.session_state.update(pk_source="From the dataset", pk_rel=relation, pk_qid=query_id, pk_autorun=True,
                            pk_probe=meta["probe"], pk_vocab=meta["vocab"])
    # the Probe page opens with the run's own options, so it shows what the run stored
    opts = dict(meta.get("options") or {})
    opts.setdefault("exclude_subject", False)
    st.session_state.update(ui.option_state(get_probe(meta["probe"]), opts, key="pk_opt"))
    st.session_state.bm_goto = {"model": meta["model"], "dataset": meta["dataset_spec"], "relation": relation,
                                "query": query_id}


def subject_note(loaded: dict, *, other: str = "tick *Exclude subject* above and press Start") -> None:
    """Where the accuracy is shown, which runs kept each query's own subject among the candidates (the papers'
    setting, and the stored runs' default): an untuned encoder ranks the subject itself first, so such a run's
    acc@1 can read 0.00 while the Probe page, which leaves the subject out, shows the right answer first.
    ``loaded``: label -> anything with the run's ``meta`` (a benchmark run, a layer sweep); ``other``: how this
    page gets the other figure."""
    kept = [label for label, run in loaded.items() if not (run.meta.get("options") or {}).get("exclude_subject")]
    left = [label for label in loaded if label not in kept]
    if kept:
        st.caption(f"Subject kept among the candidates (as the papers do) in: {ui.md(', '.join(kept))}. An untuned "
                   f"encoder often ranks a query's own subject first, so acc@1 can read 0; {other} for the other "
                   "figure" + (f" (left out in: {ui.md(', '.join(left))})." if left else "."))


def accuracy_columns(table, *, first: str, metrics) -> tuple[list[str], dict]:
    """The accuracy table's columns for the screen, and their widths: run and average, then metric by metric (the
    metric picked below first, its subsets side by side, each value's ``[lo, hi]`` interval column, when the table
    has one, right after it), the query counts last; each column as wide as its header. In the stored order (subset
    by subset) acc@10 hid behind a sideways scroll at 1280 px."""
    order = [first, *[m for m in metrics if m != first]]
    numbers = [c for m in order for c in table.columns if c.split(" ", 1)[-1] == m]
    brackets = [f"{c} [lo, hi]" for c in numbers if f"{c} [lo, hi]" in table.columns]  # each right after its value
    shown = [x for c in numbers for x in (c, f"{c} [lo, hi]") if x == c or x in brackets]
    lead = [c for c in ("run", "average") if c in table.columns]
    rest = [c for c in table.columns if c not in lead and c not in shown and c != "counting"]
    config = {"run": st.column_config.TextColumn(width="medium"),
              **{c: st.column_config.NumberColumn(width=16 + 8 * len(c)) for c in numbers},
              # "[lo, hi]" under its header, right after the value it bounds: both subsets' fit at 1280 px
              **{c: st.column_config.TextColumn("[lo, hi]", help=f"{c}: 95 % interval, in %", width=112)
                 for c in brackets}}
    return [*lead, *shown, *rest], config
