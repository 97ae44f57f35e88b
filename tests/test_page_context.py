"""AppTest of the Context page on tiny random models and the shipped demo set."""

from apptest_utils import errors, open_app

NOTE = ("Mr B has hypertension and heart failure; he was started on lisinopril. Asthma was ruled out, "
        "and his gout is quiet.")
STATE = {"ctx_rel": "may_treat", "ctx_qid": "may_treat:0003"}


def _frame(at, column):
    """The first table holding ``column`` (AppTest does not expose dataframe keys)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def _run_single(at):
    at.button(key="ctx_run").click().run()
    return at


def test_single_triple_curve_and_rc_table(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    assert errors(at) == []
    at.text_area(key="ctx_doc").set_value(NOTE).run()
    assert errors(at) == []
    assert any("<mark" in m.value and "S1" in m.value for m in at.markdown)  # highlighted, numbered segments
    _run_single(at)
    assert errors(at) == []
    rc = _frame(at, "rc_target")
    assert list(rc.step) == [0, 1, 2, 3, 4] and rc.added[1] == "Hypertension"
    assert list(rc.added_role[1:]) == ["target", "cor", "incor", "incor"]
    assert at.session_state["ctx_result"].target == "Hypertension"
    assert len(at.get("plotly_chart")) == 1  # the rank-change curves
    assert any("U " in m.value and "O_cor steps" in m.value for m in at.markdown)


def test_variants_and_mask_average(tiny_mlm_dir):
    at = open_app("context", model=str(tiny_mlm_dir), state=STATE)
    at.selectbox(key="ctx_probe").set_value("mask_average").run()
    at.text_area(key="ctx_doc").set_value(NOTE).run()
    at.selectbox(key="ctx_variant").set_value("knowledge-random").run()
    at.number_input(key="ctx_perms").set_value(2).run()
    _run_single(at)
    assert errors(at) == []
    assert len(at.session_state["ctx_result"].runs) == 2
    at.selectbox(key="ctx_variant").set_value("negative-target").run()
    _run_single(at)
    assert errors(at) == []
    assert at.session_state["ctx_result"].target == "Asthma"


def test_bad_document_is_a_message(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir), state=STATE)
    at.text_area(key="ctx_doc").set_value("Nothing relevant here.").run()
    assert not at.exception
    assert any("does not occur" in e.value for e in at.error)
    assert at.button(key="ctx_run").disabled


def test_dataset_mode_runs_stores_and_compares(tiny_encoder_dir):
    at = open_app("context", model=str(tiny_encoder_dir))
    at.multiselect(key="ctx_d_rels").set_value(["may_treat", "may_prevent"]).run()
    at.number_input(key="ctx_d_limit").set_value(3).run()
    at.button(key="ctx_d_run").click().run()
    assert errors(at) == []
    res = at.session_state["ctx_d_result"]
    assert set(res.summary) == {"target", "negative"} and res.settings["n_queries"] <= 6
    acc = _frame(at, "context")
    assert set(acc.context) == {"none", "full"}
    assert len(at.get("plotly_chart")) == 2  # UCM_k bars of this run, UCM_m of the stored runs
    assert at.session_state["ctx_d_saved"] in list(_frame(at, "run_id").run_id)
