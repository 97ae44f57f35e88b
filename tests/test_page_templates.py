"""AppTest of the Templates vs free text page: stored runs of two models on a template and a template-free dataset
-> runs table, slope chart and rankings, perplexity scatter and Pearson table, prediction-frequency chart, flags."""

import json

import pytest
from apptest_utils import errors, open_app
from conftest import save_tiny_bert, shared_paths, use_store

from probekit import model_registry, models
from probekit.bench import runs
from probekit.datasets import freetext, load_dataset
from probekit.probes import get_probe
from probekit.templates import compare, stored

FREE = """prompt,object,subject,relation
metformin lowers blood glucose in [MASK],type 2 diabetes mellitus,metformin,may_treat
amoxicillin is first line for [MASK] in children,acute otitis media,amoxicillin,may_treat
aspirin lowers the risk of [MASK] after a first event,myocardial infarction,aspirin,may_prevent
"""


def _frame(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


@pytest.fixture(scope="module")
def _stored(tiny_mlm_dir, tmp_path_factory):
    """Two models x (template-based demo, template-free) runs with their perplexities, stored once per module."""
    other = save_tiny_bert(tmp_path_factory.mktemp("mlm_b"), mlm=True, seed=7)
    demo, free = load_dataset("demo"), freetext.parse(FREE, label="free.csv", name="free")
    ids = []
    with shared_paths(tmp_path_factory.mktemp("tpl_store")) as base:
        for path in (tiny_mlm_dir, other):
            model = models.load(str(path), device="cpu")
            for ds in (demo, free):
                rankings = get_probe("mask_average").rank(model, ds.queries, ds.candidates(), k=10)
                ids.append(runs.save_run(rankings, model=model, dataset=ds, probe="mask_average", k=10))
                stored.score_run(ids[-1], model, batch_size=128)
    return base, ids


@pytest.fixture
def stored_runs(_stored):
    """The four run ids, in this test's own copy of the store."""
    base, ids = _stored
    use_store(base)
    return ids


def test_needs_runs_then_a_selection(tiny_mlm_dir, stored_runs):
    at = open_app("templates", model=str(tiny_mlm_dir))
    assert errors(at) == []
    assert any("Pick the runs to compare" in i.value for i in at.info)


def test_compare_two_models_on_both_kinds(tiny_mlm_dir, stored_runs):
    at = open_app("templates", model=str(tiny_mlm_dir), state={"tpl_sel": stored_runs})
    assert errors(at) == []
    expected = compare.compare_runs(stored_runs, metric="acc@1")
    table = _frame(at, "kind")
    assert sorted(table.run_id) == sorted(stored_runs)
    assert list(table["acc@1"]) == list(expected.runs["acc@1"])
    # the runs' metrics beside the model (acc@10 hid behind a sideways scroll at 1280 px), the table before the
    # folded settings (it sat under them, below a 1024×768 screen's fold)
    assert list(table.columns[:6]) == ["model", "kind", "acc@1", "acc@5", "acc@10", "MRR"]
    [settings] = [e for e in at.expander if e.label.startswith("Ranking metric")]
    order = list(at.main)
    assert not settings.proto.expanded and order.index(at.main.get_by_key("tpl_result")) < order.index(settings)
    # the slope chart's labels fit beside it: names cut to a few words (the folders here are long), and a margin
    # as wide as the longest label at plotly's ~7 px a character, where the labels are drawn (they were clipped to
    # the plot: "3.9)", "(22.")
    slope = json.loads(at.get("plotly_chart")[0].proto.spec)
    labels = [t for trace in slope["data"] for t in trace["text"]]
    assert max(map(len, labels)) <= 30 and all("…" in t for t in labels)  # 16 characters of name, score, rank
    assert not slope["layout"]["yaxis"]["showticklabels"]  # the ranks are in the labels: no ticks under them
    assert min(slope["layout"]["margin"]["l"], slope["layout"]["margin"]["r"]) >= 7 * max(map(len, labels))
    assert all(trace["cliponaxis"] is False for trace in slope["data"])  # drawn in the margins, not cut at the axes
    assert len(_frame(at, "rank change")) == 2
    assert list(_frame(at, "pearson_r").kind) == ["template-based", "template-free"]
    assert len(at.get("plotly_chart")) == 3  # slope chart, perplexity scatter, frequency bars
    assert expected.flags  # three tiny models answer the same few names: flagged
    flagged = _frame(at, "flagged")  # one table of flags, data shown as text (a dataframe renders no markup)
    assert list(flagged.flagged) == expected.flags and len(at.warning) == 1
    assert any("Kendall's τ-b undefined" in c.value for c in at.caption)  # two models: tau is undefined
    held = _frame(at, "verdict")  # does the ranking hold: one pair of models, a verdict from prompt resampling
    assert list(held.verdict) == list(expected.stability["pairs"].verdict) and len(held) == 1
    at.segmented_control(key="tpl_metric").set_value("MRR").run()
    assert errors(at) == [] and "MRR" in _frame(at, "kind").columns
    assert any("ranked by macro MRR" in c.value for c in at.caption)
    at.selectbox(key="tpl_freq_run").set_value(list(expected.frequency)[1]).run()
    assert errors(at) == []


def test_two_runs_of_one_model_and_kind_is_a_message(tiny_mlm_dir, stored_runs):
    model = models.load(str(tiny_mlm_dir), device="cpu")
    demo = load_dataset("demo")
    again = runs.save_run(get_probe("mask_average").rank(model, demo.queries[:5], demo.candidates(), k=10),
                          model=model, dataset=demo, probe="mask_average", k=10)
    at = open_app("templates", model=str(tiny_mlm_dir), state={"tpl_sel": [stored_runs[0], again]})
    assert [e.value for e in at.exception] == []
    assert any("has two template-based runs" in e.value for e in at.error)


def test_score_with_the_sidebar_model(tiny_mlm_dir, tiny_encoder_dir):
    model = models.load(str(tiny_mlm_dir), device="cpu")
    ds = freetext.parse(FREE, label="free.csv", name="free")
    rid = runs.save_run(get_probe("mask_average").rank(model, ds.queries, ds.candidates(), k=3), model=model,
                        dataset=ds, probe="mask_average", k=3)
    at = open_app("templates", model=str(tiny_mlm_dir), state={"tpl_sel": [rid], "tpl_score_on": True})
    assert errors(at) == [] and any("No stored perplexities" in i.value for i in at.info)
    at.button(key="tpl_score").click().run()
    assert errors(at) == []
    assert len(stored.load_scores([rid])) == len(ds)
    assert len(at.get("plotly_chart")) == 2  # now with the scatter (no rankings: one kind only)


def test_a_rewired_checkpoint_shows_by_its_name(tiny_mlm_dir, stored_runs, monkeypatch):
    """A rewired checkpoint is named as in every model picker ("… rewired on pubmed_0, step 3"), never by its
    folder, in the runs table and the ranking chart."""
    name = "tiny rewired on pubmed_0, step 3"
    monkeypatch.setattr(model_registry, "list_checkpoints", lambda: [{"path": str(tiny_mlm_dir), "label": name}])
    at = open_app("templates", model=str(tiny_mlm_dir), state={"tpl_sel": stored_runs})
    assert errors(at) == []
    shown = _frame(at, "kind")
    assert name in set(shown.model) and str(tiny_mlm_dir) not in set(shown.model)
    slope = at.get("plotly_chart")[0].proto.spec
    assert name in slope and str(tiny_mlm_dir) not in slope


def test_subject_kept_is_said_where_the_rankings_are(tiny_mlm_dir, stored_runs):
    """Runs stored with each query's subject among the candidates (the default) are named where their accuracy is
    shown, with how to get the other figure: tied rankings at 0.00 are explained on the page."""
    at = open_app("templates", model=str(tiny_mlm_dir), state={"tpl_sel": stored_runs})
    assert errors(at) == []
    note = [c.value for c in at.caption if "Subject kept among the candidates" in c.value]
    assert len(note) == 1 and "Exclude subject" in note[0]
