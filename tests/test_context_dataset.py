"""Dataset mode on real contexts: the documents sources (corpus scan against a naive loop, windows, the
corpus-index adapter), coverage, every variant, negative target, background job, cancel and the store."""

import json
import random
import re
import sys
import types

import pytest

from probekit import context
from probekit.context import CorpusScan, IndexSource
from probekit.context import store as context_runs
from probekit.errors import ProbekitError
from probekit.jobs import Cancelled
from probekit.metrics.intervals import METHOD, bracket

# one sentence a line, lower-cased like the shipped PubMed corpora
CORPUS = [
    "metformin lowers glucose in type 2 diabetes and is tried in polycystic ovary syndrome",
    "aspirin relieves pain but not type 1 diabetes",
    "aspirin and fever in children",
    "an unrelated sentence",
    "ibuprofen was given",
    "pain after surgery",
    "aspirinx and painful fever",  # no word-boundary match for aspirin or pain
]


def _naive(subject, target, lines):
    def has(name, line):
        return re.search(r"(?<!\w)" + r"\s+".join(map(re.escape, name.lower().split())) + r"(?!\w)", line.lower())

    return [ln for ln in lines if has(subject, ln) and has(target, ln)]


def test_corpus_scan_matches_a_naive_loop(tmp_path):
    rng = random.Random(3)
    words = ["pain", "fever", "aspirin", "type", "2", "diabetes", "x", "painful", "aspirins"]
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(400)]
    f = tmp_path / "corpus_sents_0"
    f.write_text("\n".join(lines) + "\n")
    scan = CorpusScan([f], limit=10_000)
    for s, t in [("aspirin", "pain"), ("aspirin", "type 2 diabetes"), ("fever", "diabetes"), ("x", "painful"),
                 ("aspirin", "nothing"), ("type 2", "pain")]:
        assert scan.contexts(s, t) == [" ".join(x.split()) for x in _naive(s, t, lines)], (s, t)
    assert CorpusScan([f], limit=2).contexts("aspirin", "pain") == _naive("aspirin", "pain", lines)[:2]


def test_corpus_scan_window_and_files(tmp_path):
    a, b = tmp_path / "pubmed_sents_0", tmp_path / "pubmed_sents_1"
    a.write_text("ibuprofen was given\npain after surgery\n")
    b.write_text("ibuprofen again\nnothing\npain here\n")
    assert CorpusScan([a, b]).contexts("ibuprofen", "pain") == []
    # window = 1: one line either side of an O_t line, same file only, kept when S is inside
    assert CorpusScan([a, b], window=1).contexts("ibuprofen", "pain") == ["ibuprofen was given pain after surgery"]
    assert CorpusScan([a, b], window=2).contexts("ibuprofen", "pain") == [
        "ibuprofen was given pain after surgery", "ibuprofen again nothing pain here"]
    with pytest.raises(ProbekitError, match="window"):
        CorpusScan([a], window=-1)
    assert context.resolve_corpora(["pubmed_1"], tmp_path) == [b]
    assert context.resolve_corpora(["pubmed"], tmp_path) == [a, b] == context.resolve_corpora(None, tmp_path)
    with pytest.raises(ProbekitError, match="unknown corpus 'wiki'"):
        context.resolve_corpora(["wiki"], tmp_path)


def _run(model, ds, source, **kw):
    return context.run_dataset(model, ds, contexts=source, relations=["may_treat"], **kw)


def test_real_contexts_coverage_and_rows(tiny_dataset, tiny_encoder):
    res = _run(tiny_encoder, tiny_dataset, CorpusScan(texts=CORPUS), negative=True)
    cov = res.coverage
    triples = [(q.subject, g) for q in tiny_dataset.queries_for("may_treat") for g in q.golds]
    assert cov["triples"] == len(triples) == 6
    assert cov["with_context"] == sum(bool(_naive(s, t, CORPUS)) for s, t in triples) == 4
    assert cov["share"] == pytest.approx(4 / 6) and cov["by_relation"]["may_treat"]["with_context"] == 4
    assert res.settings["contexts"]["source"] == "corpus scan" and res.settings["variant"] == "real"
    target = [r for r in res.rows if r["mode"] == "target"]
    assert {(r["subject"], r["target"]) for r in target} == {
        ("metformin", "type 2 diabetes"), ("metformin", "polycystic ovary syndrome"), ("aspirin", "pain"),
        ("aspirin", "fever")}
    # metformin's sentence: O_t and the other gold, two steps after the prompt alone; S2 adds an O_cor
    seq = [r for r in target if r["target"] == "type 2 diabetes"]
    assert [r["step"] for r in seq] == [0, 1, 2] and [r["added_role"] for r in seq] == [None, "target", "cor"]
    assert res.summary["target"]["n_triples"] == 4 and res.summary["target"]["ucm_m"]["n"] == 2
    # negative target needs an O_incor in the context: only aspirin's pain sentence has one (type 1 diabetes)
    neg = [r for r in res.rows if r["mode"] == "negative"]
    assert {r["target"] for r in neg} == {"type 1 diabetes"} and cov["no_incor"] == 3
    acc = res.summary["target"]["acc"]
    assert 0 <= acc["none"]["macro"]["acc@1"] <= 1 and acc["full"]["micro"]["acc@5"] == 1.0  # 5 names in the pool
    # each score with its 95 % interval, and how it was made: Wilson's for n hits of n reaches 1 (Wilson 1927)
    assert acc["full"]["intervals"]["method"] == METHOD and acc["full"]["intervals"]["micro"]["acc@5"][1] == 1.0
    for label in ("none", "full"):
        for average in ("macro", "micro"):
            for name, value in acc[label][average].items():
                lo, hi = acc[label]["intervals"][average][name]
                assert value != value or lo <= value <= hi, (label, average, name)
    _, table = context.summary_frames(res.summary)
    assert list(table.columns[2:4]) == ["acc@1", "acc@1 [lo, hi]"]
    target_rows = table[table["mode"] == "target"]
    assert target_rows["acc@5 [lo, hi]"].tolist() == [bracket(*acc[c]["intervals"]["macro"]["acc@5"])
                                                      for c in target_rows.context]
    # a summary from before intervals were kept: its table says "–" there
    old = {m: {**s, "acc": {c: {k: v for k, v in a.items() if k != "intervals"} for c, a in s["acc"].items()}}
           for m, s in res.summary.items()}
    assert set(context.summary_frames(old)[1]["MRR [lo, hi]"]) == {"–"}


@pytest.mark.parametrize("variant", ["knowledge-only", "knowledge-sorted", "knowledge-random"])
def test_real_contexts_every_variant(tiny_dataset, tiny_encoder, variant):
    res = _run(tiny_encoder, tiny_dataset, CorpusScan(texts=CORPUS), variant=variant, permutations=2,
               negative=False)
    perms = {r["permutation"] for r in res.rows}
    assert perms == ({0, 1} if variant == "knowledge-random" else {0})
    assert res.settings["variant"] == variant and res.coverage["with_context"] == 4


def test_index_source_adapter(tiny_dataset, tiny_encoder, monkeypatch):
    """Written against the corpus branch's documented lookup: contexts_for(index, subject, target, *, unit,
    window, limit) -> [Context(text=...)], raising ProbekitError for names the index does not hold."""
    calls = []

    def contexts_for(index, subject, target, *, unit="document", window=1, limit=20):
        calls.append((index, subject, target, unit, window, limit))
        if target == "fever":
            raise ProbekitError("unknown target 'fever'")
        return [types.SimpleNamespace(text=t) for t in _naive(subject, target, CORPUS)][:limit]

    fake = types.ModuleType("probekit.corpus")
    fake.contexts_for = contexts_for
    fake.open_index = lambda prefix: f"index-{prefix}"
    monkeypatch.setitem(sys.modules, "probekit.corpus", fake)
    source = IndexSource.open("abc", unit="paragraph", window=0, limit=3)
    assert source.contexts("aspirin", "pain") == [CORPUS[1]] and source.contexts("aspirin", "fever") == []
    assert calls[0] == ("index-abc", "aspirin", "pain", "paragraph", 0, 3)
    res = _run(tiny_encoder, tiny_dataset, source, negative=False)
    assert res.coverage["with_context"] == 3 and res.settings["contexts"]["source"] == "corpus index"
    with pytest.raises(ProbekitError, match="unit"):
        IndexSource("x", unit="chapter")
    monkeypatch.setitem(sys.modules, "probekit.corpus", None)  # the corpus branch not merged: a message
    with pytest.raises(ProbekitError, match="not part of this build"):
        IndexSource("x")


def test_cancel_job_and_store(tiny_dataset, tiny_encoder):
    with pytest.raises(Cancelled):
        _run(tiny_encoder, tiny_dataset, CorpusScan(texts=CORPUS), should_cancel=lambda: True)
    job = context.start_dataset(tiny_encoder, tiny_dataset, contexts=CorpusScan(texts=CORPUS),
                                relations=["may_treat"], save=True, label="tiny real")
    assert job.wait(120) and job.status == "done", job.error
    assert job.fraction == 1.0 and job.total == 4 and job.stage.startswith("relation 1/1 may_treat")
    res = job.result
    run_id = res.settings["run_id"]
    rows = context_runs.load_rows(run_id)
    assert len(rows) == len(res.rows) and {r["context"] for r in rows} == {0}
    assert context_runs.load_summary(run_id) == json.loads(json.dumps(res.summary))
    assert context_runs.get_run(run_id)["settings"]["coverage"]["with_context"] == 4
    with pytest.raises(ProbekitError, match="contexts"):
        context.run_dataset(tiny_encoder, tiny_dataset, contexts="corpus")
    with pytest.raises(ProbekitError, match="knowledge-only"):
        context.run_dataset(tiny_encoder, tiny_dataset, variant="real")


def test_several_contexts_per_triple(tiny_dataset, tiny_encoder):
    lines = ["aspirin for pain", "aspirin eases pain and fever", "aspirin for fever"]
    res = _run(tiny_encoder, tiny_dataset, CorpusScan(texts=lines, limit=2), negative=False)
    pain = [r for r in res.rows if r["target"] == "pain"]
    assert {r["context"] for r in pain} == {0, 1} and res.coverage["contexts"] == 4
    assert res.summary["target"]["n_contexts"] == 4 and res.summary["target"]["n_triples"] == 2
    # acc@k counts each context sequence once: step 0 and the last step of each
    none, full = context.dataset._rankings([r for r in res.rows if r["mode"] == "target"])
    assert len(none) == len(full) == 4


@pytest.mark.slow
def test_medlama_real_contexts_from_pubmed_0(medlama_dir, tiny_encoder, monkeypatch):
    """Real MedLAMA triples against the shipped pubmed_0 corpus: the coverage the run reports is the naive
    count of triples with a line mentioning both S and O_t (less those whose O_t only occurs inside a longer
    pool name), on one relation."""
    from probekit import config
    from probekit.datasets import load_dataset

    files = context.resolve_corpora(["pubmed_0"])
    if not files or not files[0].is_file():
        pytest.skip(f"pubmed_0 not found under {config.corpora_dir()}")
    ds = load_dataset("medlama", path=medlama_dir, relations=["may_treat"])
    lines = files[0].read_text(encoding="utf-8").lower().splitlines()
    triples = [(q.subject, g) for q in ds.queries_for("may_treat") for g in context.unique_names(q.golds)]
    # the naive loop, with a plain substring filter first so it runs in seconds
    found = sum(bool(_naive(s, t, [ln for ln in lines if s.lower() in ln and t.lower() in ln])) for s, t in triples)
    res = context.run_dataset(tiny_encoder, ds, contexts=CorpusScan(files, limit=1), negative=True)
    cov = res.coverage
    assert cov["triples"] == len(triples) and 0 < cov["with_context"] <= found
    assert cov["with_context"] + cov["unusable"] >= found
    assert res.summary["target"]["n_triples"] == cov["with_context"]
