"""AppTest of the Context page on tiny random models and the shipped demo set."""

import json

from apptest_utils import as_text, errors, open_app, rendered

from probekit.context import documents

NOTE = ("Mr B has hypertension and heart failure; he was started on lisinopril. Asthma was ruled out, "
        "and his gout is quiet.")
STATE = {"ctx_rel": "may_treat", "ctx_qid": "may_treat:0003"}
SETTINGS = "Triple, variant and document"
DATASET_SETTINGS = "Contexts, relations and variant"


def _frame(at, column):
    """The first table holding ``column`` (AppTest does not expose dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _kept(at, key="ctx_result"):
    """A result the page keeps with the inputs it was computed from (ui.keep)."""
    return at.session_state[key][1]


def _run_single(at):
    at.button(key="ctx_run").click().run()
    return at


def _settings(at):
    """The single-triple settings' expander."""
    return next(e for e in at.expander if e.label == SETTINGS)


def _first(at, match) -> int:
    """Where the first element ``match`` accepts comes in the page's order (top to bottom)."""
    return next(i for i, e in enumerate(at.main) if match(e))


def test_single_triple_curve_and_rc_table(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    assert errors(at) == []
    assert _settings(at).proto.expanded  # nothing to show yet: the settings are the page
    at.text_area(key="ctx_doc").set_value(NOTE).run()
    assert errors(at) == []
    assert any("<mark" in m.value and "S1" in m.value for m in at.markdown)  # highlighted, numbered segments
    _run_single(at)
    assert errors(at) == []
    rc = _frame(at, "rc_target")
    assert list(rc.step) == [0, 1, 2, 3, 4] and rc.added[1] == "Hypertension"
    assert list(rc.added_role[1:]) == ["target", "cor", "incor", "incor"]
    assert _kept(at).target == "Hypertension"
    assert len(at.get("plotly_chart")) == 1  # the rank-change curves
    u = _kept(at).ucm()
    assert u["n"] == 1  # one step adds an O_cor: UCM reads as a sentence with the shares
    assert any(f"Over 1 step that added a correct object (O_cor): Understand {100 * u['U']:.0f} %" in m.value
               for m in at.markdown)
    # the result comes first and the settings fold under it, so the curve is on the first screen at 1024×768 (it
    # sat at y≈1,681 under the settings and the note)
    at.run()
    assert not _settings(at).proto.expanded
    assert _first(at, lambda e: getattr(e, "type", None) == "plotly_chart") < _first(
        at, lambda e: getattr(e, "label", None) == SETTINGS)


def test_variants_and_mask_average(tiny_mlm_dir):
    at = open_app("context", model=str(tiny_mlm_dir), state=STATE)
    at.selectbox(key="ctx_probe").set_value("mask_average").run()
    at.text_area(key="ctx_doc").set_value(NOTE).run()
    at.selectbox(key="ctx_variant").set_value("knowledge-random").run()
    at.number_input(key="ctx_perms").set_value(2).run()
    _run_single(at)
    assert errors(at) == []
    assert len(_kept(at).runs) == 2
    at.selectbox(key="ctx_variant").set_value("negative-target").run()
    _run_single(at)
    assert errors(at) == []
    assert _kept(at).target == "Asthma"


def test_bad_document_is_a_message(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    at.text_area(key="ctx_doc").set_value("Nothing relevant here.").run()
    assert not at.exception
    assert any("does not occur" in e.value for e in at.error)
    assert at.button(key="ctx_run").disabled


def _finish(at, key="ctx_d_job"):
    job = at.session_state[key]
    assert job.wait(120), job.stage
    at.run()
    return job


def test_dataset_mode_runs_stores_and_compares(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir))
    at.radio(key="ctx_d_kind").set_value("kb").run()
    assert any("KB contexts: a fallback, not the paper's experiment" in str(r.options) for r in at.radio)
    at.multiselect(key="ctx_d_rels").set_value(["may_treat", "may_prevent"]).run()
    at.number_input(key="ctx_d_limit").set_value(3).run()
    at.button(key="ctx_d_run").click().run()
    assert _finish(at).status == "done"
    assert errors(at) == []
    res = _kept(at, "ctx_d_result")
    assert set(res.summary) == {"target", "negative"} and res.settings["n_queries"] <= 6
    acc = _frame(at, "context")
    assert set(acc.context) == {"none", "full"}
    # accuracy as a percentage: the table shows 100 x the stored fraction
    want = 100 * res.summary["target"]["acc"]["full"]["macro"]["acc@10"]
    assert acc[(acc["mode"] == "target") & (acc.context == "full")]["acc@10"].iloc[0] == want
    # each macro score's 95 % interval right after it, the value inside it, how it was made in the caption
    assert list(acc.columns[2:4]) == ["acc@1", "acc@1 [lo, hi]"] and "MRR [lo, hi]" in acc.columns
    for c in ("acc@1", "acc@10", "MRR"):
        for value, text in zip(acc[c], acc[f"{c} [lo, hi]"]):
            lo, hi = (float(x) for x in text.strip("[]").split(","))
            assert lo - 0.05 <= value <= hi + 0.05, (c, value, text)
    assert any("95 % intervals, in %; macro: bootstrap over queries within relations" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 2  # UCM_k bars of this run, UCM_m of the stored runs
    assert res.settings["run_id"] in list(_frame(at, "run_id").run_id)


CORPUS = ("metformin is first line for type 2 diabetes mellitus and helps polycystic ovary syndrome\n"
          "lisinopril lowers blood pressure in hypertension\n"
          "an unrelated line\n"
          "lisinopril for heart failure and hypertension\n")


def test_dataset_mode_on_real_corpus_contexts(tiny_encoder_dir, tmp_path, monkeypatch):
    (tmp_path / "pubmed_sents_no_punkt_10k_0").write_text(CORPUS)
    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(tmp_path))
    at = open_app("context", model=str(tiny_encoder_dir))
    assert at.radio(key="ctx_d_kind").value == "corpus"  # real contexts are the default
    assert at.multiselect(key="ctx_d_corpora").value == ["pubmed_0"]
    assert any("coverage is low" in c.value for c in at.caption)  # said before the run
    at.multiselect(key="ctx_d_rels").set_value(["may_treat"]).run()
    at.number_input(key="ctx_d_limit").set_value(0).run()
    at.button(key="ctx_d_run").click().run()
    assert _finish(at).status == "done"
    assert errors(at) == []
    res = _kept(at, "ctx_d_result")
    assert res.settings["variant"] == "real" and res.coverage["with_context"] == 4  # 2 metformin, 2 lisinopril
    assert any("Coverage" in m.value and f"of {res.coverage['triples']:,} triples" in m.value for m in at.markdown)
    assert any("UCM_m, target:" in c.value for c in at.caption)
    # the result above its settings, which fold once there is one (the bars sat below a 1024×768 screen's fold)
    at.run()
    [settings] = [e for e in at.expander if e.label == DATASET_SETTINGS]
    assert not settings.proto.expanded
    assert _first(at, lambda e: getattr(e, "key", None) == "ctx_d_ucm") < _first(at, lambda e: e is settings)
    at.selectbox(key="ctx_d_variant").set_value("knowledge-random").run()
    at.button(key="ctx_d_run").click().run()
    assert _finish(at).status == "done" and _kept(at, "ctx_d_result").settings["permutations"] == 3
    assert errors(at) == []


# A real 60-sentence note (about 48k characters would print one box per cut input)
LONG_NOTE = " ".join(f"On day {i} the patient with hypertension was reviewed, blood pressure and renal function were "
                     f"stable, no new complaints were recorded and the plan was unchanged." for i in range(60))
LONG_NOTE += " Lisinopril was continued for hypertension; heart failure was considered."


def test_real_note_one_summary_line_sentences_and_integer_axes(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    at.text_area(key="ctx_doc").set_value(LONG_NOTE).run()
    _run_single(at)
    assert errors(at) == []
    result = _kept(at)
    cut = [r for r in result.runs[0].results if r["cut"]]
    assert len(cut) > 1  # several inputs were cut ...
    warnings = [w.value for w in at.warning]
    assert warnings == result.notices and len(warnings) == 1  # ... one summary line for the run
    n = sum(len(run.results) for run in result.runs)
    assert warnings[0].startswith(f"{len(cut):,} of {n:,} inputs were cut to ") and "words dropped" in warnings[0]
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert fig["layout"]["xaxis"]["tickformat"] == "d"  # whole steps
    # whole ranks: ticks only at places (a log axis with tickformat "d" labelled 1.2, 1.5, 2 as "1, 1, 2")
    y = fig["layout"]["yaxis"]
    assert y["type"] == "log" and y["autorange"] == "reversed" and y["tickvals"][0] == 1
    assert all(float(v).is_integer() for v in y["tickvals"]) and y["ticktext"] == [f"{int(v):,}" for v in y["tickvals"]]
    assert len(set(y["ticktext"])) == len(y["ticktext"])
    # the glossary: one line for O_t, O_cor, O_incor, UCM_k, UCM_m and every variant
    glossary = " ".join(m.value for m in at.markdown)
    for term in ("**O_t**", "**O_cor**", "**O_incor**", "**UCM_k**", "**UCM_m**", "**real**", "**knowledge-only**",
                 "**knowledge-sorted**", "**knowledge-random**", "**negative-target**"):
        assert term in glossary, term


def test_ucm_undefined_reads_as_a_sentence(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    # only O_t and incorrect objects: no O_cor is ever added
    at.text_area(key="ctx_doc").set_value("Asthma and gout were ruled out; hypertension is treated.").run()
    _run_single(at)
    assert errors(at) == []
    shown = " ".join(m.value for m in at.markdown)
    assert "no correct object (o_cor) was added, so ucm is undefined for this context" in shown.lower()
    assert "nan" not in shown


def test_dataset_job_cancel_and_no_corpus(tiny_encoder_dir, tmp_path, monkeypatch):
    from probekit import jobs

    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(tmp_path / "none"))
    at = open_app("context", model=str(tiny_encoder_dir))
    assert at.radio(key="ctx_d_kind").value == "kb"  # no corpus file: the KB fallback is preselected
    at.radio(key="ctx_d_kind").set_value("corpus").run()
    assert any("No corpus file found" in i.value for i in at.info) and at.button(key="ctx_d_run").disabled
    at.radio(key="ctx_d_kind").set_value("kb").run()
    jobs._WORK.acquire()  # another job holds the machine
    try:
        at.button(key="ctx_d_run").click().run()
        assert at.button(key="ctx_d_run").disabled
        at.button(key="ctx_d_cancel").click().run()
    finally:
        jobs._WORK.release()
    assert _finish(at).status == "cancelled"
    assert any("cancelled" in w.value for w in at.warning) and "ctx_d_result" not in at.session_state


def test_result_shown_only_for_its_inputs(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    at.text_area(key="ctx_doc").set_value(NOTE).run()
    _run_single(at)
    assert len(at.get("plotly_chart")) == 1
    at.selectbox(key="ctx_variant").set_value("knowledge-only").run()
    assert len(at.get("plotly_chart")) == 0 and not any("rc_target" in d.value.columns for d in at.dataframe)
    assert any("settings changed" in c.value for c in at.caption)
    at.selectbox(key="ctx_variant").set_value("real").run()
    assert len(at.get("plotly_chart")) == 1  # the inputs it was computed from: shown again
    at.text_area(key="ctx_doc").set_value(NOTE + " Gout again.").run()  # another document
    assert len(at.get("plotly_chart")) == 0
    at.text_area(key="ctx_doc").set_value("Nothing relevant here.").run()  # an input error: no old curve
    assert len(at.get("plotly_chart")) == 0 and any("does not occur" in e.value for e in at.error)


def test_share_link_holds_triple_variant_and_document(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    at.selectbox(key="ctx_variant").set_value("knowledge-random").run()
    at.number_input(key="ctx_perms").set_value(2).run()
    at.text_area(key="ctx_doc").set_value(NOTE).run()
    _run_single(at)
    assert errors(at) == []
    qp = {k: at.query_params[k] for k in at.query_params}
    assert qp["query"] == "may_treat:0003" and qp["relation"] == "may_treat" and qp["target"] == "Hypertension"
    assert qp["variant"] == "knowledge-random" and qp["permutations"] == "2" and qp["probe"] == "retrieval"
    assert documents.load_document(qp["doc"]) == NOTE  # the document by its hash, stored on this server
    assert any("Share this view" in c.value for c in at.caption) and len(at.code) == 1
    again = open_app("context", model=str(tiny_encoder_dir), query_params={k: v for k, v in qp.items() if k != "model"})
    assert errors(again) == []
    assert again.text_area(key="ctx_doc").value == NOTE and again.selectbox(key="ctx_variant").value == \
        "knowledge-random"
    assert len(_kept(again).runs) == 2 and len(again.get("plotly_chart")) == 1  # run on opening
    # a document this server does not hold: said, not guessed
    gone = open_app("context", model=str(tiny_encoder_dir), query_params={**qp, "doc": "0" * 20})
    assert errors(gone) == [] and any("does not hold that document" in c.value for c in gone.caption)
    assert gone.text_area(key="ctx_doc").value == ""


def test_document_data_renders_as_text(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    at.text_area(key="ctx_doc").set_value(NOTE + "\n\n![x](http://e) <a href='http://e'>link</a>\n\nend").run()
    assert errors(at) == []
    html = " ".join(m.value for m in at.markdown if "<mark" in m.value)
    import markdown_it

    out = markdown_it.MarkdownIt("commonmark").render(html)
    assert "<img" not in out and "<a href" not in out and "![x](http://e)" in as_text(out)
    assert all("<img" not in h for h in rendered(at))


def test_dataset_result_hidden_when_settings_change(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir))
    at.radio(key="ctx_d_kind").set_value("kb").run()
    at.multiselect(key="ctx_d_rels").set_value(["may_treat"]).run()
    at.number_input(key="ctx_d_limit").set_value(2).run()
    at.button(key="ctx_d_run").click().run()
    assert _finish(at).status == "done"
    assert any("acc@10" in d.value.columns for d in at.dataframe)
    at.number_input(key="ctx_d_limit").set_value(3).run()
    assert not any("acc@10" in d.value.columns and "context" in d.value.columns for d in at.dataframe)
    at.number_input(key="ctx_d_limit").set_value(2).run()
    assert any("acc@10" in d.value.columns and "context" in d.value.columns for d in at.dataframe)
