"""Benchmark runs, the stable import path: ``from probekit.bench import runs``.

The code lives in :mod:`probekit.bench.settings` (what decides a run), :mod:`probekit.bench.runner`
(the one runner: ``run_benchmark`` calls ``probe.rank`` for every probe) and
:mod:`probekit.bench.results` (results frames, :class:`Run`, the ``runs`` tables). Pages, the CLI, sweeps
and annotation sessions import them from here.
"""

from __future__ import annotations

from .. import cache
from .. import index as _index
from ..jobs import Cancelled, Job, Progress  # noqa: F401
from .results import (  # noqa: F401
    COMPONENT,
    EXPORT_FORMATS,
    JSON_COLUMNS,
    RESULT_COLUMNS,
    RUN_COLUMNS,
    STATUSES,
    Run,
    delete_run,
    export_frame,
    export_run,
    find_run,
    frame_bytes,
    frame_rankings,
    get_run,
    hard_block,
    list_runs,
    load_run,
    rankings_frame,
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
