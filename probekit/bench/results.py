"""Benchmark runs in DuckDB: the ``runs`` tables; storing, finding, listing and loading a :class:`Run`.

What a run is (:class:`~probekit.bench.frames.Run`, its results frame and summary) lives in
:mod:`probekit.bench.frames`; this module is its store side.

Tables (component ``runs``, migrations in :mod:`probekit.store.schema`): ``runs`` (one row per run: every
setting, model id/source/revision, dataset name/version/set, device, probekit version, status, timings)
and ``run_results`` (one row per query: golds, gold ranks, best gold rank, top-k ids/names/scores as JSON,
gold length, hardness). Accuracies shown for stored runs come from :mod:`probekit.metrics.accuracy`.

A run being computed is ``running`` and names its owner (host, process id and that process's start time)
and a heartbeat, renewed with every stored relation and at most every :data:`HEARTBEAT_S` during one. A
``running`` run whose owner is gone (same host: no such process, or another process under its pid), or
whose heartbeat is older than ``PROBEKIT_STALE_RUN_S`` seconds (default 6 h; the only test for runs owned
on another host), is marked ``interrupted`` (:func:`mark_stale`, on every start and listing); the next
start with the same settings takes it over and resumes it.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

import pandas as pd

from .. import __version__, metrics
from ..datasets import Dataset
from ..errors import ProbekitError, command
from ..memo import Memo
from ..metrics.accuracy import DEFAULT_COUNTING, check_counting
from ..store import component_store
from ..store import owner as _owner
from ..types import Ranking
from .frames import JSON_COLUMNS, RESULT_COLUMNS, Run, rankings_frame, typed
from .settings import dataset_spec, get_probe, resolve_options, settings_key, settings_of

COMPONENT = "runs"
RUN_COLUMNS = ("run_id", "created_at", "finished_at", "status", "settings_key", "label", "model", "model_source",
               "model_revision", "dataset", "dataset_version", "dataset_set", "dataset_spec", "probe", "options",
               "vocab", "k", "device", "probekit_version", "n_queries", "n_relations", "seconds", "timings",
               "message", "owner_host", "owner_pid", "owner_start", "heartbeat_at", "counting", "answers_per_query",
               "search")
STATUSES = ("running", "done", "cancelled", "failed", "interrupted")
UNFINISHED, STALE_RUN_S, HEARTBEAT_S = _owner.UNFINISHED, _owner.STALE_RUN_S, _owner.HEARTBEAT_S
_ACTIVE: set[str] = set()
"""Run ids being computed by a thread of this process (not resumable, not deletable); only the three functions
below touch it."""
_ACTIVE_LOCK = threading.Lock()


def claim_run(run_id: str) -> bool:
    """Mark ``run_id`` as computed by a thread of this process; False (and nothing changes) when one already is."""
    with _ACTIVE_LOCK:
        if run_id in _ACTIVE:
            return False
        _ACTIVE.add(run_id)
        return True


def release_run(run_id: str) -> None:
    """The thread computing ``run_id`` is done with it (finished, failed or cancelled); harmless when not claimed."""
    with _ACTIVE_LOCK:
        _ACTIVE.discard(run_id)


def is_active(run_id: str) -> bool:
    """Whether a thread of this process is computing ``run_id`` now."""
    with _ACTIVE_LOCK:
        return run_id in _ACTIVE


def store():
    """The store with the ``runs`` schema; opening it fails with one clear line when another process holds it."""
    return component_store(COMPONENT)


def now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def stale_after() -> float:
    return _owner.stale_after()


def owner() -> dict:
    """This process as a run's owner."""
    return _owner.owner()


def owner_alive(host, pid, start) -> bool | None:
    return _owner.owner_alive(host, pid, start)


def mark_stale() -> list[str]:
    """Mark ``interrupted`` every running run whose owner is gone or whose heartbeat is stale; their ids."""
    return _owner.mark_stale(store(), "runs")


def claim(run_id: str) -> bool:
    """Take over an unfinished run (cancelled, failed, interrupted) for this process; False when another
    process took it first."""
    return _owner.claim(store(), "runs", run_id)


class Heartbeat(_owner.Heartbeat):
    """Renews a running run's heartbeat, at most every :data:`HEARTBEAT_S` (call it as often as you like)."""

    def __init__(self, run_id: str | None, every: float | None = None):
        super().__init__(store(), "runs", run_id, every)


def new_run_id() -> str:
    return f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


# ---------------------------------------------------------------- store
def _arrow_schema():
    import pyarrow as pa

    types = {"golds": pa.list_(pa.string()), "gold_ranks": pa.list_(pa.int64()), "top_ids": pa.list_(pa.int64()),
             "top_names": pa.list_(pa.string()), "top_scores": pa.list_(pa.float64()), "best_gold_rank": pa.int64(),
             "gold_length": pa.float64(), "hard": pa.bool_(), "n_candidates": pa.int64()}
    return pa.schema([(c, types.get(c, pa.string())) for c in RESULT_COLUMNS])


def _insert_results(cur, run_id: str, frame: pd.DataFrame) -> None:
    import pyarrow as pa

    data = pa.Table.from_pandas(frame[list(RESULT_COLUMNS)], schema=_arrow_schema(), preserve_index=False)
    select = ", ".join(f"to_json({c})::VARCHAR" if c in JSON_COLUMNS else c for c in RESULT_COLUMNS)
    cur.register("pk_run_results_arrow", data)
    cur.execute(f"INSERT INTO run_results (run_id, {', '.join(RESULT_COLUMNS)}) "
                f"SELECT ?, {select} FROM pk_run_results_arrow", [run_id])
    cur.unregister("pk_run_results_arrow")


def insert_results(run_id: str, frame: pd.DataFrame) -> None:
    """Insert a results frame; list columns go in as typed Arrow lists and DuckDB writes their JSON."""
    with store().transaction() as cur:
        _insert_results(cur, run_id, frame)
        cur.execute("UPDATE runs SET heartbeat_at = ? WHERE run_id = ?", [now(), run_id])


def store_finished(meta: dict, frame: pd.DataFrame) -> bool:
    """Store a finished run read from a file (``meta``: its :data:`RUN_COLUMNS`) and its results in one transaction;
    False (nothing changes) when its id is stored already. The caller (:mod:`probekit.exports`) gives it an id and
    ``settings_key`` of its own, so it is never reopened as a computed run."""
    row = {c: meta.get(c) for c in RUN_COLUMNS}
    row["options"], row["timings"] = (json.dumps(row[c] or {}, default=str) for c in ("options", "timings"))
    with store().transaction() as cur:
        if cur.execute("SELECT 1 FROM runs WHERE run_id = ?", [row["run_id"]]).fetchone():
            return False
        cur.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    [row[c] for c in RUN_COLUMNS])
        _insert_results(cur, str(row["run_id"]), frame)
    return True


def label_of(model, dataset, probe_name, opts) -> str:
    bits = [str(v) for k, v in sorted(opts.items()) if k in ("pooling", "similarity") and v]
    if opts.get("layer") is not None and opts.get("layer") != model.num_layers:
        bits.append(f"L{opts['layer']}")
    label = getattr(model, "label", model.id)
    return f"{label} · {dataset.name} · {probe_name}" + (f" ({', '.join(bits)})" if bits else "")


def insert_run(run_id, *, model, dataset, probe, opts, vocab, k, settings, status, label,
               counting: str = DEFAULT_COUNTING) -> None:
    meta = {
        "run_id": run_id, "created_at": now(), "finished_at": None, "status": status,
        "settings_key": settings_key(settings), "label": label or label_of(model, dataset, probe.name, opts),
        "model": model.id, "model_source": model.source, "model_revision": model.revision,
        "dataset": dataset.name, "dataset_version": dataset.version, "dataset_set": dataset.meta.get("set"),
        "dataset_spec": dataset_spec(dataset), "probe": probe.name, "options": json.dumps(opts, default=str),
        "vocab": vocab, "k": int(k), "device": str(model.device), "probekit_version": __version__,
        "n_queries": len(dataset), "n_relations": len(dataset.relations), "seconds": None, "timings": None,
        "message": None, **owner(), "heartbeat_at": now(), "counting": check_counting(counting),
        "answers_per_query": probe.answers_per_query(opts), "search": None,
    }
    with store().transaction() as cur:
        cur.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    [meta[c] for c in RUN_COLUMNS])


def search_of(rankings: Sequence[Ranking]) -> str | None:
    """How these rankings' top-k were found when not by scoring every candidate (:attr:`Ranking.search`): the
    distinct descriptions, in order, joined by " | "; None when every candidate was scored.

    >>> from probekit.types import Query
    >>> q = Query("q", "s", "r", "[X] r [Y].", golds=("a",))
    >>> search_of([Ranking(q, (0,), ("a",), (1.0,), (1,), search="hnsw"), Ranking(q, (0,), ("a",), (1.0,), (1,))])
    'hnsw'
    """
    return " | ".join(dict.fromkeys(r.search for r in rankings if r.search)) or None


def record_search(run_id: str, rankings: Sequence[Ranking]) -> None:
    """Record beside the run how its top-k were found (:func:`search_of`), once per new description."""
    found = search_of(rankings)
    if not found:
        return
    with store().transaction() as cur:
        (before,) = cur.execute("SELECT search FROM runs WHERE run_id = ?", [run_id]).fetchone()
        known = before.split(" | ") if before else []
        if any(part not in known for part in found.split(" | ")):
            merged = " | ".join(dict.fromkeys([*known, *found.split(" | ")]))
            cur.execute("UPDATE runs SET search = ? WHERE run_id = ?", [merged, run_id])


def finish_run(run_id: str, status: str, *, seconds: float | None = None, timings: dict | None = None,
                message: str | None = None) -> None:
    with store().transaction() as cur:
        cur.execute("UPDATE runs SET status = ?, finished_at = ?, seconds = coalesce(?, seconds), "
                    "timings = coalesce(?, timings), message = ? WHERE run_id = ?",
                    [status, now(), seconds, None if timings is None else json.dumps(timings), message, run_id])


def save_run(rankings: Sequence[Ranking], *, model, dataset: Dataset, probe, options: dict | None = None,
             vocab: str = "heads+tails", k: int = 10, seconds: float | None = None, timings: dict | None = None,
             label: str | None = None, counting: str = DEFAULT_COUNTING) -> str:
    """Store finished rankings (e.g. from ``python -m probekit bench --save``); returns the new run id.

    ``counting`` is the convention its reported acc@k uses (:data:`probekit.metrics.accuracy.COUNTINGS`)."""
    probe = get_probe(probe)
    if not rankings:
        raise ProbekitError("nothing to store: no rankings")
    settings = settings_of(model, dataset, probe=probe, options=options, vocab=vocab, k=k)
    opts = resolve_options(model, probe, options)
    run_id = new_run_id()
    insert_run(run_id, model=model, dataset=dataset, probe=probe, opts=opts, vocab=vocab, k=k,
               settings=settings, status="running", label=label, counting=counting)
    try:
        insert_results(run_id, rankings_frame(rankings))
        record_search(run_id, rankings)
    except BaseException:
        finish_run(run_id, "failed", message="saving failed")
        raise
    finish_run(run_id, "done", seconds=seconds, timings=timings)
    return run_id


def get_run(run_id: str) -> dict:
    """A run's metadata (options and timings decoded)."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise ProbekitError(f"give a run id (see `{command()} runs list`)")
    rows = store().fetch(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", [run_id.strip()])
    if not rows:
        raise ProbekitError(f"no stored run {run_id!r} (see `{command()} runs list`)")
    meta = dict(zip(RUN_COLUMNS, rows[0]))
    meta["counting"] = meta["counting"] or DEFAULT_COUNTING
    meta["options"] = json.loads(meta["options"] or "{}")
    meta["timings"] = json.loads(meta["timings"] or "{}")
    return meta


def _results(run_id: str, relations: Sequence[str] | None = None) -> pd.DataFrame:
    sql = f"SELECT {', '.join(RESULT_COLUMNS)} FROM run_results WHERE run_id = ?"
    params: list = [run_id]
    if relations:
        sql += f" AND relation IN ({', '.join('?' * len(relations))})"
        params += list(relations)
    frame = store().fetch_df(sql + " ORDER BY relation, query_id", params)
    for c in JSON_COLUMNS:
        frame[c] = [json.loads(v) for v in frame[c]]
    return typed(frame)


_RUNS_SIZE = 12
_RUNS: Memo[tuple, Run] = Memo(max_entries=_RUNS_SIZE)


def load_run(run_id: str, *, relations: Sequence[str] | None = None) -> Run:
    """A stored run (optionally only some relations) as a :class:`Run`.

    Finished runs never change, so whole ones are kept in a small in-process memo shared by every
    caller (treat the returned frame as read-only).
    """
    meta = get_run(run_id)
    rid = meta["run_id"]
    key = (store().path, rid)
    whole = relations is None and meta["status"] == "done"
    if whole:
        hit = _RUNS.get(key)
        if hit is not None:
            return hit
    run = Run(rid, meta, _results(rid, relations))
    if whole:
        _RUNS.put(key, run)
    return run


def find_run(settings, *, statuses: Sequence[str] = ("done",)) -> str | None:
    """The newest run whose settings equal ``settings`` (a :func:`settings_of` dict or its key)."""
    key = settings if isinstance(settings, str) else settings_key(settings)
    rows = store().fetch(f"SELECT run_id FROM runs WHERE settings_key = ? AND status IN "
                          f"({', '.join('?' * len(statuses))}) ORDER BY created_at DESC, run_id DESC LIMIT 1",
                          [key, *statuses])
    return rows[0][0] if rows else None


_LISTED: Memo[tuple, dict] = Memo(max_entries=256)
"""The listing's values of finished runs, by (store, run, counting, depth, metrics): a rerun of a page that lists
runs parsed and scored every stored result again (0.5 s per MedLAMA run on every click)."""


def _listing_values(part: pd.DataFrame, counting: str, depth: int | None, names: Sequence[str]) -> dict:
    """``n_done`` and the macro and micro value of each metric of one run's stored results."""
    g, rel = [json.loads(v) for v in part["gold_ranks"]], part["relation"].to_numpy()
    out: dict = {"n_done": len(part)}
    for name in names:
        for avg in metrics.accuracy.AVERAGES:
            out[f"{avg} {name}"] = metrics.metric_value(g, rel, metric=name, average=avg, counting=counting,
                                                        depth=depth)
    return out


def list_runs(*, status: str | None = None) -> pd.DataFrame:
    """Stored runs, newest first, with the macro and micro value of every registered metric (``macro acc@1``,
    ``micro MRR``…) computed from their results by :func:`probekit.metrics.accuracy.metric_value` under each run's
    ``counting`` (a column of the listing); a metric needing more answers than a method gives per query
    (``answers_per_query``: acc@10 of a one-answer method) is NaN."""
    where, params = "", []
    if status is not None:
        if status not in STATUSES:
            raise ProbekitError(f"unknown status {status!r}; available: {', '.join(STATUSES)}")
        where, params = "WHERE status = ?", [status]
    mark_stale()  # a run whose process is gone shows as interrupted, not running for ever
    listed = store().fetch_df(f"""
        SELECT run_id, created_at, status, label, model, dataset, dataset_set, probe, options, vocab, k, device,
               n_queries, seconds, coalesce(counting, '{DEFAULT_COUNTING}') AS counting, answers_per_query
        FROM runs {where} ORDER BY created_at DESC, run_id DESC""", params)
    how = {r.run_id: (r.counting, None if pd.isna(r.answers_per_query) else int(r.answers_per_query))
           for r in listed.itertuples(index=False)}
    names = metrics.metric_names()
    path, accs = store().path, {}

    def memo_key(run_id: str) -> tuple:
        return (path, run_id, *how[run_id], *names)

    finished = set(listed.run_id[listed.status == "done"])
    for run_id in finished:
        if (hit := _LISTED.get(memo_key(run_id))) is not None:
            accs[run_id] = hit
    todo = [r for r in listed.run_id if r not in accs]
    if todo:
        ranks = store().fetch_df(f"""
            SELECT run_id, relation, gold_ranks FROM run_results
            WHERE run_id IN ({', '.join('?' * len(todo))})""", list(todo))
        for run_id, part in ranks.groupby("run_id", sort=False):
            accs[run_id] = _listing_values(part, *how[run_id], names)
            if run_id in finished:  # a finished run never changes: its values are computed once per process
                _LISTED.put(memo_key(run_id), accs[run_id])
    cols = ["n_done", *[f"{avg} {name}" for avg in metrics.accuracy.AVERAGES for name in names]]
    extra = pd.DataFrame([accs.get(r, {"n_done": 0}) for r in listed["run_id"]], columns=cols, index=listed.index)
    extra["n_done"] = extra["n_done"].fillna(0).astype(int)
    listed.insert(listed.columns.get_loc("n_queries") + 1, "n_done", extra["n_done"])
    for c in cols[1:]:
        listed[c] = extra[c].astype(float)
    return listed


def delete_run(run_id: str) -> None:
    """Remove a stored run and its results (not while a live process is computing it)."""
    meta = get_run(run_id)
    if is_active(meta["run_id"]):
        raise ProbekitError(f"run {run_id} is running: cancel it first")
    if meta["status"] == "running" and meta["run_id"] not in mark_stale():
        raise ProbekitError(f"run {run_id} is running in process {meta['owner_pid']} on {meta['owner_host']}: "
                            f"stop it first (or wait: it is marked interrupted once that process is gone)")
    store().delete_with_children("runs", meta["run_id"])  # its results (and prompt perplexities) first
    _RUNS.pop((store().path, meta["run_id"]))
