"""DisKnE as the authors' repository runs it (israa-alghanmi/DisKnE@11bbdb97b0c40b2406a1111b363346f1fa34ca1e):
the ``diskne-reference`` recipe (evaluate.py), the repository's training filter (splits.py), the paper's F1 rule
against evaluate.py's, and the loader on files in the repository's annotation format."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from probekit.diskne import data, finetune, recipes, results, splits
from probekit.diskne.data import Disease, DisKnESet, Positive
from probekit.errors import ProbekitError


def _toy(n: int, seed: int):
    rng = np.random.default_rng(seed)
    words = ["fever", "chills", "cough", "rash", "pain", "nausea"]
    return [splits.Example("The patient reports " + " and ".join(rng.choice(words, size=2, replace=False)) + ".",
                           "malaria" if i % 2 else "influenza", i % 2, "d", "c", str(i)) for i in range(n)]


# ---------------------------------------------------------------- the recipes registry
@pytest.mark.parametrize("name", sorted(recipes.RECIPES))
def test_every_recipe_is_valid_settings_and_is_stored_in_full(name):
    s = finetune.FinetuneSettings.from_dict({"recipe": name})
    assert s.recipe == name and {k: getattr(s, k) for k in recipes.RECIPES[name]} == recipes.RECIPES[name]
    # a stored run keeps every field, so it never depends on a recipe's later values
    assert finetune.FinetuneSettings.from_dict(s.to_dict()) == s
    # a field given explicitly wins over the recipe; None means "the recipe's"
    assert finetune.FinetuneSettings.from_dict({"recipe": name, "max_length": 64, "lr": None}).max_length == 64


def test_unknown_recipe_is_one_line_with_a_suggestion():
    with pytest.raises(ProbekitError, match="unknown fine-tuning recipe 'diskne-refrence'; did you mean "
                                            "'diskne-reference'"):
        finetune.FinetuneSettings.from_dict({"recipe": "diskne-refrence"})


def test_reference_recipe_reads_evaluate_py():
    """evaluate.py: ``optimizer = Adam(model.parameters(), lr = lr)``; ``get_linear_schedule_with_warmup(optimizer,
    num_warmup_steps = 0, num_training_steps = total_steps)``; ``torch.nn.utils.clip_grad_norm_(model.parameters(),
    1.0)``; ``tokenizer(..., truncation=True,pad_to_max_length=True, max_length=256)``; ``if no_improvement >1:
    break`` (no weights restored)."""
    s = finetune.FinetuneSettings.from_dict({"recipe": "diskne-reference"})
    assert (s.optimizer, s.weight_decay, s.schedule, s.clip_norm, s.max_length) == ("adam", 0.0, "linear", 1.0, 256)
    assert (s.stopping, s.patience, s.clear_grads, s.train_filter) == ("reference", 2, False, "repository")
    assert (s.lr, s.batch_size, s.max_epochs) == (2e-5, 8, 8)  # "lr= 2e-5 / epochs = 8 / batch_size=8"
    old = finetune.FinetuneSettings.from_dict({"lr": 1e-5})  # a run stored before the recipes: the old reading
    assert (old.recipe, old.optimizer, old.stopping, old.max_length) == ("probekit", "adamw", "best", 128)


def test_licensed_sets_default_to_the_reference_recipe(tmp_path):
    ds = DisKnESet("x", {"C1": Disease("C1", "mi")}, [], settings={"kind": "licensed"})
    assert recipes.default_recipe(ds) == "diskne-reference"
    assert recipes.default_recipe(DisKnESet("y", {}, [], settings={"kind": "derived"})) == "probekit"


# ---------------------------------------------------------------- evaluate.py's training loop, re-written
def _evaluate_py_training(clf, tok, feats, val_feats, *, lr, epochs, batch_size, seed):
    """evaluate.py's ``training()`` re-written from reading it (not copied): Adam; a linear decay from lr to 0
    over len(train_dataloader) * epochs steps, no warm-up; per batch ``loss.backward()``, clip to 1.0,
    ``optimizer.step()``, ``scheduler.step()``, and no ``zero_grad`` anywhere, so gradients accumulate; after
    each epoch the mean validation loss over batches; ``if epoch_i!=0: if loss_values[epoch_i-1] <
    loss_values[epoch_i] or loss_values[epoch_i-1] == loss_values[epoch_i]: no_improvement=no_improvement+1``;
    ``if no_improvement >1: break``. The batches are probekit's (same order, same seed) so the loops compare."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(clf.parameters(), lr=lr)
    total_steps = math.ceil(len(feats) / batch_size) * epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, (total_steps - step) / total_steps))
    loss_values: list[float] = []
    no_improvement = 0
    for epoch_i in range(epochs):
        clf.train()
        order = torch.randperm(len(feats), generator=gen).tolist()
        for batch in finetune._batches(tok, feats, batch_size, torch.device("cpu"), order):
            loss = clf(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(clf.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        clf.eval()
        batch_losses = []
        with torch.no_grad():
            for batch in finetune._batches(tok, val_feats, batch_size, torch.device("cpu")):
                batch_losses.append(float(clf(**batch).loss))
        loss_values.append(sum(batch_losses) / len(batch_losses))
        if epoch_i != 0 and loss_values[epoch_i - 1] <= loss_values[epoch_i]:
            no_improvement += 1
        if no_improvement > 1:
            break
    return loss_values


def test_reference_recipe_equals_evaluate_py_training_loop(tiny_encoder):
    """Same weights, same validation losses, same number of epochs as the re-written reference loop."""
    s = finetune.FinetuneSettings.from_dict({"recipe": "diskne-reference", "lr": 3e-3, "max_epochs": 4,
                                             "max_length": 64})
    tok = tiny_encoder.tokenizer
    train, val = _toy(24, 0), _toy(8, 1)  # one validation batch of 8: batch means equal the pair mean
    ours = finetune.classifier(tiny_encoder, seed=0)
    fit = finetune.train(ours, tok, train, val, s, seed=0, device=torch.device("cpu"))
    ref = finetune.classifier(tiny_encoder, seed=0)
    ref_losses = _evaluate_py_training(ref, tok, finetune._encode(tok, train, s), finetune._encode(tok, val, s),
                                       lr=3e-3, epochs=4, batch_size=8, seed=0)
    assert [h["val_loss"] for h in fit["history"]] == pytest.approx(ref_losses, abs=1e-5)
    for (name, a), b in zip(ours.state_dict().items(), ref.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name


@pytest.mark.parametrize("losses, stopping, patience, epochs, kept", [
    # the repository counts epochs not below the *previous* one, cumulatively, and keeps the last weights
    ([0.5, 0.6, 0.4, 0.45, 0.3, 0.2], "reference", 2, 4, 4),
    ([0.5, 0.4, 0.3, 0.2, 0.1, 0.05], "reference", 2, 6, 6),
    ([0.5, 0.5, 0.5], "reference", 2, 3, 3),  # "or loss_values[epoch_i-1] == loss_values[epoch_i]"
    # probekit's reading: patience on a new best, the best epoch restored
    ([0.5, 0.6, 0.4, 0.45, 0.3, 0.2], "best", 1, 2, 1),
])
def test_stopping_rules(monkeypatch, tiny_encoder, losses, stopping, patience, epochs, kept):
    scripted = iter(losses)
    monkeypatch.setattr(finetune, "_eval_loss_and_preds", lambda *a, **k: (next(scripted), []))
    s = finetune.FinetuneSettings(stopping=stopping, patience=patience, max_epochs=len(losses), max_length=32)
    clf = finetune.classifier(tiny_encoder, seed=0)
    fit = finetune.train(clf, tiny_encoder.tokenizer, _toy(8, 0), _toy(2, 1), s, seed=0, device=torch.device("cpu"))
    assert (fit["epochs"], fit["best_epoch"]) == (epochs, kept)


# ---------------------------------------------------------------- splits.py's training filter
def _pos(pid, premise, hypothesis, name, disease, negs=()):
    start = hypothesis.index(name)
    return Positive(pid, premise, hypothesis, (start, start + len(name)), disease, "symptoms_diseases", (), negs)


def test_repository_training_filter_reads_splits_py():
    """splits.py ``prepare_splits`` removes a row when ``str(all_data['CUI'][i])==CUI  or
    str(all_data['original_cui'][i])==CUI or any(x in str(all_data['P'][i]).lower() for x in matches)``:
    X's rows and the rows swapping X in, and any premise holding one of X's names as a lower-cased
    *substring*; the negatives of X and the hypotheses are not looked at. The strict reading bans X and neg(X)
    by whole words in premise and hypothesis."""
    ds = DisKnESet("f", {d.id: d for d in [Disease("X", "MI", ("myocardial infarction",)), Disease("Y", "gout"),
                                            Disease("Z", "flu")]}, [
        _pos("x1", "Chest pain.", "The patient has an MI", "MI", "X"),
        _pos("x2", "Troponin up.", "The patient has an MI", "MI", "X"),
        _pos("z1", "Fever, was admitted.", "The patient has flu", "flu", "Z"),  # "mi" in "admitted"
        _pos("z2", "Known gout, now fever.", "The patient has flu", "flu", "Z"),  # mentions neg(X)
        _pos("z3", "Aches.", "The patient has flu, not gout", "flu", "Z"),  # neg(X) in the hypothesis
        _pos("y1", "Toe pain.", "The patient has gout", "gout", "Y"),  # a positive of neg(X)
    ])
    negs = {"X": ["Y"], "Z": ["X", "Y"], "Y": ["Z"]}
    rep = splits.split_for(ds, "X", negs, val_fraction=0.0, train_filter="repository")
    strict = splits.split_for(ds, "X", negs, val_fraction=0.0, train_filter="strict")
    assert sorted({e.source for e in rep.train}) == ["y1", "z2", "z3"]
    assert sorted({e.source for e in strict.train}) == ["z1"]  # whole words: "admitted" is no MI
    # the repository drops only the rows swapping X in; a row swapping in Y (neg(X)) stays
    assert ("z2", "gout", 0) in {(e.source, e.hypothesis, e.label) for e in rep.train}
    assert all(e.disease != "X" for e in rep.train)
    assert splits.train_counts(ds, "X", negs) == {"strict": 1, "repository": 6}  # z1 alone; y1, z2, z3 + 2 negatives
    assert rep.test == strict.test
    with pytest.raises(ProbekitError, match="unknown training-set filter 'loose'; available: strict, repository"):
        splits.split_for(ds, "X", negs, train_filter="loose")


# ---------------------------------------------------------------- the F1 rule
def _evaluate_py_f1(labels, preds):
    """evaluate.py ``testing()``: ``postives_indices = [i for i, elem in enumerate(flat_true_labels) if 1==elem]``,
    ``true_labels=[1 for d in postives_indices]``, then ``f1_score(true_labels, predictions, average='macro')``:
    sklearn's macro over the labels present in either list, on the positive pairs only (naive re-count)."""
    ys = [1 for y in labels if y == 1]
    ps = [p for y, p in zip(labels, preds, strict=True) if y == 1]
    f1s = []
    for c in sorted(set(ys) | set(ps)):
        tp = sum(y == c and p == c for y, p in zip(ys, ps, strict=True))
        fp = sum(y != c and p == c for y, p in zip(ys, ps, strict=True))
        fn = sum(y == c and p != c for y, p in zip(ys, ps, strict=True))
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(f1s) / len(f1s)


def test_f1_follows_the_paper_not_the_public_evaluate_py():
    """The paper (§4.2): "in terms of F1 score for the positive class" and "an uninformed classifier that always
    predicts true would achieve an F1 score of 0.167" (1 positive to 10 negatives). The public evaluate.py
    scores only the positive pairs, where always-true gets 1.0: probekit keeps the paper's rule."""
    labels = [1] + [0] * 10
    always_true = [1] * 11
    assert results.confusion(labels, always_true)["f1"] == pytest.approx(1 / 6)
    assert round(results.confusion(labels, always_true)["f1"], 3) == 0.167
    assert _evaluate_py_f1(labels, always_true) == 1.0
    half = [1, 0] * 5 + [1]
    labels2 = [1, 1] + [0] * 9
    assert _evaluate_py_f1(labels2, half) == pytest.approx(0.5 * (2 * 1 / 3))  # macro over {0, 1}: recall 1/2


# ---------------------------------------------------------------- the licensed loader, repository format
def _nli(tmp_path):
    nli = tmp_path / "mli_train_v1.jsonl"
    rows = [("a1", "Dyspnea and orthopnea.", "The patient has CHF."),
            ("a2", "Burning on urination.", "The patient has a urinary tract infection"),
            ("a3", "Edema, JVD.", "Patient has CHF")]
    nli.write_text("\n".join(json.dumps({"pairID": p, "sentence1": s1, "sentence2": s2, "gold_label": "entailment"})
                             for p, s1, s2 in rows))
    return nli


def test_loader_reads_the_repository_annotation_format(tmp_path):
    """The repository's terminological files have no category column (``pair_id,CUI,label,original_cui,
    start_index,end_index``); negatives are ``"<pair_id>,ng"`` rows naming the pair's own negative CUI (the
    *random* variants draw them per pair); ``end_index`` is exclusive (C0042029's mention is 18..41, the 23
    characters of "urinary tract infection")."""
    ann = tmp_path / "DisknE_terminological_random_annotation.csv"
    ann.write_text("pair_id,CUI,label,original_cui,start_index,end_index\n"
                   "a1,C0018802,entailment,C0018802,16,19\n"
                   '"a1,ng",C0042029,non-entailment,C0018802,,\n'
                   '"a1,ng",C0011849,non-entailment,C0018802,,\n'
                   "a2,C0042029,entailment,C0042029,18,41\n"
                   '"a2,ng",C0018802,non-entailment,C0042029,,\n'
                   "a3,C0018802,entailment,C0018802,12,15\n"
                   '"a3,ng",C0011849,non-entailment,C0018802,,\n')
    ds = data.load_licensed([_nli(tmp_path)], ann)
    assert ds.categories == ["terminological"]
    assert ds.diseases["C0042029"].name == "urinary tract infection" and ds.diseases["C0018802"].name == "CHF"
    # C0011849 has no name without UMLS: kept out; each pair keeps its own list
    assert {p.id: p.negatives for p in ds.positives} == {"a1:terminological": ("C0042029",),
                                                         "a2:terminological": ("C0018802",),
                                                         "a3:terminological": ()}
    names = tmp_path / "names.csv"
    names.write_text("CUI,name\nC0011849,diabetes mellitus\n")
    named = data.load_licensed([_nli(tmp_path)], ann, names_csv=names)
    assert [p.negatives for p in named.positives] == [("C0042029", "C0011849"), ("C0018802",), ("C0011849",)]
    test = splits.split_for(named, "C0018802", named.negatives, val_fraction=0.0).test
    assert [(e.source, e.hypothesis, e.label) for e in test] == [
        ("a1:terminological", "CHF", 1), ("a1:terminological", "urinary tract infection", 0),
        ("a1:terminological", "diabetes mellitus", 0), ("a3:terminological", "CHF", 1),
        ("a3:terminological", "diabetes mellitus", 0)]
    assert recipes.default_recipe(named) == "diskne-reference"
    path = data.save_set(named, tmp_path / "set.json")
    assert data.read_set(path).positives == named.positives
