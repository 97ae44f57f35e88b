"""Contrastive rewiring's training (Contrastive-Probe's "rewire" step, Meng et al. 2022).

Why: a PLM's [CLS] (or mean) vector of a masked query is not trained to sit near the vector of the
words that fill the mask, so retrieval probing under-reads what the model knows. Rewiring teaches
exactly that game on raw text, with no probing data: pull the masked sentence (:mod:`.data`) towards
the cut-out span (and away from every other sentence and span in the batch) with InfoNCE. A few hundred
steps suffice; the paper probes at step 150.

- :class:`RewireSettings`: everything that decides a run;
- :func:`info_nce`: the loss over the 2B embeddings of a batch of B (query, span) pairs;
- :func:`train`: the loop (AdamW, AMP on CUDA, deterministic on CPU for a fixed seed) that writes a
  run folder ``cache/rewired/<run_id>/`` with ``run.json`` (settings, status, timings), ``log.jsonl``
  (one line per step: the live loss curve) and a checkpoint folder per ``checkpoint_every`` steps,
  each loadable as a model (:mod:`probekit.models` lists them in every picker);
- run folders are read, listed and deleted by :mod:`.runs`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import secrets
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import __version__, atomic, config, models
from ..errors import ProbekitError, positive_int
from ..jobs import Job, Progress
from ..models import CHECKPOINT_META
from ..store import owner
from .data import CORPUS_FILES, SPAN_RULE, make_pairs, read_sentences, resolve_corpus
from .runs import (
    _LIVE,
    LOG_FILE,
    RUN_FILE,
    TRAINER_FILE,
    _now,
    _write_json,
    interrupted_runs,
    keep_log_until,
    lock_run,
    run_info,
    runs_dir,
)

CPU_BATCH_SIZE = 32
"""Default batch on CPU: 192 pairs (the paper's) take ~6x longer per step on two cores."""

StepReport = Callable[[int, int, float], None]
"""step_report(step, total_steps, loss)"""


# ---------------------------------------------------------------- settings
@dataclass(frozen=True)
class RewireSettings:
    """Everything that decides a rewiring run (defaults: the paper's recipe). ``batch_size=None``: 192 on CUDA,
    :data:`CPU_BATCH_SIZE` on CPU; ``layer=None``: the last layer."""

    model: str = config.DEFAULT_MODEL
    corpus: str = "pubmed_0"
    mask_ratio: float = 0.5
    tau: float = 0.04
    lr: float = 2e-5
    weight_decay: float = 0.01
    batch_size: int | None = None
    steps: int = 500
    checkpoint_every: int = 50
    layer: int | None = None
    pooling: str = "cls"
    max_length: int = 48
    dropout: float = 0.1
    seed: int = 0
    max_sentences: int | None = None

    def checked(self) -> RewireSettings:
        """Refuse nonsense with a message naming the setting."""
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ProbekitError(msg)

        need(bool(str(self.model).strip()), "no model given")
        need(0 < self.mask_ratio <= 1, f"mask_ratio must be in (0, 1], got {self.mask_ratio}")
        need(self.tau > 0, f"tau must be positive, got {self.tau}")
        need(0 < self.lr < 1, f"lr must be in (0, 1), got {self.lr}")
        need(self.weight_decay >= 0, f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.batch_size is not None:
            positive_int("batch_size", self.batch_size, minimum=2)  # InfoNCE needs in-batch negatives
        positive_int("steps", self.steps, maximum=100_000)
        positive_int("checkpoint_every", self.checkpoint_every)
        need(self.pooling in ("cls", "mean"), f"unknown pooling {self.pooling!r}; available: cls, mean")
        positive_int("max_length", self.max_length, minimum=4, maximum=512)
        need(0 <= self.dropout < 1, f"dropout must be in [0, 1), got {self.dropout}")
        need(self.max_sentences is None or self.max_sentences >= 2, "max_sentences must be at least 2")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RewireSettings:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# ---------------------------------------------------------------- the loss
def info_nce(queries: torch.Tensor, positives: torch.Tensor, *, tau: float = 0.04) -> torch.Tensor:
    """InfoNCE over the 2B embeddings of B pairs, cosine similarity over temperature ``tau``.

    Each query's positive is its span and each span's positive its query; every other query and
    span of the batch is a negative (the embedding itself is left out). Mean over the 2B anchors.

    >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> round(float(info_nce(q, q.clone(), tau=1.0)), 4)  # positive cos 1, negatives cos 0, 0
    0.5514
    """
    if queries.ndim != 2 or queries.shape != positives.shape:
        raise ProbekitError(f"queries and positives must both be (batch, dim), got {tuple(queries.shape)} "
                            f"and {tuple(positives.shape)}")
    b = queries.shape[0]
    if b < 2:
        raise ProbekitError("InfoNCE needs a batch of at least 2 pairs (the others are the negatives)")
    z = F.normalize(torch.cat([queries, positives]).float(), dim=-1)  # (2B, dim)
    sim = z @ z.T / tau  # (2B, 2B) cosine / tau
    sim.fill_diagonal_(float("-inf"))  # an embedding is never its own candidate
    target = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)]).to(sim.device)  # (2B,) index of the positive
    return F.cross_entropy(sim, target)


# ---------------------------------------------------------------- training
def _short_name(model) -> str:
    return (model.meta.get("base_label") or model.label).split(" (")[0]


def _batches(pairs: list, batch_size: int, rng: random.Random):
    """Endless shuffled batches of exactly ``batch_size`` pairs (a new order each epoch)."""
    order = list(range(len(pairs)))
    while True:
        rng.shuffle(order)
        for start in range(0, len(order) - batch_size + 1, batch_size):
            yield [pairs[i] for i in order[start:start + batch_size]]


class _Embedder:
    """Tokenise a list of texts and return pooled vectors (batch, dim) with gradients."""

    def __init__(self, model, *, layer: int, pooling: str, max_length: int):
        self.model, self.layer, self.pooling, self.max_length = model, layer, pooling, max_length
        self.want_hidden = layer != model.num_layers

    def __call__(self, texts: list[str]) -> torch.Tensor:
        enc = self.model.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                   return_tensors="pt")
        enc = {k: v.to(self.model.device) for k, v in enc.items()}  # each (batch, seq)
        out = self.model.encoder(**enc, output_hidden_states=self.want_hidden)
        hidden = out.hidden_states[self.layer] if self.want_hidden else out.last_hidden_state  # (batch, seq, dim)
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)  # (batch, seq, 1)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def _amp(device: torch.device):
    """bf16 (or fp16 with a grad scaler) autocast on CUDA; full precision on CPU (deterministic)."""
    if device.type != "cuda":
        return contextlib.nullcontext, None
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.amp.GradScaler("cuda") if dtype == torch.float16 else None
    return (lambda: torch.autocast("cuda", dtype=dtype)), scaler


def _save_checkpoint(model, folder: Path, meta: dict) -> Path:
    """Write to a hidden temp folder, then rename: pickers never see a half-written checkpoint."""
    tmp = atomic.temp_name(folder)  # unique: two savers never write into one temp folder
    try:
        model.encoder.save_pretrained(tmp, safe_serialization=True)
        model.tokenizer.save_pretrained(tmp)
        atomic.write_json(tmp / CHECKPOINT_META, meta, indent=1)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def train(settings: RewireSettings, *, device: str | None = None, progress: StepReport | None = None,
          should_cancel: Callable[[], bool] | None = None, run_id: str | None = None,
          notice: Callable[[str], None] | None = None) -> dict:
    """Rewire ``settings.model`` on ``settings.corpus``; returns the final :func:`run_info`.

    The model is loaded afresh (the app's cached copy is never trained). Stopping via
    ``should_cancel`` keeps the checkpoints written so far and saves one at the current step.
    Without ``run_id``, an interrupted run (its process killed) with the same settings on the same device is
    taken over and resumes from its newest checkpoint, with the optimizer and random state saved there, so it
    ends as an uninterrupted run would (on CPU, bit for bit); ``notice`` gets the line that says so
    (``resuming interrupted run … from step 40 of 500``). With ``run_id`` (a page's job) a new run always starts.
    """
    settings = settings.checked()
    corpus_path = resolve_corpus(settings.corpus)
    sentences = read_sentences(corpus_path, limit=settings.max_sentences)
    model = models.load(settings.model, device=device)
    lock, resume = None, None
    for found in interrupted_runs(settings.to_dict(), device=str(model.device)) if run_id is None else []:
        lock = lock_run(runs_dir() / found["run_id"])
        if lock is not None:
            run_id, resume = found["run_id"], found
            break
    run_id = run_id or f"rw-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    folder = runs_dir() / run_id
    if resume is None:
        folder.mkdir(parents=True, exist_ok=False)
        lock = lock_run(folder)
    _LIVE[run_id] = True
    try:
        return _train(model, settings, corpus_path, sentences, folder, run_id, progress, should_cancel,
                      resume=resume, notice=notice)
    finally:
        _LIVE.pop(run_id, None)
        if lock is not None:
            lock.close()
        models.release(model)


def _save_trainer(folder: Path, step: int, opt, scaler) -> None:
    """What resuming at ``step`` needs beside the checkpoint's weights: the optimizer's moments and every random
    state training draws from (dropout; the batch order is replayed from the seed)."""
    state = {"step": step, "optimizer": opt.state_dict(), "torch_rng": torch.get_rng_state(),
             "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
             "scaler": scaler.state_dict() if scaler is not None else None}
    atomic.write(folder / TRAINER_FILE, lambda fh: torch.save(state, fh))


def _restore(model, opt, scaler, folder: Path) -> int:
    """Load the newest trainer state and its checkpoint's weights into ``model`` and ``opt``; returns its step."""
    from safetensors.torch import load_file

    state = torch.load(folder / TRAINER_FILE, map_location="cpu", weights_only=False)
    step = int(state["step"])
    weights: dict = {}
    for part in sorted((folder / f"step-{step:06d}").glob("*.safetensors")):
        weights.update(load_file(part, device=str(model.device)))
    missing, unexpected = model.encoder.load_state_dict(weights, strict=False)
    trained = {name for name, _ in model.encoder.named_parameters()}
    if not weights or unexpected or trained & set(missing):
        raise ProbekitError(f"checkpoint step-{step:06d} of run {folder.name} does not hold the model's weights; "
                            "delete the run (`rewire --list` shows it) to train again from step 0")
    opt.load_state_dict(state["optimizer"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["torch_rng"])
    if state.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return step


def _train(model, settings, corpus_path, sentences, folder, run_id, progress, should_cancel, *,
           resume: dict | None = None, notice: Callable[[str], None] | None = None) -> dict:
    layer = model.num_layers if settings.layer is None else int(settings.layer)
    if not 1 <= layer <= model.num_layers:
        raise ProbekitError(f"layer {layer} out of range: {model.id} has layers 1..{model.num_layers}")
    on_cuda = model.device.type == "cuda"
    batch = settings.batch_size or (192 if on_cuda else CPU_BATCH_SIZE)
    pairs = make_pairs(sentences, seed=settings.seed, ratio=settings.mask_ratio, mask_token=model.mask_token)
    if len(pairs) < batch:
        raise ProbekitError(f"the corpus gives {len(pairs)} sentence pairs, fewer than one batch of {batch}; "
                            "use a larger corpus or a smaller batch")
    corpus = settings.corpus if settings.corpus in CORPUS_FILES else Path(corpus_path).name
    name = _short_name(model)
    extra = (f", layer {layer}" if layer != model.num_layers else "") + (f", seed {settings.seed}"
                                                                        if settings.seed else "")
    info = {"run_id": run_id, "label": f"{name} rewired on {corpus}{extra}", "settings": settings.to_dict(),
            "status": "running", "base_model": model.id, "base_source": model.source,
            "base_revision": model.revision, "base_label": name, "family": model.spec.family,
            "corpus_file": str(corpus_path), "span_rule": SPAN_RULE, "n_pairs": len(pairs), "batch_size": batch,
            "layer": layer,
            "device": str(model.device), "amp": on_cuda, "probekit_version": __version__, "started_at": _now(),
            "steps_done": 0, **owner.owner()}
    if resume is not None:  # the run keeps its identity and start; this process now owns it
        info.update({k: resume[k] for k in ("label", "started_at") if k in resume}, resumed_at=_now())
    _write_json(folder / RUN_FILE, info)

    # Seeds: spans (above), batch order and dropout all follow settings.seed; CPU math is deterministic.
    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed + 1)
    for m in model.encoder.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = settings.dropout
    model.encoder.train()
    embed = _Embedder(model, layer=layer, pooling=settings.pooling, max_length=settings.max_length)
    params = [p for p in model.encoder.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=settings.lr, weight_decay=settings.weight_decay)
    autocast, scaler = _amp(model.device)

    def checkpoint(step: int, loss: float) -> None:
        meta = {"label": f"{info['label']}, step {step}", "run_id": run_id, "step": step, "loss": loss,
                "base_model": model.id, "base_label": name, "family": f"{model.spec.family} (rewired)",
                "pooling": settings.pooling, "layer": layer, "corpus": corpus, "seed": settings.seed,
                "span_rule": SPAN_RULE, "settings": settings.to_dict()}
        _save_checkpoint(model, folder / f"step-{step:06d}", meta)
        _save_trainer(folder, step, opt, scaler)

    t0, step, loss_value, status = time.perf_counter(), 0, float("nan"), "done"
    batches = _batches(pairs, batch, rng)
    if resume is not None:
        step = _restore(model, opt, scaler, folder)
        for _ in range(step):  # the batch order is the seed's: draw the batches the killed run trained on
            next(batches)
        t0 -= keep_log_until(folder, step)
        info.update(steps_done=step)
        if notice is not None:
            notice(f"resuming interrupted run {run_id} from step {step} of {settings.steps} "
                   f"(started {info['started_at']} UTC)")
    try:
        with open(folder / LOG_FILE, "a") as log:
            while step < settings.steps:
                if should_cancel is not None and should_cancel():
                    status = "stopped"
                    break
                queries, spans = zip(*next(batches))
                with autocast():
                    loss = info_nce(embed(list(queries)), embed(list(spans)), tau=settings.tau)
                opt.zero_grad(set_to_none=True)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.step(opt)
                    scaler.update()
                else:
                    loss.backward()
                    opt.step()
                step += 1
                loss_value = float(loss.detach())
                if not math.isfinite(loss_value):
                    raise ProbekitError(f"the loss became {loss_value} at step {step}: lower the learning rate")
                log.write(json.dumps({"step": step, "loss": round(loss_value, 6),
                                      "seconds": round(time.perf_counter() - t0, 3)}) + "\n")
                log.flush()
                if progress is not None:
                    progress(step, settings.steps, loss_value)
                if step % settings.checkpoint_every == 0 or step == settings.steps:
                    model.encoder.eval()
                    checkpoint(step, loss_value)
                    model.encoder.train()
                    info.update(steps_done=step, last_loss=loss_value, updated_at=_now())
                    _write_json(folder / RUN_FILE, info)
        if status == "stopped" and step and step % settings.checkpoint_every:
            model.encoder.eval()
            checkpoint(step, loss_value)
    except BaseException as e:
        info.update(status="failed", error=str(e)[:300], steps_done=step, finished_at=_now())
        _write_json(folder / RUN_FILE, info)
        (folder / TRAINER_FILE).unlink(missing_ok=True)  # only a killed run resumes
        raise
    (folder / TRAINER_FILE).unlink(missing_ok=True)  # ended: its optimizer state (twice the weights) is not needed
    seconds = time.perf_counter() - t0
    info.update(status=status, steps_done=step, last_loss=loss_value, finished_at=_now(), seconds=round(seconds, 2),
                steps_per_s=round(step / seconds, 4) if step else None)
    _write_json(folder / RUN_FILE, info)
    return run_info(run_id)


class TrainJob(Job):
    """A :class:`~probekit.jobs.Job` that trains run ``run_id`` (its folder exists once training starts)."""

    def __init__(self, fn: Callable[[Progress, Callable[[], bool]], object], *, run_id: str):
        super().__init__(fn, label="rewire")
        self.run_id = run_id


def start_train(settings: RewireSettings, *, device: str | None = None) -> TrainJob:
    """A started :class:`TrainJob` training in the background; ``job.run_id`` names its folder
    (the page reads the live loss from ``log.jsonl``); ``result`` is the final :func:`run_info`."""
    settings = settings.checked()
    resolve_corpus(settings.corpus)  # a typo fails now, on the page, not in the job
    run_id = f"rw-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"

    def work(progress, should_cancel):
        def report(step, total, loss):
            progress(step, total, f"step {step}/{total} · loss {loss:.4f}")

        return train(settings, device=device, progress=report, should_cancel=should_cancel, run_id=run_id)

    job = TrainJob(work, run_id=run_id)
    job.start()
    return job
