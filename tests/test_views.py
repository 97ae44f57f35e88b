"""Share links hold the whole view: views to URL parameters and back, stale ones dropped."""

import pytest

from probekit import views
from probekit.context import documents
from probekit.probes import get_probe
from probekit.views import ContextView, ProbeView

RETRIEVAL = get_probe("retrieval").options
OPTS = {"pooling": "mean", "similarity": "l2", "layer": 3, "preset": None, "fast": False,
        "exclude_subject": True, "batch_size": 128, "max_length": 64}


def _roundtrip(view, spec=RETRIEVAL):
    params = views.probe_params(view, spec)
    assert all(isinstance(v, str) for v in params.values())
    ignored = []
    back = views.probe_view(params, spec=spec, ignored=ignored)
    assert ignored == []
    return params, back


def test_dataset_query_view_roundtrips_with_probe_options():
    view = ProbeView(model="m", dataset="demo", relation="may_treat", query="may_treat:0003", vocab="tails",
                     k=7, probe="retrieval", options=OPTS)
    params, back = _roundtrip(view)
    assert params["layer"] == "3" and params["pooling"] == "mean" and params["exclude_subject"] == "true"
    assert "batch_size" not in params  # an advanced option at its default stays out of the link
    assert params["max_length"] == "64"  # ... and is kept when changed
    assert "text" not in params and "golds" not in params
    assert back.relation == "may_treat" and back.query == "may_treat:0003" and back.k == 7
    assert back.options == {k: v for k, v in OPTS.items() if v is not None and k != "batch_size"}
    assert back.options["fast"] is False and back.options["layer"] == 3


def test_typed_query_link_drops_relation_and_query_and_keeps_golds():
    view = ProbeView(source="text", relation="may_treat", query="may_treat:0003", text="[X] treats [MASK].",
                     subject="Metformin", golds=("Diabetes", " PCOS ", ""), k=10, probe="retrieval",
                     options={"pooling": None})
    params, back = _roundtrip(view)
    assert "relation" not in params and "query" not in params and "pooling" not in params
    assert params["golds"] == "Diabetes;PCOS" and params["subject"] == "Metformin"
    assert back.source == "text" and back.golds == ("Diabetes", "PCOS") and back.subject == "Metformin"
    assert back.text == "[X] treats [MASK]." and back.relation is None
    # a subject only belongs to a template with [X]
    assert "subject" not in views.probe_params(ProbeView(source="text", text="A [MASK].", subject="S"))


def test_reading_a_stale_or_hand_edited_link():
    # a typed-query link that still carries relation= and query= (as links did before): they are not read
    view = views.probe_view({"source": "text", "text": "A [MASK].", "relation": "r", "query": "r:1"})
    assert view.relation is None and view.query is None
    # a dataset link carrying text=: the text is not read
    assert views.probe_view({"source": "dataset", "query": "r:1", "text": "x"}).text is None
    # old links (no source=) say typed by text=
    assert views.probe_view({"text": "A [MASK]."}).source == "text"
    assert views.probe_view({"query": "r:1"}).source == "dataset"
    ignored = []
    bad = {"source": "weird", "k": "0", "pooling": "max", "layer": "-2", "fast": "maybe", "similarity": "dot"}
    view = views.probe_view(bad, spec=RETRIEVAL, ignored=ignored)
    assert view.k is None and view.options == {"similarity": "dot"} and view.source == "dataset"
    assert sorted(ignored) == ["fast", "k", "layer", "pooling", "source"]
    assert views.probe_view({"k": "999"}, ignored=(big := [])).k is None and big == ["k"]


@pytest.mark.parametrize("name", ["mask_predict", "generative", "mask_average"])
def test_every_probe_options_roundtrip(name):
    spec = get_probe(name).options
    opts = {o.name: o.default for o in spec}
    changed = {o.name: (o.choices[-1] if o.choices else (o.default or 0) + 2) for o in spec
               if o.value_type in (int, bool, str) and (o.choices or o.value_type is int)}
    view = ProbeView(query="q", probe=name, options={**opts, **changed})
    _, back = _roundtrip(view, spec)
    for key, value in changed.items():
        assert back.options[key] == value, key


def test_context_view_roundtrip_and_bad_hash():
    view = ContextView(model="m", dataset="demo", relation="may_treat", query="may_treat:0003", target="Asthma",
                       variant="knowledge-random", probe="retrieval", permutations=4, seed=7, doc="0a" * 10,
                       corpus="pubmed_0")
    params = views.context_params(view)
    assert "corpus" not in params  # the stored document is the document; the corpus was only where it came from
    ignored = []
    back = views.context_view(params, ignored=ignored)
    assert ignored == [] and back == ContextView(**{**view.__dict__, "corpus": None})
    real = views.context_params(ContextView(query="q", variant="real", permutations=4, corpus="wiki"))
    assert "permutations" not in real and real["corpus"] == "wiki"
    bad = []
    assert views.context_view({"doc": "../../etc/passwd", "seed": "x"}, ignored=bad).doc is None
    assert sorted(bad) == ["doc", "seed"]


def test_documents_are_stored_by_hash():
    text = "Mr B has hypertension; he was started on lisinopril. ![x](http://e)"
    digest = documents.save_document(text)
    assert documents.save_document(text) == digest and documents.load_document(digest) == text
    assert documents.load_document("0" * 20) is None  # not on this server
    assert documents.load_document("../" + digest) is None
    (documents.folder() / f"{digest}.txt").write_text("edited")
    assert documents.load_document(digest) is None  # a file that no longer matches its name is not served
