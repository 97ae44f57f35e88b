"""AppTest of the Probe page on a tiny random MLM and the shipped demo set."""

from apptest_utils import errors, open_app


def test_probe_dataset_query_shows_topk_and_golds(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    assert errors(at) == []
    at.slider(key="pk_k").set_value(5)
    at.button[0].click().run()
    assert errors(at) == []
    top = at.dataframe[0].value
    assert list(top.columns) == ["rank", "entity", "score", "gold", "tokens"]
    assert len(top) == 5 and list(top["rank"]) == [1, 2, 3, 4, 5]
    assert top["score"].is_monotonic_decreasing
    assert "gold answer" in at.dataframe[1].value.columns
    assert at.query_params["query"] and at.query_params["dataset"] == "demo"


def test_mask_average_and_free_query(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    at.selectbox(key="pk_probe").set_value("mask_average").run()
    at.segmented_control(key="pk_source").set_value("Type a query").run()
    at.text_input(key="pk_text").set_value("Aspirin might treat [MASK].").run()
    at.button[0].click().run()
    assert errors(at) == []
    assert len(at.dataframe[0].value) == 10


def test_bad_inputs_give_messages_not_tracebacks(tiny_mlm_dir):
    at = open_app(model=str(tiny_mlm_dir))
    at.segmented_control(key="pk_source").set_value("Type a query").run()
    at.text_input(key="pk_text").set_value("no mask in this query").run()
    at.button[0].click().run()
    assert not at.exception
    assert any("[MASK]" in e.value for e in at.error)
    at.text_input(key="pk_text").set_value("").run()
    at.button[0].click().run()
    assert not at.exception and any("empty" in e.value for e in at.error)


def test_unknown_model_is_a_message(tmp_path):
    at = open_app(model=str(tmp_path / "no-such-model"))
    assert not at.exception
    assert any("does not exist" in e.value or "could not load" in e.value for e in at.error)


def test_shared_url_opens_query_and_runs(tiny_mlm_dir):
    first = open_app(model=str(tiny_mlm_dir))
    qid = first.session_state["pk_qid"]
    at = open_app(model=str(tiny_mlm_dir), query_params={"dataset": "demo", "query": qid})
    assert errors(at) == []
    assert at.session_state["pk_qid"] == qid
    assert len(at.dataframe[0].value) == 10
