"""Layer-wise probing (MedLAMA Fig. 6–7): the retrieval probe at ``hidden_states[L]`` for L = 1..N.

Probing "with the first L layers" means taking the hidden states after layer L. Candidates and
queries are encoded ONCE for all layers into the one embedding cache (:mod:`probekit.cache`, on disk
and shared with benchmark runs); then each layer is an ordinary run of the one runner
(:func:`probekit.bench.runner.run_benchmark` with ``layer=L``, not stored as a run), whose retrieval
probe finds every vector in the cache and only searches. Layers go one after another, so at most a
few layers' faiss indexes are in memory at a time, never all layers' vectors twice
(``benchmarks/layers_memory.py`` measures it). Results are, per (layer, relation, subset), the number of queries,
their hits at 1/5/10 and their best gold ranks, so every registered metric (:mod:`probekit.metrics.registry`) is
computed from them, a metric registered after the sweep included (sweeps stored before ranks were kept give acc@k
from their hit counts, other metrics NaN), with ``subset`` as in :data:`probekit.metrics.compare.SUBSETS` (a
full-set sweep: ``full`` and ``hard-in-full``, its hard queries among the full set's names; a hard-set sweep:
``hard``), stored in DuckDB (component ``layers``) so a finished sweep with the same settings opens instantly.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pandas as pd

from .. import __version__, cache, index, jobs
from ..datasets import Dataset
from ..encode import POOLINGS, precision
from ..errors import ProbekitError
from ..index import SIMILARITIES
from ..metrics.compare import SUBSETS
from ..metrics.registry import metric_names
from ..probes.retrieval import QUERY_MAX_LENGTH
from ..store import component_store
from .layer_tables import (  # noqa: F401 - the sweep's tables, used through this module too
    COUNTING,
    KS,
    TABLE_COLUMNS,
    _hit_counts,
    best_layers,
    layer_accuracy,
    layer_averages,
)
from .runner import run_benchmark
from .settings import check_run_args, dataset_spec

COMPONENT = "layers"
TOP_K = max(KS)
RUN_COLUMNS = ("run_id", "created_at", "settings_key", "label", "model", "model_source", "model_revision", "dataset",
               "dataset_version", "dataset_set", "dataset_spec", "options", "vocab", "layers", "device",
               "probekit_version", "n_queries", "seconds", "timings")


def _store():
    return component_store(COMPONENT)


@dataclass
class LayerRun:
    """A layer sweep: metadata and its table (one row per layer × relation × subset with hit counts)."""

    run_id: str | None
    meta: dict
    table: pd.DataFrame

    @property
    def label(self) -> str:
        return self.meta.get("label") or self.run_id or "layers"

    @property
    def layers(self) -> list[int]:
        return sorted(int(x) for x in self.table["layer"].unique())

    @property
    def hard_set(self) -> bool:
        return self.meta.get("dataset_set") == "hard"

    @property
    def subsets(self) -> list[str]:
        """The subsets this sweep has rows for, in :data:`SUBSETS` order."""
        present = set(self.table["subset"])
        return [s for s in SUBSETS if s in present]

    def accuracy(self, *, metric: str = "acc@1", subset: str = "full") -> pd.DataFrame:
        return layer_accuracy(self.table, metric=metric, subset=subset)

    def averages(self, *, subset: str = "full") -> pd.DataFrame:
        return layer_averages(self.table, subset=subset)

    def best_layers(self, *, metric: str = "acc@1", subset: str = "full") -> pd.DataFrame:
        return best_layers(self.accuracy(metric=metric, subset=subset))

    def to_dict(self) -> dict:
        """JSON-able summary: per-layer averages and the best layer per relation for each subset (None where the
        sweep has none: ``hard`` on a full-set sweep, ``full``/``hard-in-full`` on a hard-set one)."""
        out: dict = {"run_id": self.run_id, "label": self.label, "layers": self.layers,
               "settings": {k: self.meta.get(k) for k in ("model", "model_revision", "dataset", "dataset_version",
                                                          "options", "vocab", "device", "seconds", "timings")}}
        names = metric_names()
        out["metrics"] = names
        out["counting"] = COUNTING
        for subset in SUBSETS:
            if not (self.table["subset"] == subset).any():
                out[subset] = None
                continue
            by_metric = {n: self.accuracy(metric=n, subset=subset) for n in names}
            out[subset] = {
                "per_layer": {int(L): row for L, row in self.averages(subset=subset).to_dict("index").items()},
                "relations": {rel: {n: {int(L): v for L, v in by_metric[n].loc[rel].items() if not pd.isna(v)}
                                    for n in names} for rel in by_metric[names[0]].index},
                "best_layers": {n: {row["relation"]: {c: (None if pd.isna(v) else v) for c, v in row.items()
                                                      if c != "relation"}
                                    for row in best_layers(by_metric[n]).to_dict("records")} for n in names},
            }
        return out


# ---------------------------------------------------------------- running a sweep
def _check_layers(model, layers) -> list[int]:
    n = model.num_layers
    if layers is None:
        return list(range(1, n + 1))
    try:
        out = sorted({int(x) for x in layers})
    except (TypeError, ValueError):
        raise ProbekitError(f"layers must be integers 0..{n}, got {layers!r}") from None
    if not out:
        raise ProbekitError("give at least one layer")
    bad = [x for x in out if not 0 <= x <= n]
    if bad:
        raise ProbekitError(f"layer {bad[0]} out of range: {model.id} has layers 0..{n} (0 = embeddings)")
    return out


def layer_settings(model, dataset: Dataset, *, layers=None, pooling: str | None = None, similarity: str = "cosine",
                   vocab: str = "heads+tails", max_length: int = QUERY_MAX_LENGTH, fast: bool = False,
                   exclude_subject: bool = False) -> dict:
    """Everything that decides a sweep's results (its store key is a hash of this). ``exclude_subject`` is in the
    options only when set, so sweeps stored before it existed (which kept the subject) keep their keys."""
    check_run_args(dataset, vocab, TOP_K)
    pooling = pooling or model.spec.pooling
    if pooling not in POOLINGS:
        raise ProbekitError(f"unknown pooling {pooling!r}; available: {', '.join(POOLINGS)}")
    if similarity not in SIMILARITIES:
        raise ProbekitError(f"unknown similarity {similarity!r}; available: {', '.join(SIMILARITIES)}")
    return {"model_source": model.source, "model_revision": model.revision,
            "precision": precision(model, fast), "dataset": dataset.name,
            "dataset_version": dataset.version, "relations": dataset.relations, "n_queries": len(dataset),
            "layers": _check_layers(model, layers), "options": {"pooling": pooling, "similarity": similarity,
                                                                  "max_length": max_length, "fast": bool(fast),
                                                                  **({"exclude_subject": True} if exclude_subject
                                                                     else {})},
            "vocab": vocab}


def _key(settings: dict) -> str:
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:20]


def find_layer_run(settings: dict | str) -> str | None:
    key = settings if isinstance(settings, str) else _key(settings)
    rows = _store().fetch("SELECT run_id FROM layer_runs WHERE settings_key = ? ORDER BY created_at DESC, run_id DESC "
                          "LIMIT 1", [key])
    return rows[0][0] if rows else None


def run_layers(model, dataset: Dataset, *, layers: Sequence[int] | None = None, pooling: str | None = None,
               similarity: str = "cosine", vocab: str = "heads+tails", batch_size: int = 128,
               max_length: int = QUERY_MAX_LENGTH, fast: bool = False, exclude_subject: bool = False,
               progress: jobs.Progress | None = None, should_cancel: Callable[[], bool] | None = None,
               reuse: bool = True, save: bool = True, label: str | None = None) -> LayerRun:
    """Retrieval-probe accuracy per relation at every layer in ``layers`` (default 1..N).

    With ``reuse`` a stored sweep with the same settings is returned at once. ``progress`` gets
    ``(done, total, stage)``; ``should_cancel`` stops the sweep with :class:`~probekit.jobs.Cancelled`
    (embeddings already computed stay cached, so a restart picks up quickly). ``exclude_subject`` leaves each
    query's own subject out of its candidates (an untuned encoder ranks it first, so acc@1 reads 0 with it in).
    """
    settings = layer_settings(model, dataset, layers=layers, pooling=pooling, similarity=similarity, vocab=vocab,
                              max_length=max_length, fast=fast, exclude_subject=exclude_subject)
    layers, pooling = settings["layers"], settings["options"]["pooling"]
    key = _key(settings)

    def report(done, total, stage):
        if progress is not None:
            progress(done, total, stage)

    def check_cancel():
        if should_cancel is not None and should_cancel():
            raise jobs.Cancelled("the layer sweep was cancelled; embeddings computed so far stay cached")

    if reuse:
        found = find_layer_run(key)
        if found:
            report(1, 1, "found in the store")
            return load_layer_run(found)
    start = time.perf_counter()
    timings = {"encoding candidates": 0.0, "encoding queries": 0.0, "scoring": 0.0}
    total = len(dataset) * len(layers)

    def stage(name):
        def inner(d, t, _stage=""):
            check_cancel()
            report(0, total, f"{name} {d:,}/{t:,}")
        return inner

    # 1. every layer's vectors in ONE encoding pass per text set, into the disk cache (not kept here)
    t = time.perf_counter()
    cand_sets = [dataset.candidates(vocab)] if vocab != "relation" else \
        [dataset.candidates("relation", rel) for rel in dataset.relations]
    for n_set, cands in enumerate(cand_sets):
        where = f" {n_set + 1}/{len(cand_sets)}" if len(cand_sets) > 1 else ""
        index.candidate_embeddings(model, cands, layers=layers, pooling=pooling, batch_size=batch_size, fast=fast,
                                   progress=stage(f"encoding candidates{where} ({len(layers)} layers)"), memo=False)
    timings["encoding candidates"] += time.perf_counter() - t
    t = time.perf_counter()
    for i, rel in enumerate(dataset.relations):
        check_cancel()
        texts = [q.text(model.mask_token) for q in dataset.queries_for(rel)]
        cache.embeddings(model, texts, layers=layers, pooling=pooling, max_length=max_length, fast=fast,
                         batch_size=batch_size, memo=False,
                         progress=stage(f"relation {i + 1}/{len(dataset.relations)} {rel} · encoding queries"))
    timings["encoding queries"] += time.perf_counter() - t
    # 2. one ordinary (unsaved) run per layer: the retrieval probe finds every vector in the cache
    rows: list[tuple] = []
    options = {"pooling": pooling, "similarity": similarity, "max_length": max_length, "fast": bool(fast),
               "batch_size": batch_size, "exclude_subject": bool(exclude_subject)}
    for n_layer, L in enumerate(layers):
        check_cancel()
        base = n_layer * len(dataset)

        def layer_report(d, t_, s, _base=base, _L=L, _n=n_layer):
            report(_base + min(d, len(dataset)), total, f"layer {_L} ({_n + 1}/{len(layers)}) · {s}")

        t = time.perf_counter()
        run = run_benchmark(model, dataset, probe="retrieval", options={**options, "layer": L}, vocab=vocab,
                            k=TOP_K, progress=layer_report, should_cancel=should_cancel, save=False)
        timings["scoring"] += time.perf_counter() - t
        for rel, part in run.frame.groupby("relation", sort=False):
            for subset, counts in _hit_counts(part, hard_set=dataset.meta.get("set") == "hard").items():
                rows.append((L, rel, subset, *counts))
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS).sort_values(["layer", "relation", "subset"], ignore_index=True)
    seconds = time.perf_counter() - start
    meta = {"run_id": None, "created_at": datetime.now(UTC).replace(tzinfo=None), "settings_key": key,
            "label": label or f"{model.label} · {dataset.name} ({pooling}, {similarity}, {vocab})",
            "model": model.id, "model_source": model.source, "model_revision": model.revision,
            "dataset": dataset.name, "dataset_version": dataset.version, "dataset_set": dataset.meta.get("set"),
            "dataset_spec": dataset_spec(dataset), "options": settings["options"], "vocab": vocab,
            "layers": layers, "device": str(model.device), "probekit_version": __version__,
            "n_queries": len(dataset), "seconds": seconds, "timings": {k: round(v, 3) for k, v in timings.items()}}
    if save:
        meta["run_id"] = _save(meta, table)
    return LayerRun(meta["run_id"], meta, table)


def _save(meta: dict, table: pd.DataFrame) -> str:
    run_id = f"layers-{datetime.now(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
    values = {**meta, "run_id": run_id, "options": json.dumps(meta["options"]), "layers": json.dumps(meta["layers"]),
              "timings": json.dumps(meta["timings"])}
    data = table.rename(columns={**{f"hits@{k}": f"hits_{k}" for k in KS}, "ranks": "best_ranks"})
    data["best_ranks"] = [json.dumps(r) for r in data["best_ranks"]]
    data.insert(0, "run_id", run_id)
    cols = ", ".join(data.columns)
    with _store().transaction() as cur:
        cur.execute(f"INSERT INTO layer_runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(RUN_COLUMNS))})",
                    [values[c] for c in RUN_COLUMNS])
        cur.register("pk_layer_results_df", data)
        cur.execute(f"INSERT INTO layer_results ({cols}) SELECT {cols} FROM pk_layer_results_df")
        cur.unregister("pk_layer_results_df")
    return run_id


def load_layer_run(run_id: str) -> LayerRun:
    rows = _store().fetch(f"SELECT {', '.join(RUN_COLUMNS)} FROM layer_runs WHERE run_id = ?", [run_id])
    if not rows:
        raise ProbekitError(f"no stored layer sweep {run_id!r}")
    meta = dict(zip(RUN_COLUMNS, rows[0]))
    for c in ("options", "layers", "timings"):
        meta[c] = json.loads(meta[c] or "null")
    table = _store().fetch_df("SELECT layer, relation, subset, n, hits_1, hits_5, hits_10, best_ranks "
                              "FROM layer_results WHERE run_id = ? ORDER BY layer, relation, subset", [run_id])
    table.columns = TABLE_COLUMNS
    table["ranks"] = [None if r is None or pd.isna(r) else json.loads(r) for r in table["ranks"]]
    return LayerRun(run_id, meta, table)


def list_layer_runs() -> pd.DataFrame:
    """Stored sweeps, newest first."""
    return _store().fetch_df("SELECT run_id, created_at, label, model, dataset, vocab, layers, n_queries, seconds "
                             "FROM layer_runs ORDER BY created_at DESC, run_id DESC")


def delete_layer_run(run_id: str) -> None:
    load_layer_run(run_id)
    _store().delete_with_children("layer_runs", run_id)


def start_layers(model, dataset: Dataset, **options) -> jobs.Job:
    """A started background :class:`~probekit.jobs.Job` running :func:`run_layers`; result = the LayerRun."""
    layer_settings(model, dataset, **{k: v for k, v in options.items()
                                      if k in ("layers", "pooling", "similarity", "vocab", "max_length", "fast",
                                               "exclude_subject")})
    return jobs.Job(lambda progress, cancel: run_layers(model, dataset, progress=progress, should_cancel=cancel,
                                                        **options), label="layers").start()
