"""Fine-tuning a sequence-pair classifier on one disease's split, and ``run_cell``, the unit of work.

The paper's setup (§4.1): "we fix the learning rate at 2e-5, batch size of 8 and we set the maximum
number of epochs to 8 with the use of early stopping. We used 10% of the training set as validation
split." The rest is not in the paper; two named recipes (:data:`RECIPES`) fill it in:

* ``diskne-reference``: the authors' ``evaluate.py`` (israa-alghanmi/DisKnE@11bbdb9): ``Adam(model.parameters(),
  lr = lr)``, ``get_linear_schedule_with_warmup(optimizer, num_warmup_steps = 0, num_training_steps =
  total_steps)`` over all 8 epochs, ``clip_grad_norm_(model.parameters(), 1.0)``, ``max_length=256``, a
  counter of epochs whose validation loss is not below the previous epoch's (``if no_improvement >1:
  break``) and the last weights kept; its training loop never clears gradients (no ``zero_grad``), so
  they accumulate over the whole run, and this recipe does the same. The training set is filtered as the
  repository's ``splits.py`` does (:data:`~probekit.diskne.splits.TRAIN_FILTERS`). The default for the
  licensed (paper's) set.
* ``probekit``: AdamW (weight decay 0.01) at a constant lr, no clipping, patience 1 on the validation
  loss with the best epoch restored, 128 tokens, the strict training filter. The default for the derived
  smoke sets (and the reading of every run stored before the recipes existed).

:func:`run_cell` is a pure function of a JSON-able settings dict: it reads the set, builds the split,
fine-tunes, evaluates and returns a JSON-able dict. It writes nothing, so a grid/cluster layer can call
it unchanged on any machine that sees the set file; the driver (:mod:`probekit.diskne.runs`) alone
writes DuckDB.
"""

from __future__ import annotations

import copy
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING

import torch

from .. import models
from ..errors import ProbekitError
from ..jobs import Cancelled, Progress
from ..memo import Memo
from .data import read_set
from .recipes import OPTIMIZERS, RECIPES, SCHEDULES, STOPPING
from .results import confusion
from .splits import HYPOTHESES, TRAIN_FILTERS, Example, split_for, train_counts

if TYPE_CHECKING:
    from ..models import LoadedModel

@dataclass(frozen=True)
class FinetuneSettings:
    """The paper's settings plus one recipe's (:data:`RECIPES`; the field defaults are ``probekit``'s)."""

    recipe: str = "probekit"
    lr: float = 2e-5
    batch_size: int = 8
    max_epochs: int = 8
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    schedule: str = "constant"
    """``linear``: decay to 0 over ``max_epochs`` epochs, no warm-up (``get_linear_schedule_with_warmup``)."""
    clip_norm: float = 0.0
    """Gradient-norm clipping before each step; 0 = none."""
    clear_grads: bool = True
    """False reproduces the reference loop, which never calls ``zero_grad`` (gradients accumulate)."""
    stopping: str = "best"
    """``best``: stop after ``patience`` epochs without a new best validation loss, restore the best epoch;
    ``reference``: count epochs whose validation loss is not below the previous epoch's, stop when the count
    reaches ``patience``, keep the last weights."""
    patience: int = 1
    val_fraction: float = 0.1
    max_length: int = 128
    train_filter: str = "strict"
    hypothesis: str = "canonical"
    """``canonical`` (the disease name, §3.4) or ``full`` (the original sentence)."""
    hypothesis_only: bool = False
    """The hypothesis-only baseline: the classifier never sees the premise."""
    max_train: int | None = None
    """Cap on training examples (sampled by seed) for quick runs; None = the paper's full Train_X."""

    def __post_init__(self):
        checks = [(self.lr > 0, f"learning rate must be positive, got {self.lr}"),
                  (self.batch_size >= 1, f"batch size must be at least 1, got {self.batch_size}"),
                  (self.max_epochs >= 1, f"epochs must be at least 1, got {self.max_epochs}"),
                  (self.patience >= 1, f"patience must be at least 1, got {self.patience}"),
                  (0 <= self.val_fraction < 1, f"validation fraction must be in [0, 1), got {self.val_fraction}"),
                  (8 <= self.max_length <= 512, f"max length must be in 8..512, got {self.max_length}"),
                  (self.optimizer in OPTIMIZERS,
                   f"unknown optimizer {self.optimizer!r}; available: {', '.join(OPTIMIZERS)}"),
                  (self.weight_decay >= 0, f"weight decay must be >= 0, got {self.weight_decay}"),
                  (self.schedule in SCHEDULES,
                   f"unknown lr schedule {self.schedule!r}; available: {', '.join(SCHEDULES)}"),
                  (self.clip_norm >= 0, f"gradient clipping norm must be >= 0 (0 = none), got {self.clip_norm}"),
                  (self.stopping in STOPPING,
                   f"unknown stopping rule {self.stopping!r}; available: {', '.join(STOPPING)}"),
                  (self.train_filter in TRAIN_FILTERS,
                   f"unknown training-set filter {self.train_filter!r}; available: {', '.join(TRAIN_FILTERS)}"),
                  (self.hypothesis in HYPOTHESES,
                   f"unknown hypothesis form {self.hypothesis!r}; available: {', '.join(HYPOTHESES)}"),
                  (self.max_train is None or self.max_train >= 1,
                   f"max training examples must be at least 1, got {self.max_train}")]
        for ok, message in checks:
            if not ok:
                raise ProbekitError(message)

    @classmethod
    def from_dict(cls, d: dict | None, *, recipe: str | None = None) -> FinetuneSettings:
        """``d``'s fields over its recipe's (``d['recipe']``, else ``recipe``, else ``probekit``); a field
        given as None takes the recipe's value."""
        known = {f.name for f in fields(cls)}
        given = {k: v for k, v in (d or {}).items() if v is not None}
        unknown = sorted(set(given) - known)
        if unknown:
            raise ProbekitError(f"unknown fine-tuning setting(s) {', '.join(unknown)}; available: "
                                f"{', '.join(sorted(known))}")
        name = given.get("recipe") or recipe or "probekit"
        return cls(**{**RECIPES.get_or_raise(name), **given, "recipe": name})

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- model
def classifier(model, *, seed: int) -> torch.nn.Module:
    """A fresh sequence-classification model (2 labels) on a copy of ``model``'s encoder weights.

    ``model`` is a loaded :class:`~probekit.models.LoadedModel` (any encoder of the picker, including
    rewired checkpoints); the classification head is initialised from ``seed``.
    """
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    cfg = copy.deepcopy(model.encoder.config)
    cfg.num_labels = 2
    torch.manual_seed(seed)
    try:
        clf = AutoModelForSequenceClassification.from_config(cfg)
    except ValueError as e:
        raise ProbekitError(f"model {model.id!r} has no sequence-classification head in transformers: "
                            f"{str(e).splitlines()[0][:200]}") from None
    state = {k: v.detach().to("cpu") for k, v in model.encoder.state_dict().items()}
    missing, unexpected = clf.base_model.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if "pooler" not in k]:
        raise ProbekitError(f"the weights of {model.id!r} do not fit its own classifier "
                            f"(missing {missing[:2]}, unexpected {unexpected[:2]})")
    return clf


def _release(model: LoadedModel) -> None:
    models.release(model)


_MODEL_MEMO: Memo[tuple[str, str | None], LoadedModel] = Memo(max_entries=1, on_evict=_release)
_MODEL_LOCK = threading.Lock()  # one load at a time


def _loaded(model_id: str, device: str | None) -> LoadedModel:
    """One loaded base model per process (kept between cells of a grid), replaced when another is asked."""
    key = (model_id, device)
    with _MODEL_LOCK:
        hit = _MODEL_MEMO.get(key)
        if hit is None:
            _MODEL_MEMO.clear()  # the old model is released before the new one loads
            hit = models.load(model_id, device=device, mlm=False)
            _MODEL_MEMO.put(key, hit)
        return hit


def release_memo() -> None:
    with _MODEL_LOCK:
        _MODEL_MEMO.clear()


# ---------------------------------------------------------------- training
def _encode(tok, examples: Sequence[Example], s: FinetuneSettings) -> list[dict]:
    if not examples:
        return []
    hyps = [e.hypothesis for e in examples]
    if s.hypothesis_only:
        enc = tok(hyps, truncation=True, max_length=s.max_length)
    else:
        enc = tok([e.premise for e in examples], hyps, truncation="longest_first", max_length=s.max_length)
    return [{k: enc[k][i] for k in enc.keys()} | {"labels": e.label} for i, e in enumerate(examples)]


def _batches(tok, feats: list[dict], size: int, device, order: Sequence[int] | None = None):
    idx = list(order) if order is not None else list(range(len(feats)))
    for start in range(0, len(idx), size):
        batch = tok.pad([feats[i] for i in idx[start:start + size]], return_tensors="pt")
        yield {k: v.to(device) for k, v in batch.items()}


def _autocast(device: torch.device):
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    import contextlib

    return contextlib.nullcontext()


def _eval_loss_and_preds(clf, tok, feats, s, device) -> tuple[float, list[int]]:
    clf.eval()
    total, n, preds = 0.0, 0, []
    with torch.inference_mode(), _autocast(device):
        for batch in _batches(tok, feats, max(32, s.batch_size), device):
            out = clf(**batch)
            logits = out.logits.float()  # (batch, 2)
            total += float(torch.nn.functional.cross_entropy(logits, batch["labels"], reduction="sum"))
            n += int(batch["labels"].shape[0])
            preds += logits.argmax(dim=-1).tolist()
    return (total / n if n else math.nan), preds


def train(clf, tok, train_set: Sequence[Example], validation: Sequence[Example], s: FinetuneSettings, *,
          seed: int, device: torch.device, progress: Progress | None = None,
          should_cancel: Callable[[], bool] | None = None) -> dict:
    """Fine-tune ``clf`` in place with ``s``'s optimiser, schedule, clipping and stopping rule (its recipe)."""
    if not train_set:
        raise ProbekitError("the training set is empty: the DisKnE set is too small for this disease")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    feats, val_feats = _encode(tok, train_set, s), _encode(tok, validation, s)
    clf.to(device)
    optim_cls = torch.optim.Adam if s.optimizer == "adam" else torch.optim.AdamW
    opt = optim_cls(clf.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    steps_per_epoch = math.ceil(len(feats) / s.batch_size)
    sched = None
    if s.schedule == "linear":  # the reference: no warm-up, to 0 at max_epochs even when stopping earlier
        from transformers import get_linear_schedule_with_warmup

        sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=0,
                                                num_training_steps=steps_per_epoch * s.max_epochs)
    history: list[dict] = []
    best_loss, best_state, best_epoch, bad = math.inf, None, 0, 0
    for epoch in range(1, s.max_epochs + 1):
        clf.train()
        order = torch.randperm(len(feats), generator=gen).tolist()
        running, seen = 0.0, 0
        for step, batch in enumerate(_batches(tok, feats, s.batch_size, device, order), start=1):
            if should_cancel is not None and should_cancel():
                raise Cancelled("cancelled")
            with _autocast(device):
                loss = clf(**batch).loss  # mean cross-entropy over the batch
            if s.clear_grads:
                opt.zero_grad(set_to_none=True)
            loss.backward()
            if s.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(clf.parameters(), s.clip_norm)
            opt.step()
            if sched is not None:
                sched.step()
            running += float(loss.detach()) * int(batch["labels"].shape[0])
            seen += int(batch["labels"].shape[0])
            if progress is not None and (step % 20 == 0 or step == steps_per_epoch):
                progress((epoch - 1) * steps_per_epoch + step, s.max_epochs * steps_per_epoch, f"epoch {epoch}")
        val_loss = _eval_loss_and_preds(clf, tok, val_feats, s, device)[0] if val_feats else math.nan
        history.append({"epoch": epoch, "train_loss": running / max(seen, 1), "val_loss": val_loss})
        if not val_feats:
            best_epoch = epoch
            continue
        if s.stopping == "reference":  # "if loss_values[epoch_i-1] < loss_values[epoch_i] or ... ==": +1
            best_epoch = epoch  # the last weights are kept
            if len(history) > 1 and history[-2]["val_loss"] <= val_loss:
                bad += 1
            if bad >= s.patience:
                break
            continue
        if val_loss < best_loss - 1e-6:
            best_loss, best_epoch, bad = val_loss, epoch, 0
            best_state = {k: v.detach().to("cpu", copy=True) for k, v in clf.state_dict().items()}
        else:
            bad += 1
            if bad >= s.patience:
                break
    if s.stopping == "best" and best_state is not None and best_epoch != history[-1]["epoch"]:
        clf.load_state_dict(best_state)
    return {"epochs": len(history), "best_epoch": best_epoch, "history": history}


def predict(clf, tok, examples: Sequence[Example], s: FinetuneSettings, device: torch.device) -> list[int]:
    return _eval_loss_and_preds(clf, tok, _encode(tok, examples, s), s, device)[1] if examples else []


# ---------------------------------------------------------------- the unit of work
def cell_settings(*, model: str, set_path: str, target: str, seed: int, negatives: dict[str, list[str]],
                  categories: Sequence[str], finetune: dict | None = None, device: str | None = None,
                  min_positives: int = 2) -> dict:
    """The JSON-able input of :func:`run_cell` (checked here, so a bad grid fails before it starts; the
    settings are stored in full, so the cell does not depend on a recipe's current values)."""
    ft = FinetuneSettings.from_dict(finetune)
    return {"model": model, "set_path": str(set_path), "target": target, "seed": int(seed),
            "negatives": negatives, "categories": list(categories), "finetune": ft.to_dict(),
            "device": device, "min_positives": int(min_positives)}


def run_cell(settings: dict, *, progress: Progress | None = None,
             should_cancel: Callable[[], bool] | None = None) -> dict:
    """Fine-tune ``settings['model']`` for one (disease, seed) and return F1 per category (pure: no writes).

    Evaluated categories: those of ``settings['categories']`` in which the target has at least
    ``min_positives`` positives ("reporting results for all diseases that have at least two positive
    examples for the considered category"); the test set is restricted to that category.
    """
    started = time.perf_counter()
    s = FinetuneSettings.from_dict(settings.get("finetune"))
    seed, target = int(settings["seed"]), settings["target"]
    ds = read_set(settings["set_path"])
    negatives = {k: list(v) for k, v in settings["negatives"].items()}
    split = split_for(ds, target, negatives, hypothesis=s.hypothesis, val_fraction=s.val_fraction, seed=seed,
                      train_filter=s.train_filter)
    train_set = split.train
    if s.max_train is not None and len(train_set) > s.max_train:
        train_set = random.Random(f"diskne-cap:{seed}:{target}").sample(train_set, s.max_train)
    if not train_set:
        raise ProbekitError(f"the training set for {ds.diseases[target].name!r} is empty: every other positive "
                            "mentions it or one of its negatives (a larger set, or fewer negatives, helps)")
    cats = [c for c in settings["categories"]
            if len(ds.positives_of(target, c)) >= int(settings.get("min_positives", 2))]
    random.seed(seed)
    model = _loaded(settings["model"], settings.get("device"))
    clf = classifier(model, seed=seed)
    fit = train(clf, model.tokenizer, train_set, split.validation, s, seed=seed, device=model.device,
                progress=progress, should_cancel=should_cancel)
    rows = []
    for c in cats:
        test = split.test_of(c)
        preds = predict(clf, model.tokenizer, test, s, model.device)
        rows.append({"category": c, **confusion([e.label for e in test], preds)})
    del clf
    if model.device.type == "cuda":
        torch.cuda.empty_cache()
    return {"model": settings["model"], "model_revision": model.revision, "set_version": ds.version,
            "target": target, "disease": ds.diseases[target].name, "seed": seed, "device": str(model.device),
            "train_examples": len(train_set), "validation_examples": len(split.validation),
            "train_rows_by_filter": train_counts(ds, target, negatives, hypothesis=s.hypothesis),
            "test_examples": len(split.test), "epochs": fit["epochs"], "best_epoch": fit["best_epoch"],
            "history": fit["history"], "categories": rows, "seconds": time.perf_counter() - started}
