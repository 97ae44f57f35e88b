"""CSV and Parquet: a run's per-query results as one table (:func:`probekit.bench.export_table.export_frame`), the
export probekit always had; one row per query with the run's model, revision, dataset, version, probe, options,
counting and probekit version on every row, then one column per registered metric."""

from __future__ import annotations

from pathlib import Path

from ..bench.export_table import export_frame
from ..bench.frames import Run
from ..store.export import write_table
from .base import ExportFormat


def _writer(fmt: str):
    def write(run: Run, out: Path) -> list[Path]:
        return [write_table(export_frame(run), out, fmt=fmt, formats=(fmt,))]

    return write


CSV = ExportFormat("csv", "one row per query: golds, gold ranks, top-k, each metric's score; the run's settings on "
                   "every row", _writer("csv"), suffixes=(".csv",))
PARQUET = ExportFormat("parquet", "the csv table as Parquet (typed columns)", _writer("parquet"),
                       suffixes=(".parquet",))
