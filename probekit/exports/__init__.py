"""Standard exports of a stored run: its results in formats other tools read, and probekit's own back into the store.

:data:`FORMATS` holds one :class:`~probekit.exports.base.ExportFormat` per name, one module each: ``csv`` and
``parquet`` (:mod:`~probekit.exports.tables`), ``eee`` (Every Eval Ever, :mod:`~probekit.exports.eee`), ``lm-eval``
(lm-evaluation-harness's folder, :mod:`~probekit.exports.lm_eval`) and ``hf-eval-results`` (the Hub's
``.eval_results/`` YAML, :mod:`~probekit.exports.hf_eval_results`). Every export carries the model id and revision,
the dataset and the hash of its files, the probe and its options, the counting convention and the probekit versions
(:func:`~probekit.exports.base.provenance`); every file is written by :mod:`probekit.atomic`. docs/exports.md says
what each holds. A paired comparison of two runs is written beside both runs' own exports by
:mod:`~probekit.exports.comparison` (``probekit runs compare A B --out``).

:func:`import_run` reads probekit's own ``eee`` or ``lm-eval`` export back as a stored run. It is marked as
imported everywhere a run is named (its id starts ``imported-``, its label ``imported ·``, its message says from
which file) and has a settings key of its own, so a benchmark with the same settings never reopens it as a
computed run; its id is drawn from the original run and its per-query rows, so importing the same export again
(or the other format of the same run) adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from ..bench.frames import Run
from ..bench.results import load_run, store_finished
from ..errors import ProbekitError, Registry
from . import eee, hf_eval_results, lm_eval, tables
from .base import ExportFormat, Imported, result_rows

FORMATS: Registry = Registry("export format")
"""Name -> :class:`ExportFormat`, in the order help texts list them."""


def register(fmt: ExportFormat) -> ExportFormat:
    """Add ``fmt`` (its name must be new)."""
    if not isinstance(fmt, ExportFormat):
        raise ProbekitError(f"an export format must be a probekit.exports.base.ExportFormat, got {type(fmt).__name__}")
    if fmt.name in FORMATS:
        raise ProbekitError(f"export format {fmt.name!r} is already registered")
    FORMATS[fmt.name] = fmt
    return fmt


for _fmt in (tables.CSV, tables.PARQUET, eee.FORMAT, lm_eval.FORMAT, hf_eval_results.FORMAT):
    register(_fmt)


def get_format(name: str) -> ExportFormat:
    """The registered format ``name``, or one line with close names and every available one."""
    return FORMATS.get_or_raise(str(name))


def format_for(out: str | Path, fmt: str | None = None) -> ExportFormat:
    """``fmt``, else the one whose suffix ``out`` has (``run.csv`` is csv, ``x.json`` eee); one line otherwise."""
    if fmt:
        return get_format(fmt)
    suffix = Path(out).suffix.lower()
    for f in FORMATS.values():
        if suffix and suffix in f.suffixes:
            return f
    raise ProbekitError(f"give --format: {str(out)!r} does not tell the format by its suffix; "
                        f"available: {', '.join(FORMATS)}")


def export_run(run: str | Run, out: str | Path, *, fmt: str | None = None) -> list[Path]:
    """Write the stored run ``run`` (its id, or a :class:`Run`) to ``out`` in format ``fmt`` (default: from
    ``out``'s suffix); the files written. Arguments are checked before the run is read."""
    if not isinstance(out, (str, Path)) or not str(out).strip():
        raise ProbekitError("give the output path (--out)")
    chosen = format_for(out, fmt)
    target = Path(out).expanduser()
    if chosen.folder and target.suffix.lower() not in chosen.suffixes and target.exists() and not target.is_dir():
        raise ProbekitError(f"cannot write {chosen.name} into {target}: it is a file; give a folder")
    loaded = load_run(run) if isinstance(run, str) else run
    if loaded.meta.get("status") not in (None, "done"):
        raise ProbekitError(f"run {loaded.run_id} is {loaded.meta.get('status')}: only a finished run is exported")
    return chosen.write(loaded, target)


def detect_format(path: Path) -> ExportFormat:
    for f in FORMATS.values():
        if f.importable and f.detect is not None and f.detect(path):
            return f
    raise ProbekitError(f"{path} is not a probekit export that can be imported (importable: "
                        f"{', '.join(n for n, f in FORMATS.items() if f.importable)})")


def imported_id(meta: dict, frame) -> str:
    """The id of an imported run: drawn from the original run's id and its per-query rows, so the same export read
    twice (or its other format) is the same run."""
    rows = result_rows(Run(meta.get("run_id"), meta, frame))
    digest = hashlib.sha256(json.dumps([meta.get("run_id"), rows], sort_keys=True).encode()).hexdigest()
    return f"imported-{digest[:16]}"


def _when(value):
    if value is None or isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def import_run(path: str | Path, *, fmt: str | None = None) -> tuple[str, bool]:
    """Read probekit's ``eee`` or ``lm-eval`` export at ``path`` (the file or its folder) into the store:
    ``(run id, True)`` for a new run, ``(run id, False)`` when it was imported before (nothing is added)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ProbekitError(f"no such file or folder: {path}")
    chosen = get_format(fmt) if fmt else detect_format(path)
    if chosen.read is None:
        raise ProbekitError(f"a {chosen.name} export cannot be imported (it holds no per-query rows); importable: "
                            f"{', '.join(n for n, f in FORMATS.items() if f.importable)}")
    imported: Imported = chosen.read(path)
    meta, frame = imported
    run_id = imported_id(meta, frame)
    label = str(meta.get("label") or meta["run_id"])
    now = datetime.now()
    row = {**meta, "run_id": run_id, "status": "done", "settings_key": f"imported:{run_id}",
           "label": f"imported · {label}", "created_at": _when(meta.get("created_at")) or now,
           "finished_at": _when(meta.get("finished_at")) or now, "heartbeat_at": None, "owner_host": None,
           "owner_pid": None, "owner_start": None, "n_relations": int(frame["relation"].nunique()),
           "message": f"imported from {chosen.name} export {path.name} (original run {meta['run_id']})"}
    return run_id, store_finished(row, frame)


__all__ = ["FORMATS", "ExportFormat", "detect_format", "export_run", "format_for", "get_format", "import_run",
           "imported_id", "register"]
