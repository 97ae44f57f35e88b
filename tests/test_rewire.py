"""rewire: span masking, InfoNCE against a plain-Python loss, training on a tiny model, checkpoints, sweep, CLI."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pandas as pd
import pytest
import torch

from probekit import models, rewire
from probekit.errors import ProbekitError, UnknownNameError
from probekit.rewire import RewireSettings

WORDS = ("aspirin metformin insulin warfarin statin fever pain stroke diabetes asthma reduces treats prevents "
         "causes increases in patients with chronic acute the of and risk").split()


@pytest.fixture
def corpus(tmp_path):
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14))) for _ in range(48)]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n\n   \n")
    return path


def _settings(model_dir, corpus_file, /, **kw):
    base = dict(model=str(model_dir), corpus=str(corpus_file), batch_size=8, steps=4, checkpoint_every=2, seed=0)
    return RewireSettings(**{**base, **kw})


# ---------------------------------------------------------------- span masking
@pytest.mark.parametrize("ratio", [0.2, 0.5, 1.0])
def test_span_pair_cuts_the_tail_as_specified(ratio):
    """Meng et al. 2022, §3: "replace their tail tokens (e.g. the last 50% excluding the full stop) with a
    [MASK] token ... Sentence: Social-distancing largely reduces coronavirus infections. Query:
    Social-distancing largely [MASK]." k uniform in 1..1+floor(ratio·n), the span ends at the
    sentence's last word."""
    rng = random.Random(7)
    seen = set()
    for n in range(2, 30):
        tokens = [f"w{i}" for i in range(n)]
        for _ in range(200 if n == 29 else 20):
            query, span = rewire.span_pair(" ".join(tokens), rng, ratio=ratio, mask_token="<M>")
            k = len(span.split())
            assert 1 <= k <= min(1 + math.floor(ratio * n), n - 1)
            assert span.split() == tokens[n - k:]  # the tail, through the last word
            assert query.split() == tokens[:n - k] + ["<M>"]  # the query ends in the mask
            seen.add((n, k))
    # k really varies over its whole range (uniform, not fixed)
    assert {k for n, k in seen if n == 29} == set(range(1, min(1 + math.floor(ratio * 29), 28) + 1))


def test_span_pair_on_the_papers_example():
    """Meng et al. 2022, §3: "Sentence: Social-distancing largely reduces coronavirus infections. Query:
    Social-distancing largely [MASK]." (the span is "reduces coronavirus infections")."""
    sentence = "social-distancing largely reduces coronavirus infections"
    # k=3 is one of the k the rule draws for n=5 (1..1+floor(0.5*5) = 1..3): find a seed that draws it
    for seed in range(100):
        query, span = rewire.span_pair(sentence, random.Random(seed))
        if len(span.split()) == 3:
            break
    assert (query, span) == ("social-distancing largely [MASK]", "reduces coronavirus infections")


def test_shipped_corpus_queries_end_in_the_mask():
    """On the shipped PubMed corpora "the reference procedure gives 9,997 of 10,000
    queries ending in [MASK]" (as the paper's "Social-distancing largely [MASK]."). probekit masks through
    the last word, so at least that share of pubmed_0's queries must end in the mask, and every query plus
    its span must give back the sentence. (Lines of one word give no query: nothing would stay before the
    mask.)"""
    from probekit import config

    path = config.corpora_dir() / rewire.CORPUS_FILES["pubmed_0"]
    if not path.is_file():
        pytest.skip(f"pubmed_0 not found at {path} (set PROBEKIT_CORPORA_DIR)")
    sentences = rewire.read_sentences(path)
    pairs = rewire.make_pairs(sentences, seed=0, mask_token="[MASK]")
    raw = path.read_text(encoding="utf-8").splitlines()
    assert len(raw) == 10_000 and len(pairs) == sum(len(line.split()) >= 2 for line in raw)
    ending = sum(q.endswith(" [MASK]") for q, _ in pairs)
    assert ending / len(pairs) >= 9_997 / 10_000
    by_sentence = {s: s for s in sentences}
    assert all(q[: -len("[MASK]")] + s in by_sentence for q, s in pairs)


def test_make_pairs_is_seeded_and_skips_one_word_lines():
    sents = ["a b c d e f", "x", "one two three four five six seven"]
    assert rewire.make_pairs(sents, seed=3) == rewire.make_pairs(sents, seed=3)
    assert len(rewire.make_pairs(sents, seed=3)) == 2
    many = [" ".join(f"w{i}" for i in range(20))] * 50
    assert rewire.make_pairs(many, seed=1) != rewire.make_pairs(many, seed=2)


# ---------------------------------------------------------------- the loss
def _naive_info_nce(q, p, tau):
    """Plain Python: for each of the 2B embeddings, -log softmax of its positive among all others."""
    z = [list(map(float, v)) for v in list(q) + list(p)]
    b = len(q)

    def cos(u, v):
        return sum(a * c for a, c in zip(u, v)) / math.sqrt(sum(a * a for a in u) * sum(c * c for c in v))

    total = 0.0
    for i in range(2 * b):
        pos = i + b if i < b else i - b
        logits = {j: cos(z[i], z[j]) / tau for j in range(2 * b) if j != i}
        total += -(logits[pos] - math.log(sum(math.exp(v) for v in logits.values())))
    return total / (2 * b)


@pytest.mark.parametrize("tau", [0.04, 0.5, 1.0])
def test_info_nce_matches_plain_python(tau):
    g = torch.Generator().manual_seed(0)
    q, p = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g)
    assert float(rewire.info_nce(q, p, tau=tau)) == pytest.approx(_naive_info_nce(q, p, tau), rel=1e-5)
    hand = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert float(rewire.info_nce(hand, hand.flip(0), tau=tau)) == pytest.approx(
        _naive_info_nce(hand, hand.flip(0), tau), rel=1e-5)


def test_info_nce_input_checks():
    with pytest.raises(ProbekitError, match="at least 2"):
        rewire.info_nce(torch.ones(1, 3), torch.ones(1, 3))
    with pytest.raises(ProbekitError, match="batch, dim"):
        rewire.info_nce(torch.ones(2, 3), torch.ones(2, 4))


# ---------------------------------------------------------------- training
def test_training_lowers_the_loss_and_writes_checkpoints(tiny_encoder_dir, corpus):
    s = _settings(tiny_encoder_dir, corpus, steps=12, checkpoint_every=5, lr=1e-3, dropout=0.0, max_sentences=8,
                  pooling="mean")
    seen = []
    info = rewire.train(s, device="cpu", progress=lambda step, total, loss: seen.append((step, total, loss)))
    log = rewire.load_log(info["run_id"])
    assert list(log["step"]) == list(range(1, 13)) and [x[0] for x in seen] == list(range(1, 13))
    assert log["loss"].iloc[-1] < 0.5 * log["loss"].iloc[0]  # one batch of 8 pairs, seen 12 times: it learns
    assert info["status"] == "done" and info["steps_done"] == 12 and info["batch_size"] == 8
    assert [c["step"] for c in info["checkpoints"]] == [5, 10, 12]  # every 5 steps and the last
    ck = info["checkpoints"][0]
    assert ck["label"].endswith("rewired on corpus.txt, step 5") and ck["pooling"] == "mean"
    listed = dict(models.available_models())
    assert listed[ck["path"]] == ck["label"]
    m = models.load(ck["path"], device="cpu")
    assert m.spec.pooling == "mean" and not m.has_mlm and m.label == ck["label"]
    # the saved weights are the trained ones, not the base model's
    base = models.load(str(tiny_encoder_dir), device="cpu")
    assert not torch.equal(m.encoder.embeddings.word_embeddings.weight, base.encoder.embeddings.word_embeddings.weight)
    frame = rewire.list_runs()
    assert frame.loc[0, "run_id"] == info["run_id"] and frame.loc[0, "checkpoints"] == 3


def test_training_is_deterministic_on_cpu(tiny_encoder_dir, corpus):
    s = _settings(tiny_encoder_dir, corpus, steps=3, checkpoint_every=10)
    a = rewire.load_log(rewire.train(s, device="cpu")["run_id"])["loss"].tolist()
    b = rewire.load_log(rewire.train(s, device="cpu")["run_id"])["loss"].tolist()
    c = rewire.load_log(rewire.train(_settings(tiny_encoder_dir, corpus, steps=3, seed=1), device="cpu")["run_id"])
    assert a == b and a != c["loss"].tolist()


def test_layer_rewiring_trains_only_up_to_that_layer(tiny_encoder_dir, corpus):
    info = rewire.train(_settings(tiny_encoder_dir, corpus, steps=2, layer=1, lr=1e-3), device="cpu")
    ck = info["checkpoints"][-1]
    assert ck["layer"] == 1 and "layer 1" in ck["label"]
    m, base = models.load(ck["path"], device="cpu"), models.load(str(tiny_encoder_dir), device="cpu")
    top = m.encoder.encoder.layer[1].output.dense.weight  # above layer 1: no gradient, unchanged
    assert torch.equal(top, base.encoder.encoder.layer[1].output.dense.weight)
    assert not torch.equal(m.encoder.encoder.layer[0].output.dense.weight,
                           base.encoder.encoder.layer[0].output.dense.weight)


def test_stop_keeps_a_checkpoint_at_the_current_step(tiny_encoder_dir, corpus):
    steps = []

    def report(step, total, loss):
        steps.append(step)

    info = rewire.train(_settings(tiny_encoder_dir, corpus, steps=50, checkpoint_every=20), device="cpu",
                        progress=report, should_cancel=lambda: len(steps) >= 3)
    assert info["status"] == "stopped" and info["steps_done"] == 3
    assert [c["step"] for c in info["checkpoints"]] == [3]


def test_background_job_trains(tiny_encoder_dir, corpus):
    job = rewire.start_train(_settings(tiny_encoder_dir, corpus, steps=2), device="cpu")
    assert job.wait(120) and job.status == "done", job.error
    assert job.result["run_id"] == job.run_id and len(rewire.load_log(job.run_id)) == 2


@pytest.mark.parametrize("kw, match", [
    ({"corpus": "pubmed_O"}, "unknown corpus 'pubmed_O'"),
    ({"corpus": "/nope/corpus.txt"}, "does not exist"),
    ({"batch_size": 1}, "at least 2"),
    ({"batch_size": 64}, "fewer than one batch"),
    ({"layer": 9}, "layer 9 out of range"),
    ({"tau": 0}, "tau must be positive"),
    ({"pooling": "max"}, "unknown pooling"),
])
def test_bad_settings_are_refused_with_a_message(tiny_encoder_dir, corpus, kw, match):
    with pytest.raises(ProbekitError, match=match):
        rewire.train(_settings(tiny_encoder_dir, corpus, **kw), device="cpu")
    assert all(r["status"] != "done" for r in rewire.list_runs().to_dict(orient="records"))


def test_corpus_errors(tmp_path, monkeypatch):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine line here\n\xff\xfe broken\n")
    with pytest.raises(ProbekitError, match="bad.txt, line 2: not UTF-8"):
        rewire.read_sentences(bad)
    short = tmp_path / "short.txt"
    short.write_text("one\n\ntwo words\n")
    with pytest.raises(ProbekitError, match="fewer than 2 sentences"):
        rewire.read_sentences(short)
    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(tmp_path))
    (tmp_path / "pubmed_sents_no_punkt_10k_0").write_text("a b c\nd e f\n")
    assert dict(rewire.list_corpora()) == {"pubmed_0": tmp_path / "pubmed_sents_no_punkt_10k_0"}
    with pytest.raises(UnknownNameError, match="did you mean 'pubmed_0'"):
        rewire.resolve_corpus("pubmed_O")
    with pytest.raises(ProbekitError, match="is not at"):
        rewire.resolve_corpus("wiki")


# ---------------------------------------------------------------- sweep
def test_sweep_probes_base_and_every_checkpoint_and_reuses_runs(tiny_encoder_dir, corpus, tiny_dataset):
    from probekit.bench import runs

    info = rewire.train(_settings(tiny_encoder_dir, corpus, steps=4, checkpoint_every=2, lr=1e-3), device="cpu")
    frame = rewire.sweep([info["run_id"]], tiny_dataset, device="cpu")
    assert list(frame.columns) == rewire.SWEEP_COLUMNS
    assert sorted(set(frame["step"])) == [0, 2, 4]
    # each point equals a direct benchmark of that checkpoint with the run's pooling and layer
    ck = info["checkpoints"][0]
    direct = runs.run_benchmark(models.load(ck["path"], device="cpu"), tiny_dataset,
                                options={"pooling": "cls", "layer": 2}, save=False).summary()
    row = frame[(frame.step == 2) & (frame.relation == "macro") & (frame.subset == "full")].iloc[0]
    assert row["acc@10"] == pytest.approx(direct["macro"]["acc@10"])
    assert row["n"] == len(tiny_dataset)
    again = rewire.sweep([info["run_id"]], tiny_dataset, device="cpu")
    assert again["run_id"].tolist() == frame["run_id"].tolist()  # read back from the store


def test_sweep_with_the_medlama_reference_preset(tiny_encoder_dir, corpus, tiny_dataset):
    """The preset ("[CLS] of `hidden_states[layer]`, L2 distance on raw (unnormalised) vectors")
    is used "in every place the README or a page compares with the paper" (the sweep: MedLAMA Fig. 4) and
    recorded in every stored run."""
    from probekit.bench import runs

    info = rewire.train(_settings(tiny_encoder_dir, corpus, steps=2, checkpoint_every=2, lr=1e-3), device="cpu")
    frame = rewire.sweep([info["run_id"]], tiny_dataset, device="cpu", preset="medlama-reference")
    for run_id in set(frame["run_id"]):
        opts = runs.get_run(run_id)["options"]
        assert (opts["preset"], opts["pooling"], opts["similarity"], opts["max_length"]) == (
            "medlama-reference", "cls", "l2", 50)
    spelled = rewire.sweep([info["run_id"]], tiny_dataset, device="cpu", similarity="l2")
    cols = ["step", "relation", "subset", *rewire.SWEEP_COLUMNS[9:]]  # every metric of the sweep
    pd.testing.assert_frame_equal(frame[cols], spelled[cols])


def test_sweep_labels_which_vocabulary_the_hard_queries_met(tiny_encoder_dir, corpus):
    """The hard set's vocabulary is heads+tails of its own files; a full run's hard block ranks
    hard queries among the full set's names, "a different experiment", so it is labelled so."""
    from probekit.datasets import load_dataset

    info = rewire.train(_settings(tiny_encoder_dir, corpus, steps=2, checkpoint_every=2, lr=1e-3), device="cpu")
    full = rewire.sweep([info["run_id"]], load_dataset("demo"), device="cpu")
    hard = rewire.sweep([info["run_id"]], load_dataset("demo", which="hard"), device="cpu")
    assert set(full["subset"]) == {"full", rewire.HARD_IN_FULL} and set(hard["subset"]) == {"hard"}
    assert set(rewire.SUBSETS) == {"full", "hard", rewire.HARD_IN_FULL}
    n_hard = len(load_dataset("demo", which="hard"))
    assert hard[hard.relation == "micro"]["n"].eq(n_hard).all()
    assert full[(full.relation == "micro") & (full.subset == rewire.HARD_IN_FULL)]["n"].eq(n_hard).all()


def test_sweep_curve_mean_and_std_against_a_naive_loop():
    rng = np.random.default_rng(0)
    rows = [{"rewire_run": f"r{r}", "step": s, "relation": rel, "subset": "full", "acc@1": rng.random()}
            for r in range(3) for s in (0, 50, 100) for rel in ("macro", "a")]
    frame = pd.DataFrame(rows)
    curve = rewire.sweep_curve(frame, metric="acc@1", relation="a")
    for _, row in curve.iterrows():
        vals = [r["acc@1"] for r in rows if r["step"] == row["step"] and r["relation"] == "a"]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))
        assert row["mean"] == pytest.approx(mean) and row["std"] == pytest.approx(std) and row["runs"] == 3
    with pytest.raises(UnknownNameError, match="unknown relation 'b'"):
        rewire.sweep_curve(frame, relation="b")
    best = rewire.best_checkpoint(frame.assign(**{"acc@10": frame["acc@1"]}), metric="acc@10")
    macro = {s: np.mean([r["acc@1"] for r in rows if r["step"] == s and r["relation"] == "macro"])
             for s in (0, 50, 100)}
    assert best["step"] == max((50, 100), key=macro.get) and best["acc"] == pytest.approx(macro[best["step"]])
    assert best["base"] == pytest.approx(macro[0])


def test_sweep_needs_checkpoints(tiny_encoder_dir, corpus, tiny_dataset):
    with pytest.raises(UnknownNameError, match="unknown rewiring run"):
        rewire.sweep(["rw-nope"], tiny_dataset)
    with pytest.raises(ProbekitError, match="at least one"):
        rewire.sweep([], tiny_dataset)


# ---------------------------------------------------------------- CLI
def test_cli_rewire_list_and_sweep(tiny_encoder_dir, corpus, tmp_path, capsys):
    from probekit.cli import main

    assert main(["rewire", "--model", str(tiny_encoder_dir), "--corpus", str(corpus), "--steps", "2",
                 "--checkpoint-every", "1", "--batch-size", "4", "--device", "cpu", "--format", "json",
                 "--quiet"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["status"] == "done" and [c["step"] for c in info["checkpoints"]] == [1, 2]
    assert main(["rewire", "--list"]) == 0
    assert info["run_id"] in capsys.readouterr().out
    triples = tmp_path / "facts.csv"
    triples.write_text("subject,relation,object\naspirin,may_treat,pain\nmetformin,may_treat,diabetes\n")
    out = tmp_path / "sweep.csv"
    assert main(["sweep", "--run", info["run_id"], "--dataset", "triples", "--data-dir", str(triples),
                 "--device", "cpu", "--format", "json", "--quiet", "--out", str(out)]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [p["step"] for p in res["curves"]["full:macro:acc@1"]] == [0, 1, 2] and res["counting"] == "query"
    assert len(pd.read_csv(out)) == len(res["rows"])
    assert main(["rewire", "--corpus", "nope_corpus", "--model", str(tiny_encoder_dir)]) == 2
    assert "unknown corpus" in capsys.readouterr().err


def test_damaged_checkpoints_and_runs_are_named_never_silently_left_out(tiny_encoder_dir, corpus, tmp_path, capsys):
    """A checkpoint whose metadata was damaged used to vanish from ``rewire --list`` and ``sweep`` without a word."""
    from probekit.cli import main
    from probekit.models import CHECKPOINT_META

    assert main(["rewire", "--model", str(tiny_encoder_dir), "--corpus", str(corpus), "--steps", "2",
                 "--checkpoint-every", "1", "--batch-size", "4", "--device", "cpu", "--format", "json",
                 "--quiet"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    (rewire.runs_dir() / run_id / "step-000001" / CHECKPOINT_META).write_text("{not json")
    broken = rewire.runs_dir() / "rw-broken"
    broken.mkdir()
    (broken / rewire.RUN_FILE).write_text("{half a")
    assert [c["step"] for c in rewire.run_info(run_id)["checkpoints"]] == [2]
    assert rewire.run_info(run_id)["damaged"] == [f"step-000001 of run {run_id} is damaged (unreadable "
                                                  f"{CHECKPOINT_META}); left out"]
    assert main(["rewire", "--list"]) == 0
    out, err = capsys.readouterr()
    assert run_id in out and "rw-broken" not in out
    assert f"warning: step-000001 of run {run_id} is damaged" in err
    assert "warning: run rw-broken is damaged (run.json unreadable); left out" in err
    triples = tmp_path / "facts.csv"
    triples.write_text("subject,relation,object\naspirin,may_treat,pain\nmetformin,may_treat,diabetes\n")
    assert main(["sweep", "--run", run_id, "--dataset", "triples", "--data-dir", str(triples), "--device", "cpu",
                 "--format", "json", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert [p["step"] for p in json.loads(out)["curves"]["full:macro:acc@1"]] == [0, 2]
    assert f"warning: step-000001 of run {run_id} is damaged" in err
