"""Expert annotation sessions (MedLAMA §5.3): blind 1-5 ratings as append-only DuckDB events,
agreement and expert-adjusted accuracy.
"""

from __future__ import annotations

from .core import (  # noqa: F401
    COMPONENT,
    EXPORT_FORMATS,
    EXPORT_TABLES,
    GUIDELINES,
    MAX_NAME,
    RUBRIC,
    annotator_key,
    annotators,
    events_frame,
    export,
    export_frame,
    frame_bytes,
    from_probe,
    from_rankings,
    from_run,
    get_session,
    items_frame,
    join,
    list_sessions,
    my_ratings,
    next_query,
    overview,
    progress,
    query_view,
    rate,
    ratings_frame,
    sample,
    skip,
    stats,
    stats_json,
    undo,
)
