"""Context variance: matching, segmentation worked by hand, variants, truncation, the runner with tiny
models, dataset mode, stored runs and the CLI."""

import json

import numpy as np
import pytest

from probekit import context
from probekit.context import Mention, build_inputs, match_entities, segment, segment_document
from probekit.context import store as context_runs
from probekit.errors import ProbekitError
from probekit.types import Query

# A nasal-polyp clinical note in the spirit of Yao et al.'s example: (nasal polyps, may have finding, anosmia).
NOTE = ("A 52-year-old woman with nasal polyps presented with a two-year history of nasal obstruction and "
        "rhinorrhea. She also noticed anosmia, which worsened after a viral infection with fever. She denies "
        "epistaxis or facial pain, but reports frequent headache.")
POOL = ["anosmia", "nasal obstruction", "obstruction", "rhinorrhea", "fever", "epistaxis", "facial pain", "pain",
        "headache", "cough", "chest pain"]
GOLDS = ("anosmia", "nasal obstruction", "rhinorrhea", "facial pain")
QUERY = Query("np", "nasal polyps", "disease_may_have_finding", "[X] may have the finding [Y] .", golds=GOLDS)


# ---------------------------------------------------------------- matching
def test_matching_longest_first_case_insensitive_word_boundaries():
    ms = match_entities("Fever, FEVERISH; Facial  Pain and pain.", ["pain", "facial pain", "fever"])
    assert [(m.text, m.name) for m in ms] == [("Fever", "fever"), ("Facial  Pain", "facial pain"), ("pain", "pain")]
    assert [(m.start, m.end) for m in ms] == [(0, 5), (17, 29), (34, 38)]


def test_matching_tie_equal_length_overlap_leftmost_wins():
    # "chest pain" and "pain fever" have the same length and overlap on "pain": the leftmost wins
    ms = match_entities("chest pain fever", ["pain fever", "chest pain", "fever"])
    assert [m.name for m in ms] == ["chest pain", "fever"]


# ---------------------------------------------------------------- segmentation, worked by hand
def test_nasal_polyp_segments_by_hand():
    seg = segment_document(NOTE, "anosmia", POOL)
    got = [(s.order, s.side, s.entity, s.text) for s in seg.segments]
    assert got == [
        (1, "anchor", "anosmia", ". She also noticed anosmia, which worsened after a viral infection with "),
        (2, "left", "rhinorrhea", " and rhinorrhea"),
        (3, "right", "fever", "fever. She denies "),
        (4, "left", "nasal obstruction",
         "A 52-year-old woman with nasal polyps presented with a two-year history of nasal obstruction"),
        (5, "right", "epistaxis", "epistaxis or "),
        (6, "right", "facial pain", "facial pain, but reports frequent "),  # left side exhausted
        (7, "right", "headache", "headache."),
    ]
    # segments partition the document
    assert "".join(s.text for s in sorted(seg.segments, key=lambda s: s.start)) == NOTE


def test_nasal_polyp_inputs_for_each_variant():
    seg = segment_document(NOTE, "anosmia", POOL)
    real = [i.context for i in build_inputs(seg)]
    assert real[0] == ""
    assert real[1] == ". She also noticed anosmia, which worsened after a viral infection with"
    assert real[2] == "and rhinorrhea. She also noticed anosmia, which worsened after a viral infection with"
    assert real[3] == real[2] + " fever. She denies"
    assert real[7] == NOTE
    only = [i.context for i in build_inputs(seg, variant="knowledge-only")]
    assert only[3] == "rhinorrhea, anosmia, fever"
    assert only[7] == "nasal obstruction, rhinorrhea, anosmia, fever, epistaxis, facial pain, headache"
    srt = [i.context for i in build_inputs(seg, variant="knowledge-sorted")]
    assert srt[3] == "anosmia, rhinorrhea, fever"
    assert srt[7] == "anosmia, rhinorrhea, fever, nasal obstruction, epistaxis, facial pain, headache"
    inputs = build_inputs(seg, variant="knowledge-only")
    assert [i.added.entity if i.added else None for i in inputs] == [None, "anosmia", "rhinorrhea", "fever",
                                                                      "nasal obstruction", "epistaxis", "facial pain",
                                                                      "headache"]


def test_knowledge_random_is_seeded_and_keeps_previous_order():
    seg = segment_document(NOTE, "anosmia", POOL)
    a = build_inputs(seg, variant="knowledge-random", seed=3, permutation=0)
    assert [i.shown for i in a] == [i.shown for i in build_inputs(seg, variant="knowledge-random", seed=3)]
    assert a[1].shown == (1,)
    for prev, cur in zip(a[1:], a[2:]):  # each step inserts the new segment, the others keep their order
        assert [x for x in cur.shown if x != cur.added.order] == list(prev.shown)
    perms = {tuple(build_inputs(seg, variant="knowledge-random", seed=3, permutation=p)[-1].shown) for p in range(6)}
    assert len(perms) > 1


def test_knowledge_random_picks_the_next_segment_at_random():
    """Yao et al., "Knowledge-random context": "We keep S1 in the first because it contains the target object.
    Then we randomly pick the next segment from the remaining segments and add it to any position in the
    input." So S1 is added first; every later step adds a segment drawn at random among those not yet added
    (not S2, S3, ... in turn), at a random position; seeded; each permutation draws its own order."""
    seg = segment_document(NOTE, "anosmia", POOL)
    orders = []
    for p in range(8):
        inputs = build_inputs(seg, variant="knowledge-random", seed=5, permutation=p)
        added = [i.added.order for i in inputs[1:]]
        assert added[0] == 1 and sorted(added) == list(range(1, len(seg) + 1))  # S1 first, each segment once
        assert [i.shown for i in inputs] == [i.shown for i in build_inputs(seg, variant="knowledge-random", seed=5,
                                                                             permutation=p)]  # seeded
        for prev, cur in zip(inputs[1:], inputs[2:]):  # the added one is new; the others keep their order
            assert cur.added.order not in prev.shown
            assert [x for x in cur.shown if x != cur.added.order] == list(prev.shown)
        assert inputs[-1].context.count(", ") == len(seg) - 1
        orders.append(tuple(added))
    assert len(set(orders)) > 1  # permutations differ in the order segments arrive ...
    assert any(o != tuple(range(1, len(seg) + 1)) for o in orders)  # ... not only in their positions
    # a later segment can land before S1 ("any position in the input")
    assert any(build_inputs(seg, variant="knowledge-random", seed=5, permutation=p)[-1].shown[0] != 1
               for p in range(8))
    # RC rows follow the order of addition: O_a at step n is the entity of the segment drawn at step n
    added = [i.added.entity for i in build_inputs(seg, variant="knowledge-random", seed=5, permutation=1)[1:]]
    assert added[0] == "anosmia" and set(added) == {s.entity for s in seg.segments}


def test_first_side_right():
    seg = segment_document(NOTE, "anosmia", POOL, first_side="right")
    assert [s.entity for s in seg.segments] == ["anosmia", "fever", "rhinorrhea", "epistaxis", "nasal obstruction",
                                                "facial pain", "headache"]


def test_negative_target_recentres_on_first_incorrect():
    seg = context.negative_target(segment_document(NOTE, "anosmia", POOL), GOLDS)
    assert seg.target == "fever"
    got = [(s.side, s.entity, s.text) for s in seg.segments]
    assert got[:4] == [("anchor", "fever", ", which worsened after a viral infection with fever. She denies "),
                       ("left", "anosmia", ". She also noticed anosmia"), ("right", "epistaxis", "epistaxis or "),
                       ("left", "rhinorrhea", " and rhinorrhea")]
    assert [s.entity for s in seg.segments[4:]] == ["facial pain", "nasal obstruction", "headache"]
    assert context.role_of("anosmia", seg.target, GOLDS) == "cor"
    only_golds = segment_document("anosmia and rhinorrhea", "anosmia", POOL)
    with pytest.raises(ProbekitError, match="O_incor"):
        context.negative_target(only_golds, GOLDS)


def test_side_with_no_entities_and_no_other_entity():
    seg = segment_document("Anosmia came first, then fever and cough.", "anosmia", POOL)
    assert [(s.side, s.entity, s.text) for s in seg.segments] == [
        ("anchor", "anosmia", "Anosmia came first, then "), ("right", "fever", "fever and "),
        ("right", "cough", "cough.")]
    alone = segment_document("The patient reports anosmia only.", "anosmia", POOL)
    assert [(s.side, s.text) for s in alone.segments] == [("anchor", "The patient reports anosmia only.")]
    assert [i.context for i in build_inputs(alone)] == ["", "The patient reports anosmia only."]


def test_entity_appearing_twice_and_target_twice():
    doc = "Fever and cough; then anosmia; later fever again, and anosmia."
    seg = segment_document(doc, "anosmia", POOL)
    assert [(s.side, s.entity) for s in seg.segments] == [("anchor", "anosmia"), ("left", "cough"), ("right", "fever"),
                                                          ("left", "fever"), ("right", "anosmia")]
    assert seg.segments[2].start > seg.segments[3].start  # the later fever comes first (right side)
    second = segment_document(doc, "anosmia", POOL, occurrence=1)
    assert second.anchor.start == doc.rindex("anosmia") and second.segments[1].entity == "fever"
    with pytest.raises(ProbekitError, match="occurrence 2"):
        segment_document(doc, "anosmia", POOL, occurrence=2)


def test_target_absent_and_bad_inputs():
    with pytest.raises(ProbekitError, match="does not occur"):
        segment_document(NOTE, "dysphagia", POOL)
    with pytest.raises(ProbekitError, match="inside the longer entity 'facial pain'"):
        segment_document("She denies facial pain.", "pain", POOL)
    with pytest.raises(ProbekitError, match="empty"):
        segment_document("   ", "anosmia", POOL)
    with pytest.raises(ProbekitError, match="unknown side"):
        segment_document(NOTE, "anosmia", POOL, first_side="up")
    with pytest.raises(ProbekitError, match="unknown variant"):
        build_inputs(segment_document(NOTE, "anosmia", POOL), variant="shuffled")
    with pytest.raises(ProbekitError, match="overlap"):
        segment("abc", [Mention(0, 2, "ab", "ab"), Mention(1, 3, "bc", "bc")], 0)


def test_compose_keeps_literal_placeholders_out_of_the_slot():
    q = Query("q", "[X]Other bursal cyst", "r", "[X] is associated with [Y] .")
    text = context.compose(q, "Bursitis, [MASK] thing [Y]")
    assert text == "Bursitis, [ MASK ] thing [ Y ] [X]Other bursal cyst is associated with [Y] ."
    composed = Query("c", "[X]", "r", text)
    assert composed.text("[MASK]").count("[MASK]") == 1


def test_fit_context_drops_from_the_far_end(tiny_encoder):
    tok = tiny_encoder.tokenizer
    ctx = " ".join(f"word{i}" for i in range(60))
    kept, notice = context.fit_context(tok, ctx, "x may have [MASK] .", 40)
    assert ctx.endswith(kept) and kept != ctx and "dropped" in notice
    assert len(tok(kept + " x may have [MASK] .", add_special_tokens=False)["input_ids"]) <= 40
    assert context.fit_context(tok, "short", "x [MASK]", 40) == ("short", "")
    assert context.fit_context(tok, ctx, "x " * 50 + "[MASK]", 40)[0] == ""


# ---------------------------------------------------------------- runner with tiny models
def _cosine_ranks(model, text, names):
    """Independent ranks for the retrieval probe: mean-pooled cosine, 1 + number strictly higher."""
    from probekit.encode import encode

    q = encode(model, [text], pooling="mean", max_length=128)[0]
    c = encode(model, names, pooling="mean", max_length=25)
    q, c = q / np.linalg.norm(q), c / np.linalg.norm(c, axis=1, keepdims=True)
    s = c @ q
    return {n: int((s > s[i]).sum()) + 1 for i, n in enumerate(names)}


def test_runner_retrieval_tiny_encoder(tiny_encoder):
    res = context.run_context(tiny_encoder, QUERY, target="anosmia", pool=POOL, document=NOTE, probe="retrieval",
                              pooling="mean")
    assert res.target == "anosmia" and res.pool_size == len(POOL) and len(res.runs) == 1
    run = res.runs[0]
    assert [r["step"] for r in run.rows] == list(range(8))
    assert run.results[1]["input"] == ". She also noticed anosmia, which worsened after a viral infection with " \
                                      "nasal polyps may have the finding [MASK] ."
    for res_n, inp in zip(run.results, run.inputs):
        want = _cosine_ranks(tiny_encoder, res_n["input"], list(context.unique_names(POOL)))
        for name, rank in res_n["ranks"].items():
            assert rank == want[name], (inp.step, name)
    for prev, row in zip(run.rows, run.rows[1:]):
        assert row["rc_target"] == row["rank_target"] - prev["rank_target"]
    u = res.ucm()
    assert u["n"] == 3 and u["U"] + u["C"] + u["M"] == pytest.approx(1.0)
    d = res.to_dict()
    assert json.loads(json.dumps(d))["runs"][0]["steps"][2]["added"] == "rhinorrhea"


def test_runner_mask_average_one_forward_per_length(tiny_mlm):
    from probekit.probes.mask_average import candidate_token_ids

    calls = []
    hook = tiny_mlm.mlm.register_forward_hook(lambda *a: calls.append(1))
    try:
        res = context.run_context(tiny_mlm, QUERY, target="anosmia", pool=POOL, document=NOTE,
                                  variant="knowledge-random", permutations=2, probe="mask_average")
    finally:
        hook.remove()
    lengths = {len(ids) for ids in candidate_token_ids(tiny_mlm.tokenizer, context.unique_names(POOL))}
    assert len(calls) == len(lengths)  # 16 inputs in one batch: one forward per distinct candidate length
    assert len(res.runs) == 2 and all(len(r.rows) == 8 for r in res.runs)
    assert all(1 <= r["rank_target"] <= len(POOL) for run in res.runs for r in run.rows)


def test_runner_negative_target_and_truncation(tiny_encoder):
    neg = context.run_context(tiny_encoder, QUERY, target="anosmia", pool=POOL, document=NOTE,
                              variant="negative-target")
    assert neg.negative and neg.target == "fever"
    assert [r["added_role"] for r in neg.runs[0].rows[1:3]] == ["target", "cor"]
    long_doc = " ".join(["The patient was seen in clinic today."] * 40) + " " + NOTE
    res = context.run_context(tiny_encoder, QUERY, target="anosmia", pool=POOL, document=long_doc)
    assert res.notices and all("dropped" in n for n in res.notices)
    tok = tiny_encoder.tokenizer
    for r in res.runs[0].results:  # the tiny model takes 128 positions
        assert len(tok(r["input"])["input_ids"]) <= 128 and r["input"].endswith("[MASK] .")


def test_runner_errors(tiny_encoder, tiny_mlm):
    with pytest.raises(ProbekitError, match="MLM head"):
        context.run_context(tiny_encoder, QUERY, target="anosmia", pool=POOL, document=NOTE, probe="mask_average")
    with pytest.raises(ProbekitError, match="permutations"):
        context.run_context(tiny_mlm, QUERY, target="anosmia", pool=POOL, document=NOTE, permutations=0)
    with pytest.raises(ProbekitError, match="no target"):
        context.run_context(tiny_mlm, QUERY, target=" ", pool=[], document=NOTE)
    with pytest.raises(ProbekitError, match="pool is empty"):
        context.pool_candidates([], [""])


# ---------------------------------------------------------------- dataset mode and stored runs
def test_kb_context_layout(tiny_dataset):
    q = next(q for q in tiny_dataset.queries if q.subject == "metformin")
    pool = tiny_dataset.candidates("relation", q.relation).names
    seg, golds = context.kb_context(q, pool, seed=1)
    assert seg.target == golds[0] == q.golds[0]
    names = [m.name for m in seg.mentions]
    assert len(names) == 3 and names[1] == q.golds[0]  # O_t in the middle, 1 O_cor + 1 O_incor around it
    assert seg.document == ", ".join(names)
    assert sum(n not in golds for n in names) == 1
    again, _ = context.kb_context(q, pool, seed=1)
    assert again == seg
    seg3, _ = context.kb_context(q, pool, seed=1, n_incor=3)
    assert len(seg3.mentions) == 5
    single = next(q for q in tiny_dataset.queries if len(q.golds) == 1)
    with pytest.raises(ProbekitError, match="fewer than 2"):
        context.kb_context(single, pool)


def test_run_dataset_store_and_export(tiny_dataset, tiny_encoder, tmp_path):
    res = context.run_dataset(tiny_encoder, tiny_dataset, negative=True, seed=0)
    assert res.settings["n_queries"] == 2  # metformin and aspirin have 2 golds each
    for mode in ("target", "negative"):
        rows = [r for r in res.rows if r["mode"] == mode]
        assert len(rows) == 2 * 4  # input_0..input_3 per triple
        assert res.summary[mode]["n_triples"] == 2
        acc = res.summary[mode]["acc"]
        assert set(acc) == {"none", "full"} and 0 <= acc["full"]["micro"]["acc@10"] <= 1
    assert res.summary["target"]["acc"]["full"]["micro"]["acc@5"] == 1.0  # 5 candidates in the pool
    # Same accuracy for both modes by construction: input_0 and the full context are the same text for
    # the target and the negative target (knowledge-only keeps document order); only the order differs.
    assert res.summary["target"]["acc"] == res.summary["negative"]["acc"]
    run_id = context_runs.save_run(res, model=tiny_encoder, label="tiny")
    assert context_runs.load_summary(run_id) == json.loads(json.dumps(res.summary))
    runs = context_runs.list_runs()
    assert list(runs.run_id) == [run_id] and "target_U" in runs.columns and "negative_M" in runs.columns
    table = context_runs.ucm_table([run_id])
    assert set(table["mode"]) == {"target", "negative"} and "UCM_m" in set(table.relation)
    import pandas as pd

    csv = context_runs.export_run(run_id, tmp_path / "ctx.csv")
    pq = context_runs.export_run(run_id, tmp_path / "ctx.parquet")
    assert len(pd.read_csv(csv)) == len(res.rows) == len(pd.read_parquet(pq))
    with pytest.raises(ProbekitError, match="format"):
        context_runs.export_run(run_id, tmp_path / "ctx.xlsx")
    context_runs.delete_run(run_id)
    with pytest.raises(ProbekitError, match="no stored context run"):
        context_runs.get_run(run_id)


def test_run_dataset_errors(tiny_dataset, tiny_encoder):
    with pytest.raises(ProbekitError, match="at least 2"):
        context.run_dataset(tiny_encoder, tiny_dataset, relations=["may_prevent"])
    with pytest.raises(ProbekitError, match="unknown relation"):
        context.run_dataset(tiny_encoder, tiny_dataset, relations=["may_cure"])
    with pytest.raises(ProbekitError, match="variant"):
        context.run_dataset(tiny_encoder, tiny_dataset, variant="real")


def test_medlama_kb_contexts_build(medlama_dir):
    from probekit.datasets import load_dataset

    ds = load_dataset("medlama", path=medlama_dir, relations=["may_treat"])
    qs = context.sample_queries(ds, limit=50, seed=0)
    assert len(qs) == 50 and qs == context.sample_queries(ds, limit=50, seed=0)
    pool = context.pool_candidates(ds.candidates("relation", "may_treat").names).names
    for q in qs:
        seg, golds = context.kb_context(q, pool, seed=0)
        assert seg.target == golds[0] and len(seg.segments) == 2 * (len(golds) - 1) + 1
        context.negative_target(seg, golds)


# ---------------------------------------------------------------- CLI
def test_cli_single_and_dataset(tiny_encoder_dir, tmp_path, capsys):
    from probekit.cli import main

    doc, pool = tmp_path / "note.txt", tmp_path / "pool.txt"
    doc.write_text(NOTE)
    pool.write_text("\n".join(POOL))
    argv = ["context", "single", "--model", str(tiny_encoder_dir), "--subject", "nasal polyps", "--prompt",
            "nasal polyps may have the finding [MASK] .", "--target", "anosmia", "--gold", "rhinorrhea",
            "--pool-file", str(pool), "--document", str(doc), "--format", "json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["target"] == "anosmia" and len(out["runs"][0]["steps"]) == 8
    assert main(argv[:-2] + ["--variant", "negative-target"]) == 0
    assert "target O_t: 'fever'" in capsys.readouterr().out
    assert main(argv[:8] + ["--target", "dysphagia"] + argv[10:]) == 2
    assert "does not occur" in capsys.readouterr().err

    triples = tmp_path / "t.csv"
    triples.write_text("subject,relation,object\nmetformin,may_treat,type 2 diabetes\nmetformin,may_treat,pcos\n"
                       "aspirin,may_treat,pain\n")
    assert main(["context", "dataset", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                 str(triples), "--negative", "--save", "--quiet", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["n_queries"] == 1 and out["run_id"].startswith("ctx-")
    assert set(out) >= {"target", "negative", "seconds"}
    assert main(["context", "runs", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["run_id"] == out["run_id"]
    assert main(["context", "runs", out["run_id"]]) == 0  # one run as tables (the default format)
    shown = capsys.readouterr().out
    assert shown.startswith(out["run_id"]) and "UCM_m" in shown and "acc@10" in shown and "{" not in shown
    assert main(["context", "runs", out["run_id"], "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"]["n_triples"] == 1


def test_cli_dataset_on_real_corpus_contexts(tiny_encoder_dir, tmp_path, monkeypatch, capsys):
    from probekit.cli import main

    corpora = tmp_path / "corpora"
    corpora.mkdir()
    (corpora / "pubmed_sents_no_punkt_10k_0").write_text("metformin for type 2 diabetes and pcos\naspirin\n")
    (corpora / "pubmed_sents_no_punkt_10k_1").write_text("aspirin eases pain but not pcos\n")
    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(corpora))
    triples = tmp_path / "t.csv"
    triples.write_text("subject,relation,object\nmetformin,may_treat,type 2 diabetes\nmetformin,may_treat,pcos\n"
                       "aspirin,may_treat,pain\naspirin,may_treat,fever\n")
    base = ["context", "dataset", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(triples),
            "--contexts", "corpus", "--quiet"]
    assert main(base + ["--corpus", "pubmed_0", "--negative", "--save", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["coverage"]["triples"] == 4 and out["coverage"]["with_context"] == 2  # metformin's two golds
    assert out["settings"]["contexts"]["files"] == ["pubmed_sents_no_punkt_10k_0"] and out["run_id"]
    assert main(base + ["--corpus", "pubmed", "--variant", "knowledge-sorted"]) == 0  # both files, as a table
    shown = capsys.readouterr().out
    assert "coverage: 3 of 4 triples" in shown and "knowledge-sorted" in shown and "acc (macro, %)" in shown
    assert "with context, counting: query" in shown
    assert main(base + ["--corpus", "wiki"]) == 2
    assert "unknown corpus 'wiki'" in capsys.readouterr().err
    assert main(base[:-3] + ["--contexts", "index", "--quiet"]) == 2
    assert "--index" in capsys.readouterr().err


def test_search_sentences_in_corpus_files_and_texts(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("nasal polyps often cause anosmia\npolyps and anosmiac patients\nanosmia without polyps\n"
                 "Nasal Polyps with ANOSMIA again\n")
    assert context.search_sentences("nasal polyps", "anosmia", files=[f]) == [
        "nasal polyps often cause anosmia", "Nasal Polyps with ANOSMIA again"]
    assert context.search_sentences("nasal polyps", "anosmia", files=[f], limit=1) == [
        "nasal polyps often cause anosmia"]
    assert context.search_sentences("polyps", "anosmia", texts=["x"], files=[]) == []
    with pytest.raises(ProbekitError, match="both"):
        context.search_sentences("", "anosmia", files=[f])
    assert context.corpus_files(tmp_path) == [f] and context.corpus_files(tmp_path / "none") == []
