"""AppTest of the Probe page on a tiny random MLM and the shipped demo set (Enter runs a typed query,
results only for the inputs shown, full share links, gold table, one option vocabulary, data as text)."""

import json
import re

from apptest_utils import as_text, errors, open_app, rendered

TYPED = "Type a query"


def _typed(at, text, golds=""):
    at.segmented_control(key="pk_source").set_value(TYPED).run()
    at.text_input(key="pk_text").set_value(text)
    at.text_input(key="pk_golds").set_value(golds)
    return at.button(key="pk_submit").click().run()


def _top(at):
    return next(d.value for d in at.dataframe if "entity" in d.value.columns)


def _golds(at):
    return next(d.value for d in at.dataframe if "gold answer" in d.value.columns)


def test_probe_dataset_query_shows_topk_and_golds(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    assert errors(at) == []
    assert any("what to try first" in as_text(h).lower() for h in rendered(at))  # the first-visit paragraph
    at.slider(key="pk_k").set_value(5)
    at.button(key="pk_run").click().run()
    assert errors(at) == []
    top = _top(at)
    assert list(top.columns) == ["rank", "entity", "score", "gold", "tokens"]
    assert len(top) == 5 and list(top["rank"]) == [1, 2, 3, 4, 5]
    assert top["score"].is_monotonic_decreasing
    golds = _golds(at)
    assert list(golds.columns) == ["gold answer", "rank", "status"]
    assert str(golds["rank"].dtype) == "Int64"  # whole numbers only: no text in the rank column (Arrow error)
    result = at.session_state["pk_result"][1][0]
    for rank, status in zip(golds["rank"], golds["status"]):
        assert (status == "not a candidate") if rank is None or str(rank) == "<NA>" else \
            status.startswith("hit" if rank <= result.k else "no hit")
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [t["name"] for t in fig["data"]] == ["gold answer", "other candidate"] and fig["layout"]["showlegend"]
    assert fig["data"][0]["marker"]["color"] == "#2e7d32"  # green = gold answer, said by the legend
    assert at.query_params["query"] and at.query_params["dataset"] == "demo"
    assert any("Share this view" in c.value for c in at.caption) and len(at.code) == 1


def test_enter_in_the_query_box_runs_a_typed_query(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    at.selectbox(key="pk_probe").set_value("mask_average").run()
    _typed(at, "Aspirin might treat [MASK].", golds="Headache; no such disease")
    assert errors(at) == []
    assert len(_top(at)) == 10
    golds = _golds(at)
    assert list(golds["gold answer"]) == ["Headache", "no such disease"]
    assert golds["status"].iloc[1] == "not a candidate" and golds["rank"].isna().iloc[1]
    # the link holds the typed query and its golds, and no stale relation= or query=
    qp = at.query_params
    assert qp["source"] == "text" and qp["text"] == "Aspirin might treat [MASK]."
    assert qp["golds"] == "Headache;no such disease" and qp["probe"] == "mask_average"
    assert "relation" not in qp and "query" not in qp


def test_bad_inputs_give_messages_and_hide_the_previous_result(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    at.button(key="pk_run").click().run()
    assert len(at.dataframe) >= 1
    _typed(at, "no mask in this query")
    assert not at.exception
    assert any("[MASK]" in e.value for e in at.error)
    assert not any("entity" in d.value.columns for d in at.dataframe)  # no old table under the new controls
    _typed(at, "")
    assert not at.exception and any("empty" in e.value for e in at.error)


def test_result_shown_only_while_it_matches_the_inputs(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    at.button(key="pk_run").click().run()
    assert len(_top(at)) == 10
    at.slider(key="pk_k").set_value(4).run()
    assert not any("entity" in d.value.columns for d in at.dataframe)
    assert any("settings changed" in c.value for c in at.caption)
    at.slider(key="pk_k").set_value(10).run()  # back to the inputs it was computed from: shown again
    assert len(_top(at)) == 10
    rels = at.selectbox(key="pk_rel").options
    at.selectbox(key="pk_rel").set_value(rels[-1]).run()
    assert not any("entity" in d.value.columns for d in at.dataframe)


def test_unknown_model_is_a_message(tmp_path):
    at = open_app(model=str(tmp_path / "no-such-model"))
    assert not at.exception
    assert any("does not exist" in e.value or "could not load" in e.value for e in at.error)


def test_shared_url_opens_query_and_runs(tiny_mlm_dir, monkeypatch):
    """A link's values go into the widgets' state; no widget then also gets a default of its own (Streamlit logs
    "created with a default value but also had its value set via the Session State API" once per server)."""
    import logging

    import streamlit.elements.lib.policies as policies

    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    logging.getLogger(policies.__name__).addHandler(handler)
    try:
        first = open_app(model=str(tiny_mlm_dir))
        qid = first.session_state["pk_qid"]
        at = open_app(model=str(tiny_mlm_dir), query_params={"dataset": "demo", "query": qid, "k": "7"})
    finally:
        logging.getLogger(policies.__name__).removeHandler(handler)
    assert errors(at) == []
    assert at.session_state["pk_qid"] == qid
    assert len(_top(at)) == 7
    assert not [m for m in logged if "Session State" in m]


def test_share_link_holds_the_whole_view_and_reopens_it(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    rel = at.selectbox(key="pk_rel").options[-1]
    at.selectbox(key="pk_rel").set_value(rel).run()
    at.radio(key="pk_vocab").set_value("tails")
    at.slider(key="pk_k").set_value(6)
    at.selectbox(key="pk_opt_pooling").set_value("mean")
    at.number_input(key="pk_opt_layer").set_value(1)
    at.selectbox(key="pk_opt_similarity").set_value("dot")
    at.checkbox(key="pk_opt_exclude_subject").uncheck()
    at.button(key="pk_run").click().run()
    assert errors(at) == []
    link = dict(at.query_params.to_dict()) if hasattr(at.query_params, "to_dict") else \
        {k: at.query_params[k] for k in at.query_params}
    assert link["relation"] == rel and link["vocab"] == "tails" and link["k"] == "6" and link["probe"] == "retrieval"
    assert link["pooling"] == "mean" and link["layer"] == "1" and link["similarity"] == "dot"
    assert link["exclude_subject"] == "false" and "text" not in link
    again = open_app(model=str(tiny_mlm_dir), query_params={k: v for k, v in link.items() if k != "model"})
    assert errors(again) == []
    state = again.session_state
    assert state["pk_rel"] == rel and state["pk_vocab"] == "tails" and state["pk_k"] == 6
    assert state["pk_opt_pooling"] == "mean" and state["pk_opt_layer"] == 1 and state["pk_opt_exclude_subject"] is False
    assert list(_top(again).entity) == list(_top(at).entity)  # the same result, run on opening


def test_bad_link_values_are_a_note_not_an_error(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir), query_params={"source": "text", "text": "A treats [MASK].", "k": "abc",
                                                         "layer": "-3", "relation": "may_treat"})
    assert errors(at) == []
    assert any("could not be read" in c.value and "k" in c.value and "layer" in c.value for c in at.caption)
    assert "relation" not in at.query_params and at.query_params["text"] == "A treats [MASK]."


def test_one_option_vocabulary(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    pooling = at.selectbox(key="pk_opt_pooling")
    assert pooling.options[pooling.index] == "model's default"
    options = next(e for e in at.expander if e.label == "Candidates, k and probe options")  # one expander
    assert {w.key for w in options.selectbox} >= {"pk_opt_pooling", "pk_opt_similarity", "pk_opt_preset"}
    assert at.number_input(key="pk_opt_layer").proto.placeholder == "last layer"


def test_data_renders_as_text(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    _typed(at, "![x](http://e) might treat [MASK].", golds="![y](http://e)")
    assert errors(at) == []
    html = " ".join(rendered(at))
    assert "<img" not in html and "<a " not in html
    assert any("![x](http://e) might treat" in as_text(h) for h in rendered(at))
    assert "![y](http://e)" in list(_golds(at)["gold answer"])


def test_a_long_paste_stays_in_the_box_and_says_it_is_too_long(tiny_mlm_dir):
    """A query box with a character limit drops a longer paste whole (the box empties, then "the query is
    empty"): the box takes what was pasted and the probe says how long it is and the limit, as a link does."""
    from probekit.types import MAX_QUERY_CHARS

    at = open_app(model=str(tiny_mlm_dir))
    at.segmented_control(key="pk_source").set_value(TYPED).run()
    assert not at.text_input(key="pk_text").proto.max_chars  # no limit in the box itself
    pasted = "Metformin might treat [MASK]. " + "x" * 1500
    _typed(at, pasted)
    assert at.text_input(key="pk_text").value == pasted
    assert [e.value for e in at.error] == [
        f"the query is too long ({len(pasted.strip()):,} characters; at most {MAX_QUERY_CHARS:,})"]



def test_a_link_to_an_unknown_query_says_so_and_probes_nothing(tiny_mlm_dir):
    """A share link whose query id is not in the dataset never shows another query's result in silence."""
    at = open_app(model=str(tiny_mlm_dir), query_params={"relation": "may_treat", "query": "may_treat:9999"})
    assert not at.exception
    assert any("may_treat:9999" in w.value and "not in" in w.value for w in at.warning)
    assert not any("entity" in d.value.columns for d in at.dataframe)  # no result of another query


def test_a_link_whose_text_has_no_mask_says_so_on_every_run(tiny_mlm_dir):
    """A share link with a typed query and no [MASK] shows the box's message, however the page is reached (the
    app's first page, or the link opening the Probe page after another run of the app) and on later reruns;
    it never shows nothing."""
    for page in (None, "probe"):
        at = open_app(page, model=str(tiny_mlm_dir), query_params={"text": "metformin treats diabetes",
                                                                   "model": "default", "dataset": "demo"})
        assert not at.exception
        assert any("[MASK]" in e for e in errors(at)), (page, errors(at))
        at.run()
        assert any("[MASK]" in e for e in errors(at)), (page, errors(at))
    at.text_input(key="pk_text").set_value("metformin treats [MASK].")
    at.button(key="pk_submit").click().run()
    assert errors(at) == [] and any("entity" in d.value.columns for d in at.dataframe)


def test_a_top_k_from_an_approximate_index_says_so(tmp_path, tiny_encoder, tiny_encoder_dir):
    """The rule (probekit.types.Ranking.search): where an approximate index served the top-k, the result says
    which index, its parameters and its recall measured against exact search; an exact vocabulary says nothing."""
    from probekit.vocab.build import build
    from probekit.vocab.sources import open_source

    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"term {i} of {j}" for i in range(40) for j in ("a", "b")) + "\n")
    build("flat", open_source("names", names), model=tiny_encoder, shard_size=32, index="ivf-flat",
          index_params={"nlist": 4, "nprobe": 1, "target_recall": None})
    build("exact", open_source("names", names), model=tiny_encoder, shard_size=32)
    shown = {}
    for vocab in ("flat", "exact"):
        at = open_app(model=str(tiny_encoder_dir), query_params={"vocab": vocab})
        at.button(key="pk_run").click().run()
        assert errors(at) == [] and len(_top(at)) == 10
        seen = [re.sub(r"\\(.)", r"\1", c.value).replace("\u2060", "") for c in at.caption]  # as read
        shown[vocab] = [c for c in seen if "approximate top-k" in c]
    assert len(shown["flat"]) == 1 and shown["flat"][0].startswith("approximate top-k: ivf-flat (")
    assert "recall@10" in shown["flat"][0] and shown["exact"] == []


def test_every_probe_side_by_side_and_the_link_keeps_the_mode(tiny_mlm_dir):
    """"Every probe" runs each probe the model supports on the query: one top-k table per probe (the tiny MLM has
    an MLM head, so retrieval, both mask probes and likelihood), the likelihood probe's per-token table beside its
    own, a summary per probe, the probes that could not run named; a share link reopens the same view."""
    from probekit import models
    from probekit.probes import PROBES, probes_for

    usable = probes_for(models.load(str(tiny_mlm_dir), device="cpu"))
    at = open_app(model=str(tiny_mlm_dir))
    at.slider(key="pk_k").set_value(3)
    at.toggle(key="pk_every").set_value(True)
    at.button(key="pk_run").click().run()
    assert errors(at) == []
    tops = [d.value for d in at.dataframe if list(d.value.columns) == ["rank", "entity", "score", "gold"]]
    assert len(tops) == len(usable) >= 4 and all(len(t) == 3 for t in tops)
    summary = next(d.value for d in at.dataframe if "#1 answer" in d.value.columns)
    assert list(summary["probe"]) == usable
    result = at.session_state["pk_result"][1][0]
    assert list(summary["gold rank"].astype(object).where(summary["gold rank"].notna(), None)) == [
        r.gold_rank for r in result.runs]
    assert result.run("likelihood").vocab == "relation" and result.run("retrieval").vocab == "heads+tails"
    assert any("token" in " ".join(map(str, d.value.columns)).lower() for d in at.dataframe)  # likelihood's table
    skipped = [n for n in PROBES if n not in usable]
    assert all(any(f"Not run: probe {n!r} needs" in c.value.replace("\\", "") for c in at.caption) for n in skipped)
    link = {k: at.query_params[k] for k in at.query_params}
    assert link["every"] == "true" and link["k"] == "3"
    again = open_app(model=str(tiny_mlm_dir), query_params={k: v for k, v in link.items() if k != "model"})
    assert errors(again) == [] and again.session_state["pk_every"] is True
    assert [list(d.value.entity) for d in again.dataframe if "entity" in d.value.columns] == [
        list(t.entity) for t in tops]
    again.toggle(key="pk_every").set_value(False).run()  # back to one probe: the one-probe link holds no every=
    again.button(key="pk_run").click().run()
    assert "every" not in again.query_params and len(_top(again)) == 3


def test_a_link_to_a_dataset_this_server_lacks_says_so(tiny_mlm_dir):
    """A link naming a dataset not on this server opens on the default one and says so (it used to show demo in
    silence, then "query … is not in demo-full"), until another dataset is picked."""
    at = open_app(model=str(tiny_mlm_dir), query_params={"dataset": "nosuchset", "relation": "may_treat"})
    assert not at.exception
    assert [w.value for w in at.warning if "nosuchset" in w.value and "not on this server" in w.value]
    at.run()
    assert [w.value for w in at.warning if "nosuchset" in w.value]  # still said on the next click
    at.selectbox(key="pk_dataset").set_value("__upload__").run()
    assert not [w for w in at.warning if "nosuchset" in w.value]
