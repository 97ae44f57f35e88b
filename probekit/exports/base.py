"""What every export format shares: the registry entry (:class:`ExportFormat`), a run's provenance, its per-query
rows as plain JSON values and back, each query's score per registered metric, and reading a file back with one
clear line when it is not what it should be.

A run read back from a file (:func:`probekit.exports.import_run`) is rebuilt from the per-query rows an export
carries (gold ranks, top-k names and scores, hardness…) and the run's own metadata, which every importable format
stores whole (``probekit_run``): the rows decide every number (:meth:`probekit.bench.results.Run.summary`), so the
imported run's summary equals the original's.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..bench.frames import RESULT_COLUMNS, Run, typed
from ..errors import DataFormatError, ProbekitError
from ..metrics.accuracy import COUNTINGS, item_scores
from ..metrics.registry import get_metric, metric_names

PRIVATE = ("owner_host", "owner_pid", "owner_start", "heartbeat_at")
Imported = tuple[dict, pd.DataFrame]
"""What a reader gives back: the run's metadata (its ``runs`` columns) and its results frame."""


@dataclass(frozen=True)
class ExportFormat:
    """One export format. ``write(run, out)`` writes the run under ``out`` (a file, or a folder when ``folder``) and
    returns the paths written; ``read(path)``, for a format probekit can import, gives back :data:`Imported`;
    ``detect(path)`` says cheaply whether ``path`` looks like this format's export (to import without naming it);
    ``suffixes``: the file suffixes of a file target (``--out`` without ``--format`` is told by its suffix)."""

    name: str
    description: str
    write: Callable[[Run, Path], list[Path]]
    folder: bool = False
    suffixes: tuple[str, ...] = ()
    read: Callable[[Path], Imported] | None = None
    detect: Callable[[Path], bool] | None = None

    @property
    def importable(self) -> bool:
        return self.read is not None


# ---------------------------------------------------------------- provenance
def provenance(run: Run) -> dict:
    """What the numbers of ``run`` depend on, for every export: model id, source and revision, dataset name, set,
    spec and version (a hash of its files' bytes, :func:`probekit.datasets.base.fingerprint_files`), probe, its
    options, vocabulary, k, the counting convention (with its rule), the probekit version that computed the run and
    the one that exported it."""
    m = run.meta
    counting = run.counting
    return {
        "run_id": run.run_id, "label": m.get("label"), "model": m.get("model"), "model_source": m.get("model_source"),
        "model_revision": m.get("model_revision"), "dataset": m.get("dataset"), "dataset_set": m.get("dataset_set"),
        "dataset_spec": m.get("dataset_spec"), "dataset_version": m.get("dataset_version"), "probe": m.get("probe"),
        "options": m.get("options") or {}, "vocab": m.get("vocab"), "k": m.get("k"), "counting": counting,
        "counting_rule": COUNTINGS.get(counting, ""), "answers_per_query": depth_of(run), "search": m.get("search"),
        "device": m.get("device"), "created_at": _text(m.get("created_at")), "finished_at": _text(m.get("finished_at")),
        "computed_with": f"probekit {m.get('probekit_version') or 'unknown'}",
        "exported_with": f"probekit {__version__}",
    }


def run_meta_json(run: Run) -> str:
    """The run's metadata as JSON text: what an importable format stores for :func:`meta_from_json`; without which
    process on which host computed it (nothing a reader needs, and not theirs to know)."""
    meta = {k: v for k, v in run.meta.items() if k not in PRIVATE}
    return json.dumps({"run_id": run.run_id, **meta}, sort_keys=True, default=str)


def meta_from_json(text, *, where: str) -> dict:
    meta = loads(text, where=where) if isinstance(text, str) else text
    if not isinstance(meta, dict) or not isinstance(meta.get("run_id"), str):
        raise DataFormatError(f"{where}: the run's metadata (probekit_run) is missing or not an object with a run_id")
    return meta


def depth_of(run: Run) -> int | None:
    depth = run.meta.get("answers_per_query")
    return None if depth is None or pd.isna(depth) else int(depth)


def _text(value) -> str | None:
    return None if value is None else str(value)


def slug(text: str, *, keep: str = "._-") -> str:
    """``text`` with anything but letters, digits and ``keep`` as ``-`` (a file name or path part).

    >>> slug("medlama:hard / x")
    'medlama-hard-x'
    """
    return re.sub(rf"[^A-Za-z0-9{re.escape(keep)}]+", "-", str(text)).strip("-") or "x"


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- rows
def _opt(value, cast):
    return None if value is None or pd.isna(value) else cast(value)


def result_rows(run: Run) -> list[dict]:
    """One dict of plain JSON values per query: the results frame's :data:`RESULT_COLUMNS`."""
    rows = []
    for r in run.frame.itertuples(index=False):
        rows.append({
            "query_id": str(r.query_id), "relation": str(r.relation), "subject": _opt(r.subject, str),
            "template": _opt(r.template, str), "query": _opt(r.query, str), "golds": [str(g) for g in r.golds],
            "gold_ranks": [None if g is None or pd.isna(g) else int(g) for g in r.gold_ranks],
            "best_gold_rank": _opt(r.best_gold_rank, int), "top_ids": [int(i) for i in r.top_ids],
            "top_names": [str(n) for n in r.top_names], "top_scores": [float(s) for s in r.top_scores],
            "gold_length": _opt(r.gold_length, float), "hard": _opt(r.hard, bool),
            "n_candidates": _opt(r.n_candidates, int),
        })
    return rows


_LISTS = {"golds": str, "gold_ranks": int, "top_ids": int, "top_names": str, "top_scores": float}


def rows_frame(rows: list[dict], *, where: str) -> pd.DataFrame:
    """The results frame of :func:`result_rows` output read back from a file; one clear line for a bad row."""
    if not rows:
        raise DataFormatError(f"{where}: no per-query rows")
    for i, row in enumerate(rows, 1):
        missing = [c for c in ("query_id", "relation", *_LISTS) if c not in row]
        if missing:
            raise DataFormatError(f"{where}, row {i}: no {', '.join(missing)}")
        for c, kind in _LISTS.items():
            value = row[c]
            if not isinstance(value, list) or not all(v is None or isinstance(v, (kind, int) if kind is float else kind)
                                                      for v in value):
                raise DataFormatError(f"{where}, row {i}: {c} must be a list of {kind.__name__}")
    frame = pd.DataFrame([{c: row.get(c) for c in RESULT_COLUMNS} for row in rows], columns=list(RESULT_COLUMNS))
    if frame["query_id"].duplicated().any():
        raise DataFormatError(f"{where}: query {frame['query_id'][frame['query_id'].duplicated()].iloc[0]!r} "
                              f"appears twice")
    frame["top_scores"] = [[float(s) for s in v] for v in frame["top_scores"]]
    return typed(frame)


def sample_scores(run: Run) -> dict[str, list[float | None]]:
    """Each query's score per registered metric under the run's counting: its best gold's score (``query``) or the
    mean over its golds (``triple``); None where it has no item (a ``triple`` query without golds) or the metric
    needs more answers than the method gives. Under ``query`` the micro average is the mean of these."""
    golds = run.frame["gold_ranks"].tolist()
    out: dict[str, list[float | None]] = {}
    depth = depth_of(run)
    for name in metric_names():
        if not get_metric(name).defined_at(depth):
            continue
        items, sums = item_scores(golds, metric=name, counting=run.counting)
        out[name] = [float(s) / int(n) if n else None for n, s in zip(items, sums)]
    return out


def standard_error(values: list[float | None]) -> float | None:
    """The standard error of a mean of per-query scores (sample standard deviation / √n), None under two."""
    xs = np.array([v for v in values if v is not None], dtype=float)
    return float(xs.std(ddof=1) / math.sqrt(len(xs))) if len(xs) > 1 else None


def finite(value) -> float | None:
    """A float that JSON can hold: None for NaN (a metric the method does not have) and for None."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def clean(obj):
    """``obj`` with every NaN float as None (strict JSON has no NaN)."""
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, float) and math.isnan(obj):
        return None
    return obj


# ---------------------------------------------------------------- reading files
def loads(text: str, *, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{where}, line {e.lineno}: not JSON ({e.msg})") from None


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProbekitError(f"no such file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProbekitError(f"cannot read {path}: {e}") from None


def read_jsonl(path: Path) -> list[dict]:
    out = []
    for i, line in enumerate(read_text(path).splitlines(), 1):
        if line.strip():
            obj = loads(line, where=f"{path.name}, line {i}")
            if not isinstance(obj, dict):
                raise DataFormatError(f"{path.name}, line {i}: not a JSON object")
            out.append(obj)
    return out


def need(obj, *keys: str, where: str):
    """``obj[k1][k2]…``, or one line naming the first missing key."""
    for i, key in enumerate(keys):
        if not isinstance(obj, dict) or key not in obj:
            raise DataFormatError(f"{where}: no {'.'.join(keys[:i + 1])} (not a probekit export of this format)")
        obj = obj[key]
    return obj


__all__ = ["ExportFormat", "Imported", "clean", "depth_of", "finite", "loads", "meta_from_json", "need", "provenance",
           "read_jsonl", "read_text", "result_rows", "rows_frame", "run_meta_json", "sample_scores", "sha256_text",
           "slug", "standard_error"]
