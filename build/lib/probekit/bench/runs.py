"""Benchmark runs: probe a whole dataset, store every query's result in DuckDB, read runs back.

A run is one (model, dataset, probe, options, vocabulary, k). :func:`run_benchmark` works relation by
relation, saving each relation's results in its own short transaction, so a cancelled or crashed run
resumes where it stopped, and a finished run with the same settings (:func:`settings_of`) is found in
the store instead of being computed again. For the retrieval probe it also caches *query* embeddings
(candidate embeddings are cached by :mod:`probekit.index`), so a forced recomputation with the same
settings only redoes the scoring (see ``benchmarks/warm_runs.py``).

Long work runs in a :class:`Job` (a thread with progress, status and cancel) that pages poll; one heavy
job runs at a time per process, others wait their turn, so the app stays responsive.

Tables (component ``runs``): ``runs`` (one row per run: every setting, model id/source/revision,
dataset name/version/set, device, probekit version, status, timings) and ``run_results`` (one row per
query: golds, gold ranks, best gold rank, top-k ids/names/scores as JSON, gold length, hardness).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import secrets
import threading
import time
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__, config, metrics
from ..datasets import VOCABS, Dataset, hardness
from ..encode import ENCODER_VERSION, encode_layers, precision
from ..errors import ProbekitError
from ..index import EntityIndex, build_index
from ..jobs import Cancelled, Job, Progress
from ..metrics import compare as run_metrics
from ..store import component_store
from ..store.export import safe_target, table_bytes, write_table
from ..types import Query, Ranking

COMPONENT = "runs"
RESULT_COLUMNS = ("query_id", "relation", "subject", "template", "query", "golds", "gold_ranks", "best_gold_rank",
                  "top_ids", "top_names", "top_scores", "gold_length", "hard", "n_candidates")
JSON_COLUMNS = ("golds", "gold_ranks", "top_ids", "top_names", "top_scores")
RUN_COLUMNS = ("run_id", "created_at", "finished_at", "status", "settings_key", "label", "model", "model_source",
               "model_revision", "dataset", "dataset_version", "dataset_set", "dataset_spec", "probe", "options",
               "vocab", "k", "device", "probekit_version", "n_queries", "n_relations", "seconds", "timings",
               "message")
EXPORT_FORMATS = ("csv", "parquet")
STATUSES = ("running", "done", "cancelled", "failed")
KEY_EXCLUDED_OPTIONS = ("batch_size",)
"""Options that do not change results and so do not tell runs apart."""

def _store():
    return component_store(COMPONENT)


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


# ---------------------------------------------------------------- settings
def _probe(probe):
    from ..probes import get_probe

    return get_probe(probe) if isinstance(probe, str) else probe


def resolve_options(model, probe, options: dict | None = None) -> dict:
    """Every option of ``probe`` with defaults filled in (pooling/layer resolved for ``model``)."""
    probe = _probe(probe)
    options = dict(options or {})
    known = {o.name: o for o in probe.options}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ProbekitError(f"unknown option {unknown[0]!r} for probe {probe.name!r}; "
                            f"available: {', '.join(known) or 'none'}")
    opts = {name: options.get(name, o.default) for name, o in known.items()}
    if "pooling" in opts and not opts["pooling"]:
        opts["pooling"] = model.spec.pooling
    if "layer" in opts and opts["layer"] in (None, -1, ""):
        opts["layer"] = model.num_layers
    return opts


def dataset_spec(dataset: Dataset) -> str | None:
    """The sidebar spec (``demo``, ``medlama:hard``…) that reopens ``dataset``; None for uploads."""
    name, which = dataset.name, dataset.meta.get("set")
    if name.startswith("upload:"):
        return None
    if which and name.endswith(f"-{which}"):
        base = name[: -len(which) - 1]
        return base if (base == "demo" and which == "full") else f"{base}:{which}"
    return name


def settings_of(model, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                vocab: str = "heads+tails", k: int = 10) -> dict:
    """Everything that decides a run's results; runs with equal settings are interchangeable."""
    probe = _probe(probe)
    _check_run_args(dataset, vocab, k)
    opts = resolve_options(model, probe, options)
    return {
        "model_source": model.source, "model_revision": model.revision,
        "precision": precision(model, bool(opts.get("fast"))),
        "dataset": dataset.name, "dataset_version": dataset.version, "relations": dataset.relations,
        "n_queries": len(dataset), "probe": probe.name,
        "options": {k_: v for k_, v in sorted(opts.items()) if k_ not in KEY_EXCLUDED_OPTIONS},
        "vocab": vocab, "k": int(k),
    }


def settings_key(settings: dict) -> str:
    """A stable hash of :func:`settings_of`."""
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _check_run_args(dataset, vocab, k) -> None:
    if not isinstance(dataset, Dataset):
        raise ProbekitError(f"expected a Dataset, got {type(dataset).__name__}")
    if not len(dataset):
        raise ProbekitError(f"dataset {dataset.name!r} has no queries")
    if vocab not in VOCABS:
        raise ProbekitError(f"unknown vocabulary {vocab!r}; available: {', '.join(VOCABS)}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise ProbekitError(f"k must be an integer from 1 to 1000, got {k!r}")


# ---------------------------------------------------------------- results <-> frames
def _is_hard(q: Query) -> bool | None:
    return _hardness(q.subject, tuple(q.golds))


@functools.lru_cache(maxsize=65536)
def _hardness(subject: str, golds: tuple[str, ...]) -> bool | None:
    try:
        return hardness.is_hard(subject, list(golds))
    except ProbekitError:  # no golds or no subject (free queries): hardness undefined
        return None


def rankings_frame(rankings: Sequence[Ranking]) -> pd.DataFrame:
    """One row per ranking with :data:`RESULT_COLUMNS` (list columns as Python lists)."""
    qs = [r.query for r in rankings]
    frame = pd.DataFrame({
        "query_id": [q.id for q in qs], "relation": [q.relation for q in qs], "subject": [q.subject for q in qs],
        "template": [q.template for q in qs], "query": [q.text() for q in qs], "golds": [list(q.golds) for q in qs],
        "gold_ranks": [list(r.gold_ranks) for r in rankings], "best_gold_rank": [r.best_gold_rank for r in rankings],
        "top_ids": [[int(i) for i in r.ids] for r in rankings], "top_names": [list(r.names) for r in rankings],
        "top_scores": [[float(s) for s in r.scores] for r in rankings],
        "gold_length": [sum(map(len, q.golds)) / len(q.golds) if q.golds else None for q in qs],
        "hard": [_is_hard(q) for q in qs], "n_candidates": [r.n_candidates for r in rankings],
    }, columns=list(RESULT_COLUMNS))
    return _typed(frame)


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    frame["best_gold_rank"] = frame["best_gold_rank"].astype("Int64")
    frame["n_candidates"] = frame["n_candidates"].astype("Int64")
    frame["gold_length"] = frame["gold_length"].astype("Float64")
    frame["hard"] = frame["hard"].astype("boolean")
    return frame


def frame_rankings(frame: pd.DataFrame) -> list[Ranking]:
    """Rebuild :class:`Ranking` objects from a results frame (for :mod:`probekit.metrics`)."""
    out = []
    for row in frame.itertuples(index=False):
        q = Query(id=row.query_id, subject=row.subject or "", relation=row.relation, template=row.template or "",
                  golds=tuple(row.golds))
        out.append(Ranking(query=q, ids=tuple(row.top_ids), names=tuple(row.top_names),
                           scores=tuple(row.top_scores), gold_ranks=tuple(row.gold_ranks),
                           n_candidates=0 if pd.isna(row.n_candidates) else int(row.n_candidates)))
    return out


@dataclass
class Run:
    """A benchmark run: its metadata (settings, timings…) and results frame (one row per query)."""

    run_id: str | None
    meta: dict
    frame: pd.DataFrame
    _rankings: list | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return self.meta.get("label") or self.run_id or "run"

    def rankings(self) -> list[Ranking]:
        if self._rankings is None:
            self._rankings = frame_rankings(self.frame)
        return self._rankings

    def summary(self, *, ks: Sequence[int] = run_metrics.KS) -> dict:
        """:func:`probekit.metrics.summary` of the full set, plus the same for its hard subset."""
        out = metrics.summary(self.rankings(), ks=ks)
        hard = [r for r, h in zip(self.rankings(), self.frame["hard"].fillna(False)) if h]
        out["hard"] = metrics.summary(hard, ks=ks) if hard else None
        return out


# ---------------------------------------------------------------- store
def _json_frame(frame: pd.DataFrame, run_id: str) -> pd.DataFrame:
    out = frame.copy()
    for c in JSON_COLUMNS:
        out[c] = [json.dumps(list(v)) for v in out[c]]
    out.insert(0, "run_id", run_id)
    return out


def _arrow_schema():
    import pyarrow as pa

    types = {"golds": pa.list_(pa.string()), "gold_ranks": pa.list_(pa.int64()), "top_ids": pa.list_(pa.int64()),
             "top_names": pa.list_(pa.string()), "top_scores": pa.list_(pa.float64()), "best_gold_rank": pa.int64(),
             "gold_length": pa.float64(), "hard": pa.bool_(), "n_candidates": pa.int64()}
    return pa.schema([(c, types.get(c, pa.string())) for c in RESULT_COLUMNS])


def _insert_results(run_id: str, frame: pd.DataFrame) -> None:
    """Insert a results frame; list columns go in as typed Arrow lists and DuckDB writes their JSON."""
    import pyarrow as pa

    data = pa.Table.from_pandas(frame[list(RESULT_COLUMNS)], schema=_arrow_schema(), preserve_index=False)
    select = ", ".join(f"to_json({c})::VARCHAR" if c in JSON_COLUMNS else c for c in RESULT_COLUMNS)
    with _store().transaction() as cur:
        cur.register("pk_run_results_arrow", data)
        cur.execute(f"INSERT INTO run_results (run_id, {', '.join(RESULT_COLUMNS)}) "
                    f"SELECT ?, {select} FROM pk_run_results_arrow", [run_id])
        cur.unregister("pk_run_results_arrow")


def _label(model, dataset, probe_name, opts) -> str:
    bits = [str(v) for k, v in sorted(opts.items()) if k in ("pooling", "similarity") and v]
    if opts.get("layer") is not None and opts.get("layer") != model.num_layers:
        bits.append(f"L{opts['layer']}")
    label = getattr(model, "label", model.id)
    return f"{label} · {dataset.name} · {probe_name}" + (f" ({', '.join(bits)})" if bits else "")


def _insert_run(run_id, *, model, dataset, probe, opts, vocab, k, settings, status, label) -> None:
    meta = {
        "run_id": run_id, "created_at": _now(), "finished_at": None, "status": status,
        "settings_key": settings_key(settings), "label": label or _label(model, dataset, probe.name, opts),
        "model": model.id, "model_source": model.source, "model_revision": model.revision,
        "dataset": dataset.name, "dataset_version": dataset.version, "dataset_set": dataset.meta.get("set"),
        "dataset_spec": dataset_spec(dataset), "probe": probe.name, "options": json.dumps(opts, default=str),
        "vocab": vocab, "k": int(k), "device": str(model.device), "probekit_version": __version__,
        "n_queries": len(dataset), "n_relations": len(dataset.relations), "seconds": None, "timings": None,
        "message": None,
    }
    with _store().transaction() as cur:
        cur.execute(f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    [meta[c] for c in RUN_COLUMNS])


def _finish_run(run_id: str, status: str, *, seconds: float | None = None, timings: dict | None = None,
                message: str | None = None) -> None:
    with _store().transaction() as cur:
        cur.execute("UPDATE runs SET status = ?, finished_at = ?, seconds = coalesce(?, seconds), "
                    "timings = coalesce(?, timings), message = ? WHERE run_id = ?",
                    [status, _now(), seconds, None if timings is None else json.dumps(timings), message, run_id])


def _new_run_id() -> str:
    return f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"


def save_run(rankings: Sequence[Ranking], *, model, dataset: Dataset, probe, options: dict | None = None,
             vocab: str = "heads+tails", k: int = 10, seconds: float | None = None, timings: dict | None = None,
             label: str | None = None) -> str:
    """Store finished rankings (e.g. from ``python -m probekit bench --save``); returns the new run id."""
    probe = _probe(probe)
    if not rankings:
        raise ProbekitError("nothing to store: no rankings")
    settings = settings_of(model, dataset, probe=probe, options=options, vocab=vocab, k=k)
    opts = resolve_options(model, probe, options)
    run_id = _new_run_id()
    _insert_run(run_id, model=model, dataset=dataset, probe=probe, opts=opts, vocab=vocab, k=k,
                settings=settings, status="running", label=label)
    try:
        _insert_results(run_id, rankings_frame(rankings))
    except BaseException:
        _finish_run(run_id, "failed", message="saving failed")
        raise
    _finish_run(run_id, "done", seconds=seconds, timings=timings)
    return run_id


def get_run(run_id: str) -> dict:
    """A run's metadata (options and timings decoded)."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise ProbekitError("give a run id (see `python -m probekit runs list`)")
    rows = _store().fetch(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE run_id = ?", [run_id.strip()])
    if not rows:
        raise ProbekitError(f"no stored run {run_id!r} (see `python -m probekit runs list`)")
    meta = dict(zip(RUN_COLUMNS, rows[0]))
    meta["options"] = json.loads(meta["options"] or "{}")
    meta["timings"] = json.loads(meta["timings"] or "{}")
    return meta


def _results(run_id: str, relations: Sequence[str] | None = None) -> pd.DataFrame:
    sql = f"SELECT {', '.join(RESULT_COLUMNS)} FROM run_results WHERE run_id = ?"
    params: list = [run_id]
    if relations:
        sql += f" AND relation IN ({', '.join('?' * len(relations))})"
        params += list(relations)
    frame = _store().fetch_df(sql + " ORDER BY relation, query_id", params)
    for c in JSON_COLUMNS:
        frame[c] = [json.loads(v) for v in frame[c]]
    return _typed(frame)


_RUNS: OrderedDict[tuple, Run] = OrderedDict()
_RUNS_SIZE = 12
_RUNS_LOCK = threading.Lock()


def load_run(run_id: str, *, relations: Sequence[str] | None = None) -> Run:
    """A stored run (optionally only some relations) as a :class:`Run`.

    Finished runs never change, so whole ones are kept in a small in-process memo shared by every
    caller (treat the returned frame as read-only).
    """
    meta = get_run(run_id)
    rid = meta["run_id"]
    key = (_store().path, rid)
    whole = relations is None and meta["status"] == "done"
    if whole:
        with _RUNS_LOCK:
            hit = _RUNS.get(key)
            if hit is not None:
                _RUNS.move_to_end(key)
                return hit
    run = Run(rid, meta, _results(rid, relations))
    if whole:
        with _RUNS_LOCK:
            _RUNS[key] = run
            while len(_RUNS) > _RUNS_SIZE:
                _RUNS.popitem(last=False)
    return run


def find_run(settings, *, statuses: Sequence[str] = ("done",)) -> str | None:
    """The newest run whose settings equal ``settings`` (a :func:`settings_of` dict or its key)."""
    key = settings if isinstance(settings, str) else settings_key(settings)
    rows = _store().fetch(f"SELECT run_id FROM runs WHERE settings_key = ? AND status IN "
                          f"({', '.join('?' * len(statuses))}) ORDER BY created_at DESC, run_id DESC LIMIT 1",
                          [key, *statuses])
    return rows[0][0] if rows else None


def list_runs(*, status: str | None = None) -> pd.DataFrame:
    """Stored runs, newest first, with macro/micro acc@1/@10 recomputed from their results."""
    where, params = "", []
    if status is not None:
        if status not in STATUSES:
            raise ProbekitError(f"unknown status {status!r}; available: {', '.join(STATUSES)}")
        where, params = "WHERE r.status = ?", [status]
    return _store().fetch_df(f"""
        WITH per AS (
            SELECT run_id, relation, count(*) AS n,
                   avg(CASE WHEN best_gold_rank <= 1 THEN 1.0 ELSE 0.0 END) AS a1,
                   avg(CASE WHEN best_gold_rank <= 10 THEN 1.0 ELSE 0.0 END) AS a10
            FROM run_results GROUP BY run_id, relation),
        agg AS (
            SELECT run_id, sum(n) AS n_done, avg(a1) AS macro1, avg(a10) AS macro10,
                   sum(a1 * n) / sum(n) AS micro1, sum(a10 * n) / sum(n) AS micro10
            FROM per GROUP BY run_id)
        SELECT r.run_id, r.created_at, r.status, r.label, r.model, r.dataset, r.dataset_set, r.probe, r.options,
               r.vocab, r.k, r.device, r.n_queries, coalesce(a.n_done, 0) AS n_done, r.seconds,
               a.macro1 AS "macro acc@1", a.macro10 AS "macro acc@10",
               a.micro1 AS "micro acc@1", a.micro10 AS "micro acc@10"
        FROM runs r LEFT JOIN agg a USING (run_id) {where}
        ORDER BY r.created_at DESC, r.run_id DESC""", params)


def delete_run(run_id: str) -> None:
    """Remove a stored run and its results (not while it is running in this process)."""
    meta = get_run(run_id)
    if meta["run_id"] in _ACTIVE:
        raise ProbekitError(f"run {run_id} is running: cancel it first")
    with _store().transaction() as cur:
        cur.execute("DELETE FROM run_results WHERE run_id = ?", [meta["run_id"]])
        cur.execute("DELETE FROM runs WHERE run_id = ?", [meta["run_id"]])
    with _RUNS_LOCK:
        _RUNS.pop((_store().path, meta["run_id"]), None)


def export_frame(run: str | Run) -> pd.DataFrame:
    """A run's results with its model, dataset and probe: the export table (JSON text columns)."""
    run = load_run(run) if isinstance(run, str) else run
    data = _json_frame(run.frame, run.run_id)
    for i, c in enumerate(("label", "model", "model_revision", "dataset", "dataset_version", "probe", "vocab")):
        data.insert(1 + i, c, run.meta[c])
    return data


def frame_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """Any table as CSV or Parquet bytes (download buttons)."""
    return table_bytes(frame, fmt, formats=EXPORT_FORMATS)


def export_run(run_id: str, path: str | Path, *, fmt: str | None = None) -> Path:
    """Write :func:`export_frame` to ``path`` as CSV or Parquet (format from ``fmt`` or the suffix),
    atomically and safely (:func:`probekit.store.export.write_table`); arguments are checked first."""
    path = Path(path)
    safe_target(path)
    return write_table(export_frame(run_id), path, fmt=fmt, formats=EXPORT_FORMATS)


# ---------------------------------------------------------------- query embeddings (retrieval)
_QMEMO: OrderedDict[str, np.ndarray] = OrderedDict()
_QMEMO_BYTES = 512 * 2**20
_QLOCK = threading.Lock()


def clear_memo() -> None:
    """Forget in-process query embeddings (the disk cache stays)."""
    with _QLOCK:
        _QMEMO.clear()


def query_embedding_key(model, texts: Sequence[str], *, layer: int, pooling: str, max_length: int,
                        fast: bool = False) -> str:
    texts_hash = hashlib.sha1(json.dumps(list(texts)).encode()).hexdigest()
    parts = {"kind": "queries", "model": model.source, "rev": model.revision, "layer": layer, "pooling": pooling,
             "max_length": max_length, "texts": texts_hash, "enc": ENCODER_VERSION,
             "precision": precision(model, fast)}
    return "q" + hashlib.sha1(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def _qmemo_put(key: str, vec: np.ndarray) -> None:
    with _QLOCK:
        _QMEMO[key] = vec
        while sum(v.nbytes for v in _QMEMO.values()) > _QMEMO_BYTES and len(_QMEMO) > 1:
            _QMEMO.popitem(last=False)


def query_embeddings(model, texts: Sequence[str], *, layers: Sequence[int], pooling: str, max_length: int = 50,
                     batch_size: int = 128, fast: bool = False, progress: Callable[[int, int], None] | None = None,
                     use_cache: bool = True) -> dict[int, np.ndarray]:
    """(n_texts, dim) float32 per layer, from memo, ``cache/embeddings`` or one encoding pass.

    The cache key covers the model (source and revision), layer, pooling, length limit, precision
    and the exact texts, so a rerun with the same settings skips encoding entirely.
    """
    texts = [str(t) for t in texts]
    folder = config.cache_dir() / "embeddings"
    out: dict[int, np.ndarray] = {}
    missing: list[int] = []
    shape = (len(texts), model.hidden_size)
    for layer in layers:
        key = query_embedding_key(model, texts, layer=layer, pooling=pooling, max_length=max_length, fast=fast)
        with _QLOCK:
            vec = _QMEMO.get(key) if use_cache else None
        path = folder / f"{key}.npy"
        if vec is None and use_cache and path.exists():
            try:
                vec = np.load(path, allow_pickle=False)
            except (OSError, ValueError, EOFError):
                vec = None
            if vec is not None and vec.shape == shape:
                _qmemo_put(key, vec)
        if vec is None or vec.shape != shape:
            missing.append(layer)
        else:
            out[layer] = vec
    if missing:
        opts = {"fast": True} if fast else {}
        vecs = encode_layers(model, texts, layers=missing, pooling=pooling, batch_size=batch_size,
                             max_length=max_length, progress=progress, **opts)  # (n_missing, n_texts, dim)
        for layer, vec in zip(missing, vecs):
            out[layer] = vec
            if use_cache:
                key = query_embedding_key(model, texts, layer=layer, pooling=pooling, max_length=max_length,
                                          fast=fast)
                folder.mkdir(parents=True, exist_ok=True)
                tmp = folder / f"{key}.{os.getpid()}.{threading.get_ident()}.tmp.npy"
                np.save(tmp, vec)
                tmp.replace(folder / f"{key}.npy")
                _qmemo_put(key, vec)
    return out


def rank_vectors(queries: Sequence[Query], candidates, index: EntityIndex, qvec: np.ndarray, *, k: int,
                 progress: Callable[[int, int], None] | None = None, chunk: int = 1024) -> list[Ranking]:
    """Rankings from query vectors (n_queries, dim) against an index: the retrieval probe's scoring step
    (:func:`~probekit.probes.base.top_k_and_gold_ranks` on every row of exact scores)."""
    from ..probes.base import gold_indices, top_k_and_gold_ranks

    out: list[Ranking] = []
    names, n = candidates.names, len(candidates)
    for start in range(0, len(queries), chunk):
        sims = index.all_scores(qvec[start:start + chunk])  # (chunk, n_names)
        for j, q in enumerate(queries[start:start + chunk]):
            top, ranks = top_k_and_gold_ranks(sims[j], k, gold_indices(q, candidates))
            ids = top.tolist()
            out.append(Ranking(query=q, ids=tuple(ids), names=tuple(names[i] for i in ids),
                               scores=tuple(sims[j, top].tolist()), gold_ranks=tuple(ranks), n_candidates=n))
        if progress:
            progress(min(start + chunk, len(queries)), len(queries))
    return out


def _retrieval(model, queries, candidates, opts, k, stage, timings) -> list[Ranking]:
    """The retrieval probe with cached query embeddings (same calls and scores as ``probe.rank``)."""
    from ..probes.base import check_inputs

    check_inputs(model, queries, candidates, k=k)
    layer, pooling, fast = opts["layer"], opts["pooling"], bool(opts.get("fast"))
    t = time.perf_counter()
    index = build_index(model, candidates, layer=layer, pooling=pooling, similarity=opts["similarity"],
                        batch_size=opts["batch_size"], progress=stage("encoding candidates"),
                        **({"fast": True} if fast else {}))
    t2 = time.perf_counter()
    timings["encoding candidates"] += t2 - t
    texts = [q.text(model.mask_token) for q in queries]
    qvec = query_embeddings(model, texts, layers=[layer], pooling=pooling, max_length=opts["max_length"],
                            batch_size=opts["batch_size"], fast=fast, progress=stage("encoding queries"))[layer]
    t3 = time.perf_counter()
    timings["encoding queries"] += t3 - t2
    out = rank_vectors(queries, candidates, index, qvec, k=k, progress=stage("scoring"))
    timings["scoring"] += time.perf_counter() - t3
    return out


# ---------------------------------------------------------------- running a benchmark
_ACTIVE: set[str] = set()
_ACTIVE_LOCK = threading.Lock()


def _resumable(key: str) -> str | None:
    """The newest unfinished run with these settings that no thread of this process is running."""
    for (run_id,) in _store().fetch("SELECT run_id FROM runs WHERE settings_key = ? AND status IN "
                                    "('cancelled', 'failed', 'running') ORDER BY created_at DESC", [key]):
        with _ACTIVE_LOCK:
            if run_id not in _ACTIVE:
                return run_id
    return None


def run_benchmark(model, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                  vocab: str = "heads+tails", k: int = 10, progress: Progress | None = None,
                  should_cancel: Callable[[], bool] | None = None, reuse: bool = True, save: bool = True,
                  label: str | None = None) -> Run:
    """Probe every query of ``dataset``, relation by relation, and (by default) store the run.

    With ``reuse`` a finished run with the same settings is loaded instead, and an unfinished one
    (cancelled, failed or killed) is resumed: relations already stored are skipped. ``progress`` gets
    ``(done, total, stage)``; ``should_cancel`` is checked between relations and encoding batches and
    stops the run with :class:`Cancelled` (finished relations stay stored). ``reuse=False`` always
    computes a new run (cached embeddings are still used).
    """
    probe = _probe(probe)
    settings = settings_of(model, dataset, probe=probe, options=options, vocab=vocab, k=k)
    opts = resolve_options(model, probe, options)
    if probe.requires_mlm and not model.has_mlm:
        raise ProbekitError(f"probe {probe.name!r} needs a model with an MLM head; {model.id!r} has none")
    key = settings_key(settings)

    def report(done, total, stage):
        if progress is not None:
            progress(done, total, stage)

    def check_cancel():
        if should_cancel is not None and should_cancel():
            raise Cancelled("the run was cancelled; finished relations are stored and resume on the next start")

    if save and reuse:
        found = find_run(key)
        if found:
            report(1, 1, "found in the store")
            return load_run(found)
    run_id = _resumable(key) if (save and reuse) else None
    done_rels: set[str] = set()
    if run_id:
        done_rels = {r for (r,) in _store().fetch("SELECT DISTINCT relation FROM run_results WHERE run_id = ?",
                                                  [run_id])}
        with _store().transaction() as cur:
            cur.execute("UPDATE runs SET status = 'running', message = NULL WHERE run_id = ?", [run_id])
    elif save:
        run_id = _new_run_id()
        _insert_run(run_id, model=model, dataset=dataset, probe=probe, opts=opts, vocab=vocab, k=k,
                    settings=settings, status="running", label=label)
    prev_seconds = (get_run(run_id)["seconds"] or 0.0) if run_id else 0.0
    if run_id:
        with _ACTIVE_LOCK:
            _ACTIVE.add(run_id)
    start = time.perf_counter()
    timings: dict[str, float] = defaultdict(float)
    relations = [r for r in dataset.relations if r not in done_rels]
    total = sum(len(dataset.queries_for(r)) for r in relations)
    collected: list[Ranking] = []
    frames: list[pd.DataFrame] = []
    done = 0
    try:
        for i, rel in enumerate(relations):
            check_cancel()
            queries = dataset.queries_for(rel)
            candidates = dataset.candidates(vocab, rel if vocab == "relation" else None)
            where = f"relation {i + 1}/{len(relations)} {rel}"

            def stage(name, _base=done, _n=len(queries), _where=where):
                def inner(n_done, n_total):
                    check_cancel()
                    # candidate encoding counts names, the other stages count this relation's queries
                    frac = n_done / max(n_total, 1)
                    shown = _base if name == "encoding candidates" else _base + int(frac * _n)
                    report(shown, total, f"{_where} · {name} {n_done:,}/{n_total:,}")
                return inner

            if probe.name == "retrieval":
                rankings = _retrieval(model, queries, candidates, opts, k, stage, timings)
            else:
                t = time.perf_counter()
                rankings = probe.rank(model, queries, candidates, k=k, **opts,
                                      progress=lambda d, tot, s, _st=stage: _st(s)(d, tot))
                timings["probing"] += time.perf_counter() - t
            t = time.perf_counter()
            frames.append(rankings_frame(rankings))
            if save:
                _insert_results(run_id, frames[-1])
            timings["saving"] += time.perf_counter() - t
            collected += rankings
            done += len(queries)
            report(done, total, f"{where} · done")
    except Cancelled:
        if run_id:
            _finish_run(run_id, "cancelled", seconds=prev_seconds + time.perf_counter() - start,
                        message="cancelled by the user")
        raise
    except BaseException as e:
        if run_id:
            _finish_run(run_id, "failed", seconds=prev_seconds + time.perf_counter() - start,
                        message=f"{type(e).__name__}: {str(e)[:300]}")
        raise
    finally:
        if run_id:
            with _ACTIVE_LOCK:
                _ACTIVE.discard(run_id)
    seconds = time.perf_counter() - start
    timings = {name: round(v, 3) for name, v in timings.items()}
    if not save:
        meta = {"run_id": None, "label": label or _label(model, dataset, probe.name, opts), "model": model.id,
                "dataset": dataset.name, "probe": probe.name, "options": opts, "vocab": vocab, "k": k,
                "seconds": seconds, "timings": timings, "status": "done", "settings_key": key}
        return Run(None, meta, _concat(frames), collected)
    _finish_run(run_id, "done", seconds=prev_seconds + seconds, timings=timings)
    if done_rels:  # resumed: part of the results came from the store
        return load_run(run_id)
    frame = _concat(frames).sort_values(["relation", "query_id"], ignore_index=True)
    return Run(run_id, get_run(run_id), frame)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    if not frames:
        return _typed(pd.DataFrame({c: [] for c in RESULT_COLUMNS}))
    return _typed(pd.concat(frames, ignore_index=True))


def start_benchmark(models_: Sequence, dataset: Dataset, *, probe="retrieval", options: dict | None = None,
                    vocab: str = "heads+tails", k: int = 10, device: str | None = None,
                    reuse: bool = True) -> Job:
    """A started :class:`Job` benchmarking each model in turn; ``result`` is the list of run ids.

    Models are :class:`~probekit.models.LoadedModel` objects or ids; ids are loaded in the job (and
    released after), so a typo fails the job with a message, not the page.
    """
    from .. import models as models_mod

    if not models_:
        raise ProbekitError("pick at least one model")
    probe = _probe(probe)
    _check_run_args(dataset, vocab, k)

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
