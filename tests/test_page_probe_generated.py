"""AppTest of the Probe page with the open-vocabulary probes: mask_predict's decoding (its Explanation), generative."""

from apptest_utils import as_text, errors, open_app, rendered

from probekit import models
from probekit.probes import probes_for


def test_mask_predict_shows_decoding_per_step(toy_bert_dir):
    at = open_app(model=str(toy_bert_dir))
    assert at.selectbox(key="pk_probe").options == probes_for(models.load(str(toy_bert_dir), device="cpu"))
    at.selectbox(key="pk_probe").set_value("mask_predict").run()
    at.segmented_control(key="pk_source").set_value("Type a query").run()
    at.selectbox(key="pk_opt_decoding").set_value("confidence+order").run()
    at.number_input(key="pk_opt_beam").set_value(2).run()
    at.number_input(key="pk_opt_n_masks").set_value(3).run()
    at.slider(key="pk_k").set_value(4).run()
    # the typed query is a form: its values are sent with the Probe button (or Enter), not before
    at.text_input(key="pk_text").set_value("metformin might treat [MASK].")
    at.text_input(key="pk_golds").set_value("no such answer")
    at.button(key="pk_submit").click().run()
    assert errors(at) == []
    top = at.dataframe[0].value
    assert len(top) == 4 and top["score"].is_monotonic_decreasing
    golds = next(d.value for d in at.dataframe if "gold answer" in d.value.columns)
    assert list(golds["status"]) == ["not generated"] and golds["rank"].isna().all()
    trace = at.dataframe[-1].value
    n = int(at.segmented_control(key="pk_explain_view").value)
    assert n in (1, 2, 3) and list(trace.columns[:2]) == ["step", "phase"]
    assert [c for c in trace.columns if c.startswith("slot")] == [f"slot {j}" for j in range(1, n + 1)]
    assert list(trace["phase"][:n]) == ["initial"] * n  # confidence fills one slot per step
    assert "·" in trace["slot 1"][0]  # top tokens with probabilities
    at.segmented_control(key="pk_explain_view").set_value("3").run()
    trace = at.dataframe[-1].value
    assert [c for c in trace.columns if c.startswith("slot")] == ["slot 1", "slot 2", "slot 3"]
    assert "[MASK]" not in trace["answer so far"].iloc[-1]


def test_generative_on_t5(tiny_t5_dir):
    at = open_app(model=str(tiny_t5_dir))
    assert at.selectbox(key="pk_probe").options == probes_for(models.load(str(tiny_t5_dir), device="cpu"))
    at.selectbox(key="pk_probe").set_value("generative").run()
    at.number_input(key="pk_opt_max_new_tokens").set_value(5).run()
    at.slider(key="pk_k").set_value(3)
    at.button(key="pk_run").click().run()
    assert errors(at) == []
    assert 1 <= len(at.dataframe[0].value) <= 3
    assert any("<extra_id_0>" in as_text(h) for h in rendered(at))  # the sentinel shown as text


def _finish(at, key="bm_job"):
    job = at.session_state[key]
    assert job.wait(300), job.stage
    at.run()
    return job


def test_benchmark_and_compare_pages_run_generative(tiny_t5_dir):
    """The Benchmark page lists the seq2seq probe for a T5, runs it in the background and stores every option;
    the Compare page reads the stored run like any other."""
    at = open_app("benchmark", model=str(tiny_t5_dir))
    assert at.selectbox(key="bm_probe").options == probes_for(models.load(str(tiny_t5_dir), device="cpu"))
    at.selectbox(key="bm_probe").set_value("generative").run()
    at.button(key="bm_start").click().run()
    job = _finish(at)
    assert job.status == "done", job.error
    assert errors(at) == []
    table = next(d.value for d in at.dataframe if "full acc@1" in d.value.columns)
    assert 0 <= table["full acc@10"][0] <= 100
    from probekit.bench import runs

    run = runs.get_run(job.result[0])
    assert run["probe"] == "generative" and "max_new_tokens" in str(run["options"])
    at = open_app("compare", model=str(tiny_t5_dir))
    assert errors(at) == []
