"""AppTest of the Corpora page: index the (redirected) elicit corpora against the demo dataset in the background,
see the counts and coverage, look up real contexts, and be told when the corpus changed since."""

from __future__ import annotations

import pytest
from apptest_utils import errors, open_app

from probekit import corpus as cp
from probekit.datasets import load_dataset

SENTENCES = ["metformin is a first line drug for type 2 diabetes", "aspirin can prevent myocardial infarction",
             "the weather was fine", "metformin lowers glucose"]


@pytest.fixture
def elicit(tmp_path, monkeypatch):
    folder = tmp_path / "elicit"
    folder.mkdir()
    (folder / "pubmed_sents_no_punkt_10k_0").write_text("\n".join(SENTENCES) + "\n")
    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(folder))
    return folder


def test_index_stats_contexts_and_stale(elicit):
    at = open_app("corpora")
    assert errors(at) == []
    assert any("No corpus is indexed yet" in i.value for i in at.info)
    at.button(key="cp_start").click().run()
    job = at.session_state["cp_job"]
    assert job.wait(120) and job.status == "done", job.error
    at.run()
    assert errors(at) == []
    assert any(f"Indexed as `{job.result}`" in s.value for s in at.success)
    metrics = {m.label: m.value for m in at.metric}
    ents = cp.from_dataset(load_dataset("demo"))
    expected = cp.find_index(cp.open_source("elicit"), ents)
    assert metrics["Documents"] == "4" and metrics["Sentences"] == "4"
    assert metrics["Mentions"] == f"{expected.counts['mentions']:,}"
    assert metrics["Facts with a context"] == f"{expected.counts['facts_with_document']:,}"
    assert at.button(key="cp_start").disabled  # already indexed
    assert len(at.get("plotly_chart")) == 1  # coverage per relation
    # real contexts of a fact
    pair = next(((s, o) for s, _, o in expected.sql(
        "SELECT s.name, f.relation, o.name FROM facts f JOIN entities s ON s.entity_id = f.subject_id "
        "JOIN entities o ON o.entity_id = f.object_id") if cp.documents_for(expected, s, o)), None)
    if pair is not None:
        at.text_input(key="cp_s").set_value(pair[0])
        at.text_input(key="cp_o").set_value(pair[1]).run()
        assert any("context(s)" in c.value for c in at.caption)
        assert errors(at) == []
    at.text_input(key="cp_s").set_value("nonexistent thing")
    at.text_input(key="cp_o").set_value("other").run()
    assert any("subject 'nonexistent thing' is not among" in e for e in errors(at))
    # the corpus changes: the page says so and offers a re-index
    (elicit / "pubmed_sents_no_punkt_10k_0").write_text("\n".join(SENTENCES + ["insulin treats diabetes"]) + "\n")
    at.text_input(key="cp_s").set_value("").run()
    assert any("changed since it was indexed" in w.value for w in at.warning)
    assert at.button(key="cp_start").label == "Re-index" and not at.button(key="cp_start").disabled


def test_bad_corpus_path_is_a_message(tmp_path):
    at = open_app("corpora")
    at.radio(key="cp_source").set_value("path").run()
    at.text_input(key="cp_path").set_value(str(tmp_path / "missing")).run()
    assert any("no corpus at" in e for e in errors(at)) and not at.exception


def test_a_build_in_progress_is_not_called_interrupted(elicit, monkeypatch):
    """While an index is being built its partial folder is listed as building (not as an interrupted build, which
    the table kept saying until a reload); once it is published the table holds the finished index only."""
    import threading

    from probekit.corpus import build

    inside, go_on = threading.Event(), threading.Event()
    counts = build._counts

    def held(*args, **kwargs):  # the build waits here, its partial folder on disk
        inside.set()
        assert go_on.wait(120)
        return counts(*args, **kwargs)

    monkeypatch.setattr(build, "_counts", held)
    at = open_app("corpora")
    at.button(key="cp_start").click().run()
    job = at.session_state["cp_job"]
    try:
        assert inside.wait(120), job.error
        at.run()
        table = next(d.value for d in at.dataframe if "status" in d.value.columns)
        assert list(table.status) == ["building"], list(table.status)
    finally:
        go_on.set()
    assert job.wait(120) and job.status == "done", job.error
    at.run()
    table = next(d.value for d in at.dataframe if "status" in d.value.columns)
    assert list(table.status) == ["ok"] and errors(at) == []
