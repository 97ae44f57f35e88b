"""Checkpoint sweeps (MedLAMA Fig. 4): probe every checkpoint of one or more rewiring runs on a dataset.

Every point is a stored benchmark run (so a repeated sweep is read back, not recomputed);
:func:`sweep_curve` gives mean and std over runs (seeds, corpora) per step.

Rows are labelled by which queries ran against which candidates (``subset``, see :data:`SUBSETS`): a sweep
on MedLAMA's full set gives ``full`` and ``hard-in-full`` (its hard queries, still ranked among the full
set's 22,923 names: not the paper's hard-set experiment); a sweep on the hard set gives ``hard`` (ranked
among the hard files' own 17,532 names, as the paper's Table 4 and Fig. 4 hard panels).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .. import jobs, models
from ..datasets.base import HARD_IN_FULL, SUBSETS
from ..errors import ProbekitError, UnknownNameError
from ..jobs import Job
from ..memo import Memo
from ..metrics.registry import METRICS, get_metric, metric_names
from .runs import run_info

SWEEP_COLUMNS = ["rewire_run", "corpus", "seed", "step", "model", "run_id", "relation", "subset", "n",
                 *metric_names()]
"""A sweep's columns: the point, then every registered metric (:mod:`probekit.metrics.registry`)."""
__all__ = ["HARD_IN_FULL", "SUBSETS", "SWEEP_COLUMNS", "best_checkpoint", "start_sweep", "stored_sweeps", "sweep",
           "sweep_curve", "sweep_intervals"]


def _rows(summary: dict, base: dict, *, hard_set: bool = False) -> list[dict]:
    """Rows of one point. On the hard set all queries are hard, so its one block is ``hard``; on any other
    set the run's hard-query block is :data:`HARD_IN_FULL`.

    >>> part = {"relations": {"r": {"n": 2, "acc@1": 0.5}}, "macro": {"acc@1": 0.5}, "micro": {"acc@1": 0.5}}
    >>> sorted({r["subset"] for r in _rows({**part, "hard": part}, {})})
    ['full', 'hard-in-full']
    >>> sorted({r["subset"] for r in _rows({**part, "hard": part}, {}, hard_set=True)})
    ['hard']
    """
    from ..bench.frames import hard_block

    rows = []
    blocks = [("hard", summary)] if hard_set else [("full", summary), hard_block(summary, hard_set=False)]
    for subset, part in blocks:
        if not part:
            continue
        for rel, row in part["relations"].items():
            rows.append({**base, "relation": rel, "subset": subset, **row})
        n = sum(r["n"] for r in part["relations"].values())
        for avg in ("macro", "micro"):
            rows.append({**base, "relation": avg, "subset": subset, "n": n, **part[avg]})
    return rows


def sweep(run_ids: Sequence[str], dataset, *, similarity: str = "cosine", vocab: str = "heads+tails", k: int = 10,
          preset: str | None = None, include_base: bool = True, device: str | None = None, progress=None,
          should_cancel=None) -> pd.DataFrame:
    """Retrieval-probe every checkpoint of each rewiring run (and, as step 0, the base model) on ``dataset``.

    Probing uses each run's pooling and layer, so step 0 is the same experiment before training; a
    retrieval ``preset`` (``medlama-reference``: [CLS], L2 on raw vectors) replaces pooling and
    ``similarity`` as it does everywhere. Every point is a stored benchmark run
    (:func:`probekit.bench.runs.run_benchmark`), so a repeated sweep reads results back. Returns one row per
    (run, step, relation or macro/micro, subset): :data:`SWEEP_COLUMNS`; ``subset`` as in :data:`SUBSETS`.
    """
    from ..bench import runs
    from ..probes.retrieval import apply_preset

    if isinstance(run_ids, str):
        run_ids = [run_ids]
    if not run_ids:
        raise ProbekitError("pick at least one rewiring run")
    infos = [run_info(r) for r in run_ids]
    points = []
    for info in infos:
        s = info["settings"]
        base = {"rewire_run": info["run_id"], "corpus": s["corpus"], "seed": s["seed"]}
        if include_base:
            points.append(({**base, "step": 0}, info["base_model"], info))
        points += [({**base, "step": c["step"]}, c["path"], info) for c in info["checkpoints"]]
    if not any(p[0]["step"] for p in points):
        raise ProbekitError("these runs have no checkpoint yet; wait for the first one "
                            f"(every {infos[0]['settings']['checkpoint_every']} steps)")
    rows = []
    for n, (base, model_id, info) in enumerate(points):
        label = f"point {n + 1}/{len(points)} · step {base['step']}"
        if should_cancel is not None and should_cancel():
            raise jobs.Cancelled("the sweep was cancelled; finished checkpoints are stored and reused")
        if progress:
            progress(n, len(points), f"{label} · loading")
        model = models.load(model_id, device=device)
        try:
            opts = {"pooling": info["settings"]["pooling"], "layer": info["layer"], "similarity": similarity}
            if preset:  # applied here too, so the stored options say what ran
                opts = apply_preset({**opts, "preset": preset})

            def report(d, t, s, _label=label, _n=n):
                if progress:
                    progress(_n, len(points), f"{_label} · {s} {d:,}/{t:,}")

            run = runs.run_benchmark(model, dataset, probe="retrieval", options=opts, vocab=vocab, k=k,
                                     progress=report, should_cancel=should_cancel)
        finally:
            models.release(model)
        rows += _rows(run.summary(), {**base, "model": model_id, "run_id": run.run_id},
                      hard_set=dataset.meta.get("set") == "hard")
    if progress:
        progress(len(points), len(points), "done")
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def start_sweep(run_ids: Sequence[str], dataset, *, device: str | None = None, **options):
    """A started :class:`~probekit.jobs.Job` running :func:`sweep`; ``result`` is its frame."""

    if not run_ids:
        raise ProbekitError("pick at least one rewiring run")
    for r in run_ids:
        run_info(r)  # unknown ids fail now, on the page
    return Job(lambda progress, should_cancel: sweep(run_ids, dataset, device=device, progress=progress,
                                                     should_cancel=should_cancel, **options), label="sweep").start()


def sweep_curve(frame: pd.DataFrame, *, metric: str = "acc@1", relation: str = "macro",
                subset: str = "full") -> pd.DataFrame:
    """A registered ``metric`` against step for one relation (or ``macro``/``micro``): mean and std over runs
    (seeds, corpora), with the number of runs per step. std is 0 for a single run.

    >>> f = pd.DataFrame({"rewire_run": ["a", "b", "a", "b"], "step": [0, 0, 50, 50], "relation": "macro",
    ...                   "subset": "full", "acc@1": [0.1, 0.1, 0.2, 0.4]})
    >>> sweep_curve(f, metric="acc@1").round(3).to_dict(orient="list")
    {'step': [0, 50], 'mean': [0.1, 0.3], 'std': [0.0, 0.141], 'runs': [2, 2]}
    """
    col = get_metric(metric).name
    if col not in frame.columns:
        raise ProbekitError(f"this sweep has no {col} (it has {', '.join(c for c in frame.columns if c in METRICS)})")
    part = frame[(frame["relation"] == relation) & (frame["subset"] == subset)]
    if part.empty:
        avail = sorted(set(frame["relation"]))
        raise UnknownNameError("relation", relation, avail) if relation not in avail else ProbekitError(
            f"no {subset} queries in this sweep")
    g = part.groupby("step")[col]
    out = pd.DataFrame({"mean": g.mean(), "std": g.std(ddof=1).fillna(0.0), "runs": g.size()}).reset_index()
    return out


def sweep_intervals(frame: pd.DataFrame, *, metric: str = "acc@1", subset: str = "full", confidence: float = 0.95,
                    n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """One row per point of the sweep (``rewire_run``, ``step``, ``run_id``): the 95 % interval of its macro and
    micro ``metric`` over the ``subset``'s queries of its stored run (:func:`probekit.metrics.intervals.
    frame_intervals`: Wilson for a micro acc@k, a bootstrap otherwise), as ``macro lo``… and ``macro [lo, hi]``
    (text, in %). Stored runs never change: kept in a memo by run."""
    from ..bench import runs
    from ..metrics.compare import subset as queries_of
    from ..metrics.intervals import bracket, frame_intervals

    name = get_metric(metric).name
    points = frame[["rewire_run", "step", "run_id"]].drop_duplicates("run_id")
    rows = []
    for p in points.itertuples(index=False):
        key = (p.run_id, name, subset, confidence, n_boot, seed)
        got = _INTERVALS.get(key)
        if got is None:
            run = runs.load_run(p.run_id)
            part = queries_of(run.frame, subset, hard_set=run.hard_set)
            depth = run.meta.get("answers_per_query")
            got = frame_intervals(part, metric=name, counting=run.counting,
                                  depth=None if depth is None or pd.isna(depth) else int(depth),
                                  confidence=confidence, n_boot=n_boot, seed=seed) if len(part) else {
                a: (float("nan"), float("nan")) for a in ("macro", "micro")}
            _INTERVALS.put(key, got)
        row = {"rewire_run": p.rewire_run, "step": p.step, "run_id": p.run_id}
        for a, (lo, hi) in got.items():
            row.update({f"{a} lo": lo, f"{a} hi": hi, f"{a} [lo, hi]": bracket(lo, hi)})
        rows.append(row)
    return pd.DataFrame(rows, columns=["rewire_run", "step", "run_id", "macro lo", "macro hi", "micro lo", "micro hi",
                                       "macro [lo, hi]", "micro [lo, hi]"]).sort_values(["rewire_run", "step"],
                                                                                       ignore_index=True)


_INTERVALS: Memo[tuple, dict] = Memo(max_entries=512)


def best_checkpoint(frame: pd.DataFrame, *, metric: str = "acc@10", subset: str = "full") -> dict:
    """The step with the best mean macro ``metric``, and the base (step 0) value, for reports."""
    curve = sweep_curve(frame, metric=metric, subset=subset)
    trained = curve[curve["step"] > 0]
    best = trained.loc[trained["mean"].idxmax()] if not trained.empty else None
    base = curve[curve["step"] == 0]
    return {"step": None if best is None else int(best["step"]), "acc": None if best is None else float(best["mean"]),
            "base": float(base["mean"].iloc[0]) if not base.empty else None}



def stored_sweeps() -> pd.DataFrame:
    """The stored sweep points grouped under their sweep: one row per point, i.e. a finished benchmark run of a
    rewiring run's checkpoint, and as step 0 the base model's run with the same dataset, options and
    candidates. ``sweep`` labels the group (rewiring run, dataset, options, candidates); newest sweep first,
    then by step. The Benchmark pages list these runs too; here they are grouped, not mixed with other runs.
    """
    from ..bench import runs
    from .runs import runs_dir

    scores = [f"macro {name}" for name in metric_names()]
    cols = ["sweep", "step", "model", "run_id", *scores, "created_at"]
    done = runs.list_runs(status="done").to_dict("records")
    key = ("dataset", "options", "vocab", "k")
    groups: dict[tuple, list[dict]] = {}
    for r in done:
        folder = Path(str(r["model"]))
        if not folder.name.startswith("step-") or not (runs_dir() / folder.parent.name / "run.json").is_file():
            continue
        groups.setdefault((folder.parent.name, *(r[c] for c in key)), []).append(
            {**r, "step": int(folder.name.split("-")[-1])})
    rows = []
    for (rid, *settings), points in groups.items():
        try:
            info = run_info(rid)
        except ProbekitError:
            continue
        base = [{**r, "step": 0} for r in done if r["model"] == info["base_model"]
                and tuple(r[c] for c in key) == tuple(settings)][:1]
        dataset, options, vocab, k = settings
        label = f"{info['label']} [{rid[-4:]}] · {dataset} · {_options_text(options)} · {vocab} · k={k}"
        newest = max(str(p["created_at"]) for p in points)
        for p in sorted({p["step"]: p for p in base + points}.values(), key=lambda p: p["step"]):
            rows.append({"sweep": label, "step": p["step"], "model": p["model"], "run_id": p["run_id"],
                         **{c: p[c] for c in scores},
                         "created_at": newest, "_newest": newest})
    frame = pd.DataFrame(rows, columns=[*cols, "_newest"])
    frame = frame.sort_values(["_newest", "sweep", "step"], ascending=[False, True, True], ignore_index=True)
    return frame.drop(columns=["_newest", "created_at"])


def _options_text(options) -> str:
    """``{"pooling": "cls", "similarity": "cosine", …}`` (stored as JSON) as ``pooling cls, similarity cosine``.

    >>> _options_text('{"pooling": "cls", "layer": 6, "similarity": "cosine"}')
    'pooling cls, layer 6, similarity cosine'
    """
    try:
        opts = json.loads(options) if isinstance(options, str) else dict(options or {})
    except ValueError:
        return str(options)
    return ", ".join(f"{k} {v}" for k, v in opts.items() if v is not None and k in _SHOWN_OPTIONS)


_SHOWN_OPTIONS = ("preset", "pooling", "layer", "similarity")
