"""DisKnE (Alghanmi et al. 2021): splits, negatives, a/an correction, F1 aggregation, fine-tuning, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from probekit.diskne import build, data, finetune, negatives, results, splits
from probekit.diskne.data import Disease, DisKnESet, Positive
from probekit.errors import ProbekitError


def _pos(pid, premise, hypothesis, disease_name, disease, category="symptoms_diseases", also=()):
    start = hypothesis.index(disease_name)
    return Positive(pid, premise, hypothesis, (start, start + len(disease_name)), disease, category, tuple(also))


@pytest.fixture
def hand_set() -> DisKnESet:
    """The hand-worked example: five diseases, seven positives."""
    diseases = {d.id: d for d in [
        Disease("A", "asthma", ("reactive airway disease",)), Disease("B", "bronchitis"), Disease("C", "cystitis"),
        Disease("D", "diabetes"), Disease("E", "eczema")]}
    positives = [
        _pos("p1", "Wheezing at night.", "The patient has an asthma", "asthma", "A"),
        _pos("p2", "Started on an inhaler.", "The patient has asthma", "asthma", "A", "treatments_diseases"),
        _pos("p3", "Productive cough.", "The patient has a bronchitis", "bronchitis", "B"),
        _pos("p4", "Dysuria.", "The patient has a cystitis", "cystitis", "C"),
        _pos("p5", "Known reactive airway disease, now dysuria.", "The patient has cystitis", "cystitis", "C"),
        _pos("p6", "Itchy rash.", "The patient has an eczema", "eczema", "E"),
        _pos("p7", "Polyuria.", "The patient has a diabetes", "diabetes", "D"),
    ]
    return DisKnESet("hand", diseases, positives)


HAND_NEG = {"A": ["B", "E"], "B": ["A", "C"], "C": ["B", "E"], "D": ["C", "A"], "E": ["C", "A"]}


def _key(e):
    return (e.premise, e.hypothesis, e.label)


def test_split_matches_hand_worked_example(hand_set):
    """§3.3: "Test_X contains all the positive examples from E_X. Moreover, for each e in E_X and each Y in
    neg(X) we add a negative example e_{X->Y} to Test_X which is obtained by replacing the occurrence of X by Y.
    [...] The positive examples in Train_X consist of all examples from E in which X is not mentioned. Note that
    we also remove examples in which these diseases are only mentioned in the premise. Furthermore, we check for
    occurrences of all the synonyms of these diseases". With the issue's reading that Train_X never mentions X
    or its negatives: target A (neg B, E) -> p3 (B) and p6 (E) go, p5 goes (A's synonym in its premise),
    p4 stays without negatives (C->B, C->E are banned), p7 stays with D->C but not D->A."""
    sp = splits.split_for(hand_set, "A", HAND_NEG, hypothesis="full", val_fraction=0.0)
    assert sorted(map(_key, sp.test)) == sorted([
        ("Wheezing at night.", "The patient has an asthma", 1),
        ("Wheezing at night.", "The patient has a bronchitis", 0),  # an -> a before a consonant
        ("Wheezing at night.", "The patient has an eczema", 0),
        ("Started on an inhaler.", "The patient has asthma", 1),
        ("Started on an inhaler.", "The patient has bronchitis", 0),
        ("Started on an inhaler.", "The patient has eczema", 0),
    ])
    assert sorted(map(_key, sp.train)) == sorted([
        ("Dysuria.", "The patient has a cystitis", 1),
        ("Polyuria.", "The patient has a diabetes", 1),
        ("Polyuria.", "The patient has a cystitis", 0),
    ])
    assert sp.validation == []
    assert [e.category for e in sp.test_of("treatments_diseases")] == ["treatments_diseases"] * 3


def test_canonical_hypothesis_is_the_disease_name(hand_set):
    """§3.4: "we replace each hypothesis by the name of the corresponding disease X"."""
    sp = splits.split_for(hand_set, "A", HAND_NEG, val_fraction=0.0)
    assert sorted({e.hypothesis for e in sp.test}) == ["asthma", "bronchitis", "eczema"]
    assert sorted(map(_key, sp.train)) == sorted([("Dysuria.", "cystitis", 1), ("Polyuria.", "diabetes", 1),
                                                  ("Polyuria.", "cystitis", 0)])


@pytest.mark.parametrize(("before", "y", "expected"), [
    ("The patient has an ", "stroke", "The patient has a "),
    ("The patient has a ", "aneurysm", "The patient has an "),
    ("An ", "ulcer", "An "),
    ("A ", "infarct", "An "),
    ("The patient has ", "aneurysm", "The patient has "),  # no article: untouched
    ("Banana ", "ulcer", "Banana "),  # "a" inside a word is not an article
])
def test_a_an_correction(before, y, expected):
    """§3.3: "If the word before the occurrence of X is a or an, we modify it depending on whether Y starts
    with a vowel or consonant." """
    assert splits.fix_article(before, y) == expected


def test_known_true_negatives_are_never_generated(hand_set):
    """A negative e_{X->Y} is only a negative if the premise does not also support Y (the derived set's KB
    says so in ``also_true``); such swaps are skipped."""
    p = _pos("q", "Fever.", "The patient has a bronchitis", "bronchitis", "B", also=("C",))
    ex = splits.with_negatives(hand_set, p, HAND_NEG)
    assert [(e.hypothesis, e.label) for e in ex] == [("bronchitis", 1), ("asthma", 0)]


def _demo_set():
    from probekit.datasets import load_dataset

    return build.derive(load_dataset("demo"), seed=0)


def test_no_test_disease_leaks_into_its_training_set():
    """§3.3 on the derived demo set, for every target X: no training or validation example names X or a
    disease of neg(X) (any synonym) in premise or hypothesis, and every test example is about X or neg(X)."""
    ds = _demo_set()
    rng = np.random.default_rng(0)
    neg = negatives.nearest(ds, rng.normal(size=(len(ds.diseases), 8)), n=4)
    assert splits.targets(ds)
    for x in splits.targets(ds):
        banned = {x, *neg[x]}
        names = [n for d in banned for n in ds.diseases[d].names]
        sp = splits.split_for(ds, x, neg, hypothesis="full", seed=1)
        assert sp.test and sp.train
        for e in sp.train + sp.validation:
            assert e.disease not in banned
            assert not splits.mentions(e.premise, names) and not splits.mentions(e.hypothesis, names)
        assert {e.disease for e in sp.test if e.label == 1} == {x}
        assert {e.disease for e in sp.test if e.label == 0} <= set(neg[x])
        n_pos = sum(e.label for e in sp.train + sp.validation)
        assert sum(e.label for e in sp.validation) == max(1, round(0.1 * n_pos))  # 10 % for validation


def test_negatives_exclude_the_disease_itself_and_related_names():
    """§3.2: negatives are "similar to X, but not ancestors or descendants of X"; approximated here by
    excluding X itself, shared synonyms and names containing one another as whole words."""
    diseases = {d.id: d for d in [Disease("1", "diabetes mellitus"), Disease("2", "type 2 diabetes mellitus"),
                                  Disease("3", "asthma"), Disease("4", "pneumonia"),
                                  Disease("5", "sugar disease", ("diabetes mellitus",))]}
    ds = DisKnESet("n", diseases, [_pos("p", "x", "diabetes mellitus", "diabetes mellitus", "1")])
    vectors = np.array([[1.0, 0.0], [1.0, -0.01], [0.9, 0.1], [0.1, 1.0], [1.0, 0.0]])  # 1 is closest to 1, 2, 5
    neg = negatives.nearest(ds, vectors, n=10)
    assert neg["1"] == ["3", "4"]
    assert all(x not in ys for x, ys in neg.items())
    assert negatives.nearest(ds, vectors, n=1)["3"] == ["1"]  # 1 and 5 tie: the lower id wins


def test_negatives_by_the_encoders_own_name_embeddings(tiny_encoder):
    ds = _demo_set()
    neg = negatives.for_model(ds, tiny_encoder, n=10)
    assert set(neg) == set(ds.diseases)
    for x, ys in neg.items():
        assert x not in ys and len(ys) == len(set(ys)) and 1 <= len(ys) <= 10


def test_build_is_deterministic_by_seed_and_written_to_the_cache():
    a, path = build.build("demo", seed=3)
    b, _ = build.build("demo", seed=3)
    c, _ = build.build("demo", seed=4)
    assert a.version == b.version and a.version != c.version
    assert "cache" in str(path) or "pk" in str(path)
    again = data.read_set(path)
    assert again.version == a.version and again.positives == a.positives
    for p in a.positives:  # canonical mention spans point at the disease name
        assert p.hypothesis[p.span[0]:p.span[1]] == a.diseases[p.disease].name
        assert not splits.mentions(p.premise, a.diseases[p.disease].names)
    assert set(a.categories) == {"symptoms_diseases", "disease_diseases"}


def test_build_from_medlama_has_all_three_categories(monkeypatch, medlama_dir):
    monkeypatch.setenv("PROBEKIT_MEDLAMA_DIR", str(medlama_dir))
    ds, _ = build.build("medlama", max_diseases=5)
    assert ds.categories == ["disease_diseases", "symptoms_diseases", "treatments_diseases"]
    assert all(len(ds.eligible(c)) == 5 for c in ds.categories)


# ---------------------------------------------------------------- results
def test_confusion_against_a_naive_count():
    labels, preds = [1, 1, 0, 0, 0, 1], [1, 0, 1, 0, 0, 1]
    c = results.confusion(labels, preds)
    assert (c["tp"], c["fp"], c["fn"], c["tn"], c["support"]) == (2, 1, 1, 2, 3)
    assert c["f1"] == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
    assert results.confusion([1, 0], [0, 0])["f1"] == 0.0  # nothing predicted positive: F1 0, as zero_division=0


def test_macro_weighted_and_std_over_seeds_against_hand_numbers():
    """Tables 2–6: per disease "F1 (%) averaged over three runs"; "Standard deviations (over the three runs)
    of the macro and weighted average". Hand numbers: d1 (support 2) F1 0.5 / 1.0 and d2 (support 1) F1
    0.0 / 1.0 over seeds 0 / 1. Macro per seed 0.25 / 1.0 -> 0.625 ± 0.5303; weighted 1/3 / 1.0 ->
    0.6667 ± 0.4714 (sample std over seeds)."""
    cells = pd.DataFrame([
        {"model": "m", "category": "c", "target": "d1", "disease": "D1", "seed": 0, "f1": 0.5, "support": 2},
        {"model": "m", "category": "c", "target": "d1", "disease": "D1", "seed": 1, "f1": 1.0, "support": 2},
        {"model": "m", "category": "c", "target": "d2", "disease": "D2", "seed": 0, "f1": 0.0, "support": 1},
        {"model": "m", "category": "c", "target": "d2", "disease": "D2", "seed": 1, "f1": 1.0, "support": 1},
    ])
    s = results.summary(cells).iloc[0]
    assert (s["diseases"], s["seeds"]) == (2, 2)
    assert s["macro"] == pytest.approx(0.625) and s["macro_std"] == pytest.approx(0.75 / math.sqrt(2))
    assert s["weighted"] == pytest.approx(2 / 3) and s["weighted_std"] == pytest.approx((2 / 3) / math.sqrt(2))
    d = results.per_disease(cells).set_index("target")
    assert d.loc["d1", "f1"] == pytest.approx(0.75) and d.loc["d2", "f1"] == pytest.approx(0.5)
    one = results.summary(cells[cells["seed"] == 0]).iloc[0]
    assert one["macro"] == pytest.approx(0.25) and math.isnan(one["macro_std"])


# ---------------------------------------------------------------- fine-tuning
def _toy(n: int, seed: int):
    """Trivially separable: the hypothesis "malaria" is entailed, "influenza" never is."""
    rng = np.random.default_rng(seed)
    words = ["fever", "chills", "cough", "rash", "pain", "nausea"]
    out = []
    for i in range(n):
        label = i % 2
        premise = "The patient reports " + " and ".join(rng.choice(words, size=2, replace=False)) + "."
        out.append(splits.Example(premise, "malaria" if label else "influenza", label, "d", "c", str(i)))
    return out


def test_tiny_model_learns_a_trivially_separable_toy_set(tiny_encoder):
    """Proves the loop trains: loss falls and held-out F1 reaches 1 on a set a classifier must separate."""
    s = finetune.FinetuneSettings(lr=3e-3, batch_size=8, max_epochs=8, patience=8)
    clf = finetune.classifier(tiny_encoder, seed=0)
    fit = finetune.train(clf, tiny_encoder.tokenizer, _toy(48, 0), _toy(8, 1), s, seed=0, device=tiny_encoder.device)
    assert fit["history"][-1]["train_loss"] < 0.5 * fit["history"][0]["train_loss"]
    test = _toy(20, 2)
    preds = finetune.predict(clf, tiny_encoder.tokenizer, test, s, tiny_encoder.device)
    assert results.confusion([e.label for e in test], preds)["f1"] == 1.0
    # the base model's weights are untouched (the classifier trains a copy)
    base = finetune.classifier(tiny_encoder, seed=0)
    assert all(torch_equal(a, b) for a, b in zip(base.base_model.state_dict().values(),
                                                 tiny_encoder.encoder.state_dict().values(), strict=False))


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a.cpu(), b.cpu()))


def test_run_cell_is_deterministic_on_cpu_and_reports_eligible_categories(tiny_encoder_dir):
    ds, path = build.build("demo")
    rng = np.random.default_rng(0)
    neg = negatives.nearest(ds, rng.normal(size=(len(ds.diseases), 8)), n=3)
    target = ds.eligible("symptoms_diseases")[0]
    cfg = finetune.cell_settings(model=str(tiny_encoder_dir), set_path=str(path), target=target, seed=0,
                                 negatives=neg, categories=["symptoms_diseases", "disease_diseases"],
                                 finetune={"max_epochs": 2, "lr": 1e-4}, device="cpu")
    json.dumps(cfg)  # the unit of work travels as JSON (a cluster layer can ship it)
    a, b = finetune.run_cell(cfg), finetune.run_cell(cfg)
    assert a["history"] == b["history"] and a["categories"] == b["categories"]
    json.dumps(a)
    want = [c for c in cfg["categories"] if len(ds.positives_of(target, c)) >= 2]
    assert [r["category"] for r in a["categories"]] == want
    for r in a["categories"]:
        assert r["support"] == len(ds.positives_of(target, r["category"]))
    assert a["epochs"] <= 2 and a["train_examples"] > 0 and a["validation_examples"] > 0


def test_hypothesis_only_never_sees_the_premise(tiny_encoder):
    s = finetune.FinetuneSettings(hypothesis_only=True)
    feats = finetune._encode(tiny_encoder.tokenizer, _toy(2, 0), s)
    text = tiny_encoder.tokenizer.decode(feats[0]["input_ids"], skip_special_tokens=True)
    assert text == "influenza"


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(("kw", "msg"), [({"lr": 0}, "learning rate"), ({"max_epochs": 0}, "epochs"),
                                         ({"hypothesis": "short"}, "unknown hypothesis form 'short'"),
                                         ({"val_fraction": 1.0}, "validation fraction")])
def test_bad_finetune_settings(kw, msg):
    with pytest.raises(ProbekitError, match=msg):
        finetune.FinetuneSettings(**kw)
    with pytest.raises(ProbekitError, match="unknown fine-tuning setting"):
        finetune.FinetuneSettings.from_dict({"learning_rate": 1})


def test_bad_split_and_set_inputs(hand_set, tmp_path):
    with pytest.raises(ProbekitError, match="unknown disease 'Z'"):
        splits.split_for(hand_set, "Z", HAND_NEG)
    with pytest.raises(ProbekitError, match="unknown category 'tests'"):
        splits.targets(hand_set, ["tests"])
    with pytest.raises(ProbekitError, match="not found: build one"):
        data.read_set(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ProbekitError, match="bad.json is not a DisKnE set"):
        data.read_set(tmp_path / "bad.json")
    with pytest.raises(ProbekitError, match="unknown DisKnE source 'mednli'"):
        build.build("mednli")


def test_derive_needs_the_three_relations(tiny_dataset):
    with pytest.raises(ProbekitError, match="has no disease_may_have_finding"):
        build.derive(tiny_dataset)


# ---------------------------------------------------------------- the licensed path
def _licensed_files(tmp_path):
    nli = tmp_path / "mli_train_v1.jsonl"
    rows = [("p1", "He had crushing chest pain.", "The patient has an MI"),
            ("p2", "Troponin was elevated.", "The patient has an MI"),
            ("p3", "Started on albuterol.", "The patient has asthma"),
            ("p4", "Known asthma, now wheezing.", "The patient has a COPD exacerbation")]
    nli.write_text("\n".join(json.dumps({"pairID": p, "sentence1": s1, "sentence2": s2, "gold_label": "entailment"})
                             for p, s1, s2 in rows))
    ann = tmp_path / "annotation.csv"
    ann.write_text("pair_id,CUI,label,category,original_cui,start_index,end_index\n"
                   "p1,C1,entailment,symptoms_diseases,C1,19,21\n"
                   '"p1,ng",C2,non-entailment,symptoms_diseases,C1,,\n'
                   "p2,C1,entailment,tests_diseases,C1,19,21\n"
                   "p3,C2,entailment,treatments_diseases,C2,16,22\n"
                   "p4,C3,entailment,symptoms_diseases,C3,18,22\n")
    return nli, ann


def test_licensed_loader_reads_mednli_and_the_annotation_csv(tmp_path):
    nli, ann = _licensed_files(tmp_path)
    ds = data.load_licensed([nli], ann)
    assert ds.diseases["C1"].name == "MI" and ds.diseases["C3"].name == "COPD"
    assert ds.negatives == {"C1": ["C2"]}
    assert ds.categories == ["symptoms_diseases", "tests_diseases", "treatments_diseases"]
    sp = splits.split_for(ds, "C1", ds.negatives, hypothesis="full", val_fraction=0.0)
    assert ("He had crushing chest pain.", "The patient has an asthma", 0) in map(_key, sp.test)
    # C2 (asthma) is C1's negative: p3 (about C2) and p4 (asthma in its premise) never train for C1
    assert sp.train == []
    neg_csv = tmp_path / "neg.csv"
    neg_csv.write_text("disease,negative_disease\nMI,COPD\nC2,MI\n")
    assert data.load_licensed([nli], ann, negatives_csv=neg_csv).negatives == {"C1": ["C3"], "C2": ["C1"]}


def test_licensed_loader_names_each_missing_file_and_column(tmp_path):
    nli, ann = _licensed_files(tmp_path)
    with pytest.raises(ProbekitError, match="the NLI file not found: .*missing.jsonl"):
        data.load_licensed([tmp_path / "missing.jsonl"], ann)
    with pytest.raises(ProbekitError, match="needs the MedNLI / MEDIQA-NLI JSONL files"):
        data.load_licensed([], ann)
    with pytest.raises(ProbekitError, match="DisKnE annotation CSV .* not found"):
        data.load_licensed([nli], tmp_path / "ann.csv")
    bad = tmp_path / "bad.csv"
    bad.write_text("pair_id,cui,category\np1,C1,symptoms_diseases\n")
    with pytest.raises(ProbekitError, match=r"bad.csv, line 1: missing column\(s\) CUI"):
        data.load_licensed([nli], bad)
    neg_csv = tmp_path / "neg.csv"
    neg_csv.write_text("disease,negative\nMI,COPD\n")
    with pytest.raises(ProbekitError, match=r"neg.csv, line 1: missing column\(s\) negative_disease"):
        data.load_licensed([nli], ann, negatives_csv=neg_csv)
    neg_csv.write_text("disease,negative_disease\nMI,gout\n")
    with pytest.raises(ProbekitError, match="neg.csv, line 2, column negative_disease: 'gout' is not a disease"):
        data.load_licensed([nli], ann, negatives_csv=neg_csv)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"pairID": "p1", "sentence1": "x"}\n')
    with pytest.raises(ProbekitError, match="broken.jsonl, line 1: missing field.*sentence2"):
        data.load_licensed([broken], ann)


# ---------------------------------------------------------------- runs in DuckDB
def test_run_grid_stores_cells_and_resumes(tiny_encoder_dir):
    from probekit.diskne import runs

    ds, path = build.build("demo")
    two = ds.eligible("symptoms_diseases")[:2]
    seen = []
    opts = {"categories": ["symptoms_diseases"], "seeds": [0, 1], "diseases": two, "n_negatives": 3, "device": "cpu",
            "finetune": {"max_epochs": 1, "max_train": 24}}
    [run_id] = runs.run_grid([str(tiny_encoder_dir)], path, progress=lambda d, t, s: seen.append((d, t, s)), **opts)
    run = runs.get_run(run_id)
    assert run["status"] == "done" and run["n_cells"] == 4 and run["seeds"] == [0, 1]
    assert set(run["negatives"]) == set(ds.diseases) and all(x not in ys for x, ys in run["negatives"].items())
    cells = runs.load_cells([run_id])
    assert len(cells) == 4 and set(cells["target"]) == set(two) and set(cells["seed"]) == {0, 1}
    assert (cells["support"] == 3).all()
    assert seen[-1][0] == seen[-1][1] == 4 and any(ds.diseases[two[0]].name in s for *_, s in seen)
    s = results.summary(cells)
    assert len(s) == 1 and s.iloc[0]["seeds"] == 2 and s.iloc[0]["diseases"] == 2
    # the same settings again: a finished run is not resumed, a new one starts; an unfinished one resumes
    with runs._store().transaction() as cur:
        cur.execute("UPDATE diskne_runs SET status = 'cancelled' WHERE run_id = ?", [run_id])
        cur.execute("DELETE FROM diskne_cells WHERE run_id = ? AND seed = 1", [run_id])
    calls = []

    def counting_map(fn, cell_list):
        calls.extend(c["seed"] for c in cell_list)
        live = runs.running_cells()  # the page's progress per disease: the resumed run's stored cells
        assert len(live) == 2 and set(live["seed"]) == {0}
        return (fn(json.loads(json.dumps(c))) for c in cell_list)  # as a cluster would: JSON in, dict out

    assert runs.run_grid([str(tiny_encoder_dir)], path, map_cells=counting_map, **opts) == [run_id]
    assert calls == [1, 1] and len(runs.load_cells([run_id])) == 4 and runs.get_run(run_id)["status"] == "done"
    assert run_id in set(runs.list_runs()["run_id"])
    with pytest.raises(ProbekitError, match="no DisKnE run 'nope'"):
        runs.get_run("nope")
    with pytest.raises(ProbekitError, match="is not an evaluated disease"):
        runs.run_grid([str(tiny_encoder_dir)], path, **{**opts, "diseases": ["nope"]})


# ---------------------------------------------------------------- CLI
def _cli(capsys, *argv):
    from probekit import cli

    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_build_run_show(capsys, tiny_encoder_dir):
    code, out, _ = _cli(capsys, "diskne", "build", "--format", "json")
    assert code == 0
    built = json.loads(out)
    assert built["categories"]["symptoms_diseases"]["eligible"] == 9
    target = data.read_set(built["path"]).eligible("symptoms_diseases")[0]
    code, out, _ = _cli(capsys, "diskne", "run", "--set", built["path"], "--model", str(tiny_encoder_dir),
                        "--category", "symptoms_diseases", "--disease", target, "--seeds", "0", "--epochs", "1",
                        "--max-train", "16", "--device", "cpu", "--quiet", "--format", "json")
    assert code == 0
    shown = json.loads(out)
    [run] = shown["runs"]
    assert run["status"] == "done" and shown["summary"][0]["diseases"] == 1
    assert shown["diseases"][0]["target"] == target
    code, out, _ = _cli(capsys, "diskne", "show")
    assert code == 0 and run["run_id"] in out
    code, out, _ = _cli(capsys, "diskne", "show", run["run_id"])
    assert code == 0 and "Symptoms → Disease" in out and "macro F1 %" in out


@pytest.mark.parametrize(("argv", "match"), [
    (["diskne", "run", "--lr", "0"], "learning rate must be positive"),
    (["diskne", "run", "--category", "tests_diseases"], "unknown category 'tests_diseases'"),
    (["diskne", "show", "dk-nope"], "no DisKnE run 'dk-nope'"),
    (["diskne", "build", "--source", "licensed", "--out", "x.json", "--nli", "missing.jsonl"],
     "the NLI file not found"),
    (["diskne", "build", "--source", "licensed"], "needs --out FILE"),
    (["diskne", "run", "--set", "nope.json"], "DisKnE set nope.json not found"),
])
def test_cli_bad_input_is_one_error_line(capsys, argv, match):
    code, out, err = _cli(capsys, *argv)
    assert code == 2 and err.startswith("error: ") and match in err and len(err.strip().splitlines()) == 1


def test_run_cell_says_which_disease_has_no_training_data(tmp_path):
    nli, ann = _licensed_files(tmp_path)
    ds = data.load_licensed([nli], ann)
    path = data.save_set(ds, tmp_path / "licensed.json")
    cfg = finetune.cell_settings(model="default", set_path=str(path), target="C1", seed=0, negatives=ds.negatives,
                                 categories=ds.categories)
    with pytest.raises(ProbekitError, match="the training set for 'MI' is empty"):
        finetune.run_cell(cfg)
