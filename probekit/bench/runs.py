"""Benchmark runs, the public import path: ``from probekit.bench import runs``.

One home for each part: :mod:`probekit.bench.frames` is what a run is (:class:`Run`, its results frame and
summary), :mod:`probekit.bench.settings` what decides one, :mod:`probekit.bench.runner` the one runner
(``run_benchmark`` calls ``probe.rank`` for every probe), :mod:`probekit.bench.results` the ``runs`` tables (store,
find, load) and :mod:`probekit.bench.export_table` the per-query export table. Pages, the CLI, sweeps and
annotation sessions import them from here, so those modules can move without breaking their callers.
"""

from __future__ import annotations

from .. import cache
from .. import index as _index
from ..jobs import Cancelled, Job, Progress  # noqa: F401
from .export_table import EXPORT_FORMATS, export_frame, export_run, frame_bytes  # noqa: F401
from .frames import JSON_COLUMNS, RESULT_COLUMNS, Run, frame_rankings, hard_block, rankings_frame  # noqa: F401
from .results import (  # noqa: F401
    COMPONENT,
    RUN_COLUMNS,
    STATUSES,
    delete_run,
    find_run,
    get_run,
    list_runs,
    load_run,
    save_run,
)
from .runner import check_benchmark, run_benchmark, start_benchmark  # noqa: F401
from .settings import (  # noqa: F401
    KEY_EXCLUDED_OPTIONS,
    MAX_K,
    check_run_args,
    dataset_spec,
    is_hard,
    resolve_options,
    settings_key,
    settings_of,
)


def clear_memo() -> None:
    """Forget in-process embeddings and built indexes (the disk cache stays): what a new process sees."""
    cache.clear_memo()
    _index.clear_memo()
