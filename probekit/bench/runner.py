"""The one benchmark runner: every probe through ``probe.rank``, relation by relation, stored as it goes.

A run is one (model, dataset, probe, options, vocabulary, k). :func:`run_benchmark` is what the
Benchmark page, ``python -m probekit bench``, checkpoint sweeps and annotation sessions call, so they
share one behaviour: all arguments (and, when saving, the database) are checked before any work; a
finished run with the same settings (:func:`~probekit.bench.settings.settings_of`) is found in the store
instead of being computed again; an unfinished one (cancelled, failed, or interrupted: its process was
killed, see :func:`probekit.bench.results.mark_stale`) is taken over and resumes where it stopped (each
relation is saved in its own short transaction); embeddings come from the one cache (:mod:`probekit.cache`), which the
retrieval probe uses itself, so a forced recomputation only redoes the search.

Long work runs in a :class:`~probekit.jobs.Job` (:func:`start_benchmark`) that pages poll.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import pandas as pd

from .. import models as models_mod
from ..datasets import Dataset
from ..errors import ProbekitError
from ..jobs import Cancelled, Job, Progress
from ..types import Ranking
from . import results as res
from .frames import RESULT_COLUMNS, Run, rankings_frame, typed
from .identity import CachedModel, ModelIdentity  # noqa: F401  # re-exported: the runner's callers find them here
from .settings import check_run_args, get_probe, resolve_options, settings_key, settings_of

STAGE_TIMINGS = {"ranking": "scoring"}
"""Probe progress stages recorded under another timing name (retrieval's search is the run's scoring)."""


def _resumable(key: str) -> tuple[str, str] | None:
    """The newest unfinished run with these settings (cancelled, failed, interrupted), taken over by this
    process, with the status it had; a run still ``running`` in a live process is left to it."""
    res.mark_stale()
    marks = ", ".join("?" * len(res.UNFINISHED))
    for run_id, status in res.store().fetch(f"SELECT run_id, status FROM runs WHERE settings_key = ? AND status IN "
                                            f"({marks}) ORDER BY created_at DESC", [key, *res.UNFINISHED]):
        if res.is_active(run_id):
            continue
        if res.claim(run_id):
            return run_id, status
    return None


class _StageClock:
    """Attributes wall time to the probe stages reported through progress (time since the last report)."""

    def __init__(self, timings: dict):
        self.timings = timings
        self.last = time.perf_counter()
        self.stage: str | None = None

    def tick(self, stage: str) -> None:
        now = time.perf_counter()
        name = STAGE_TIMINGS.get(stage, stage)
        self.timings[name] += now - self.last
        self.last, self.stage = now, name

    def close(self) -> None:
        if self.stage is not None:  # building the rankings after the last report belongs to the last stage
            self.timings[self.stage] += time.perf_counter() - self.last


def find_stored(model, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                vocab: str = "heads+tails", k: int = 10) -> Run | None:
    """The finished stored run with these settings, or None (``model`` may be a :class:`ModelIdentity`)."""
    settings = settings_of(model, dataset, probe=probe, options=options, vocab=vocab, k=k)
    found = res.find_run(settings_key(settings))
    return res.load_run(found) if found else None


def check_benchmark(model, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                    vocab: str = "heads+tails", k: int = 10, save: bool = True):
    """Every check a run makes before it starts; returns (probe, resolved options, settings)."""
    probe = get_probe(probe)
    settings = settings_of(model, dataset, probe=probe, options=options, vocab=vocab, k=k)
    opts = resolve_options(model, probe, options)
    seen: set[str] = set()
    for q in dataset.queries:  # stored results are keyed (run, query id): a repeated id could not be saved
        if q.id in seen:
            raise ProbekitError(f"query id {q.id!r} appears twice in dataset {dataset.name!r}; ids must be unique")
        seen.add(q.id)
    if not probe.usable_with(model):
        raise ProbekitError(probe.unusable_reason(model))
    if vocab == "relation":
        for rel in dataset.relations:
            if not len(dataset.candidates("relation", rel)):
                raise ProbekitError(f"relation {rel!r} has no tails to rank: use another vocabulary")
    elif not len(dataset.candidates(vocab)):
        raise ProbekitError("the candidate set is empty: pick another vocabulary or dataset")
    if save:
        res.store()  # a locked or unreadable database fails now, not after the work
    return probe, opts, settings


def metrics_depth(probe, opts: dict) -> int | None:
    """The answers per query ``probe`` gives with ``opts`` (None: as many as k asks)."""
    return probe.answers_per_query(opts)


class _Record:
    """The store side of one computation: a new or taken-over ``runs`` row (or none when not saving), the
    relations it already holds, its results saved relation by relation, and its final status."""

    def __init__(self, run_id: str | None, done_relations: set[str], prev_seconds: float):
        self.run_id, self.done_relations, self.prev_seconds = run_id, done_relations, prev_seconds
        self.start = time.perf_counter()
        self.beat = res.Heartbeat(run_id)

    @classmethod
    def open(cls, key: str, *, save: bool, reuse: bool, report: Callable, model, dataset: Dataset, probe, opts: dict,
             vocab: str, k: int, settings: dict, label: str | None, counting: str,
             notice: Callable[[str], None] | None = None) -> _Record:
        """Resume the newest unfinished run with these settings (when reusing), else insert a new ``running`` one;
        then claim it for this thread. A resume is said in one line (progress, and ``notice``): which run, how many
        relations it holds, when it started."""
        resumed = _resumable(key) if (save and reuse) else None
        if resumed:
            run_id, status = resumed
            done = {r for (r,) in res.store().fetch("SELECT DISTINCT relation FROM run_results WHERE run_id = ?",
                                                    [run_id])}
            started = res.get_run(run_id)["created_at"]
            line = (f"resuming {status} run {run_id}: {len(done)} of {len(dataset.relations)} relations stored "
                    f"(started {started:%Y-%m-%d %H:%M} UTC)")
            report(0, 1, line)
            if notice is not None:
                notice(line)
        elif save:
            run_id, done = res.new_run_id(), set()
            res.insert_run(run_id, model=model, dataset=dataset, probe=probe, opts=opts, vocab=vocab, k=k,
                           settings=settings, status="running", label=label, counting=counting)
        else:
            return cls(None, set(), 0.0)
        record = cls(run_id, done, res.get_run(run_id)["seconds"] or 0.0)
        if not res.claim_run(run_id):  # never: a run computed here is 'running', not resumable
            raise ProbekitError(f"run {run_id} is being computed by another thread of this process")
        return record

    def save(self, frame: pd.DataFrame, rankings: Sequence[Ranking]) -> None:
        if self.run_id:
            res.insert_results(self.run_id, frame)
            res.record_search(self.run_id, rankings)

    def seconds(self) -> float:
        return self.prev_seconds + time.perf_counter() - self.start

    def stopped(self, error: BaseException) -> None:
        """Record why the computation stopped (its finished relations stay stored and resume next time)."""
        if self.run_id:
            cancelled = isinstance(error, Cancelled)
            res.finish_run(
                self.run_id, "cancelled" if cancelled else "failed", seconds=self.seconds(),
                message="cancelled by the user" if cancelled else f"{type(error).__name__}: {str(error)[:300]}")

    def release(self) -> None:
        if self.run_id:
            res.release_run(self.run_id)


def _probe_relations(record: _Record, probe, model, dataset: Dataset, opts: dict, *, vocab: str, k: int,
                     share_layers: Sequence[int], report: Callable, check_cancel: Callable[[], None]):
    """``probe.rank`` over every relation the record does not hold yet, each saved as soon as it is ranked:
    the rankings, their frames and the time per stage (``probing``, ``saving`` and the probe's own stages)."""
    timings: dict[str, float] = defaultdict(float)
    relations = [r for r in dataset.relations if r not in record.done_relations]
    total = sum(len(dataset.queries_for(r)) for r in relations)
    collected: list[Ranking] = []
    frames: list[pd.DataFrame] = []
    done = 0
    for i, rel in enumerate(relations):
        check_cancel()
        queries = dataset.queries_for(rel)
        candidates = dataset.candidates(vocab, rel if vocab == "relation" else None)
        where = f"relation {i + 1}/{len(relations)} {rel}"
        clock = _StageClock(timings)

        def stage(n_done, n_total, name, _base=done, _n=len(queries), _where=where, _clock=clock):
            _clock.tick(name)
            check_cancel()
            record.beat()
            # candidate encoding counts names, the other stages count this relation's queries
            frac = n_done / max(n_total, 1)
            shown = _base if name == "encoding candidates" else _base + int(frac * _n)
            report(shown, total, f"{_where} · {name} {n_done:,}/{n_total:,}")

        t = time.perf_counter()
        rankings = probe.rank(model, queries, candidates, k=k, progress=stage, share_layers=share_layers, **opts)
        clock.close()
        timings["probing"] += time.perf_counter() - t
        t = time.perf_counter()
        frames.append(rankings_frame(rankings))
        record.save(frames[-1], rankings)
        timings["saving"] += time.perf_counter() - t
        collected += rankings
        done += len(queries)
        report(done, total, f"{where} · done")
    return collected, frames, {name: round(v, 3) for name, v in timings.items()}


def run_benchmark(model, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                  vocab: str = "heads+tails", k: int = 10, progress: Progress | None = None,
                  should_cancel: Callable[[], bool] | None = None, reuse: bool = True, save: bool = True,
                  label: str | None = None, share_layers: Sequence[int] = (), counting: str = "query",
                  notice: Callable[[str], None] | None = None) -> Run:
    """Probe every query of ``dataset`` with ``probe.rank``, relation by relation, and (by default) store the run.

    With ``reuse`` a finished run with the same settings is loaded instead, and an unfinished one
    (cancelled, failed or killed) is resumed: relations already stored are skipped. ``progress`` gets
    ``(done, total, stage)``; ``should_cancel`` is checked between relations and inside the probe's
    progress reports and stops the run with :class:`Cancelled` (finished relations stay stored).
    ``reuse=False`` always computes a new run (cached embeddings are still used). ``share_layers`` goes to
    ``probe.rank`` (layers an encoding pass also caches for a grid's sibling cells). ``counting`` is recorded
    with a new stored run: the acc@k convention its summary reports (a stored run found again keeps its own).
    ``notice`` gets the one line a user should see even without progress (``resuming interrupted run …: 3 of 8
    relations stored (started …)``): a rerun says what it takes over.

    The steps: check everything (:func:`check_benchmark`); find a finished run; open the record (resume or
    insert, :class:`_Record`); rank and save relation by relation (:func:`_probe_relations`); finish the record.
    """
    probe, opts, settings = check_benchmark(model, dataset, probe=probe, options=options, vocab=vocab, k=k,
                                            save=save)
    key = settings_key(settings)

    def report(done, total, stage):
        if progress is not None:
            progress(done, total, stage)

    def check_cancel():
        if should_cancel is not None and should_cancel():
            raise Cancelled("the run was cancelled; finished relations are stored and resume on the next start")

    if save and reuse:
        found = res.find_run(key)
        if found:
            report(1, 1, "found in the store")
            return res.load_run(found)
    record = _Record.open(key, save=save, reuse=reuse, report=report, model=model, dataset=dataset, probe=probe,
                          opts=opts, vocab=vocab, k=k, settings=settings, label=label, counting=counting,
                          notice=notice)
    try:
        collected, frames, timings = _probe_relations(record, probe, model, dataset, opts, vocab=vocab, k=k,
                                                      share_layers=share_layers, report=report,
                                                      check_cancel=check_cancel)
    except BaseException as e:
        record.stopped(e)
        raise
    finally:
        record.release()
    if record.run_id is None:  # not saved
        meta = {"run_id": None, "label": label or res.label_of(model, dataset, probe.name, opts), "model": model.id,
                "dataset": dataset.name, "probe": probe.name, "options": opts, "vocab": vocab, "k": k,
                "seconds": record.seconds(), "timings": timings, "status": "done", "settings_key": key,
                "dataset_spec": res.dataset_spec(dataset), "dataset_set": dataset.meta.get("set"),
                "counting": counting, "answers_per_query": metrics_depth(probe, opts),
                "search": res.search_of(collected)}
        return Run(None, meta, _concat(frames), collected)
    res.finish_run(record.run_id, "done", seconds=record.seconds(), timings=timings)
    if record.done_relations:  # resumed: part of the results came from the store
        return res.load_run(record.run_id)
    frame = _concat(frames).sort_values(["relation", "query_id"], ignore_index=True)
    return Run(record.run_id, res.get_run(record.run_id), frame)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return typed(pd.DataFrame({c: [] for c in RESULT_COLUMNS}))
    return typed(pd.concat(frames, ignore_index=True))


def start_benchmark(models_: Sequence, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                    vocab: str = "heads+tails", k: int = 10, device: str | None = None,
                    reuse: bool = True) -> Job:
    """A started :class:`Job` benchmarking each model in turn; ``result`` is the list of run ids.

    Models are :class:`~probekit.models.LoadedModel` objects or ids; ids are loaded in the job (and
    released after), so a typo fails the job with a message, not the page.
    """
    if not models_:
        raise ProbekitError("pick at least one model")
    probe = get_probe(probe)
    check_run_args(dataset, vocab, k)
    loaded = [m for m in models_ if not isinstance(m, str)]
    for m in loaded[:1]:  # options, vocabulary and database are checked before the job starts
        check_benchmark(m, dataset, probe=probe, options=options, vocab=vocab, k=k)

    def work(progress, should_cancel):
        run_ids = []
        for n, m in enumerate(models_):
            own = isinstance(m, str)
            prefix = f"model {n + 1}/{len(models_)}" if len(models_) > 1 else ""
            if own:
                progress(0, 1, f"{prefix} loading {m}".strip())
                m = models_mod.load(m, device=device)
            try:
                def report(d, t, s, _p=prefix):
                    progress(d, t, f"{_p} · {s}" if _p else s)

                run = run_benchmark(m, dataset, probe=probe, options=options, vocab=vocab, k=k, progress=report,
                                    should_cancel=should_cancel, reuse=reuse)
                run_ids.append(run.run_id)
            finally:
                if own:
                    models_mod.release(m)
        return run_ids

    return Job(work, label="benchmark").start()
