"""Expert annotation sessions (MedLAMA §5.3): blind 1-5 ratings as append-only DuckDB events,
agreement and expert-adjusted accuracy.

- :mod:`.sessions`: create a session (from rankings, a fresh probe, a stored run), sample, list;
- :mod:`.access`: annotators and their access;
- :mod:`.rating`: the annotator's side (next query, rate / skip / undo, progress, the keyboard rules);
- :mod:`.stats`: the organiser's side (frames, statistics, exports).
"""

from __future__ import annotations

from .access import MAX_NAME, annotator_key, annotators, join
from .rating import my_ratings, next_query, progress, query_view, rate, skip, undo
from .sessions import (
    COMPONENT,
    GUIDELINES,
    RUBRIC,
    from_probe,
    from_rankings,
    from_run,
    get_session,
    list_sessions,
    sample,
)
from .stats import (
    EXPORT_FORMATS,
    EXPORT_TABLES,
    events_frame,
    export,
    export_frame,
    frame_bytes,
    items_frame,
    overview,
    ratings_frame,
    stats,
    stats_json,
)

__all__ = [
    "COMPONENT", "EXPORT_FORMATS", "EXPORT_TABLES", "GUIDELINES", "MAX_NAME", "RUBRIC", "annotator_key", "annotators",
    "events_frame", "export", "export_frame", "frame_bytes", "from_probe", "from_rankings", "from_run",
    "get_session", "items_frame", "join", "list_sessions", "my_ratings", "next_query", "overview", "progress",
    "query_view", "rate", "ratings_frame", "sample", "skip", "stats", "stats_json", "undo",
]
