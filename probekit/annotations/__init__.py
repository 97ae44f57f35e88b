"""Expert annotation sessions (MedLAMA §5.3): blind 1-5 ratings as append-only DuckDB events,
agreement and expert-adjusted accuracy.

- :mod:`.sessions`: create a session (from rankings, a fresh probe, a stored run), sample, list;
- :mod:`.access`: annotators and their personal links (tokens; an expert's or a reviewer's);
- :mod:`.organiser`: the organiser's credential (token, generated once links exist; the sign-in cookie);
- :mod:`.rating`: the annotator's side (next query, rate / skip / undo, progress); :mod:`.keyboard`: its keys;
- :mod:`.presses`: key presses from a browser, each handled exactly once however often it is re-sent;
- :mod:`.queue`: sessions from where judgement is needed (selection rules over stored runs or a session);
- :mod:`.review`: a reviewer's verdicts on disputed answers (blind ratings, one more row each; by a reviewer link);
- :mod:`.stats`: the organiser's side (frames, statistics, exports).
"""

from __future__ import annotations

from .access import (  # noqa: F401
    INVALID_LINK,
    MAX_NAME,
    REVIEW_PATH,
    ROLES,
    Expert,
    annotator_key,
    annotators,
    expert_link,
    experts,
    issue_token,
    join,
    reviewer_link,
    reviewers,
    revoke_tokens,
    verify_token,
)
from .keyboard import KEY_HELP, Action, key_action, key_name, perform, press  # noqa: F401
from .organiser import (  # noqa: F401
    check_organiser_cookie,
    check_organiser_token,
    organiser_cookie,
    organiser_token_required,
    where_is_the_token,
)
from .presses import take_presses, take_timed_presses  # noqa: F401
from .queue import SELECTIONS, describe, from_selection, get_rule, select  # noqa: F401
from .rating import (  # noqa: F401
    my_ratings,
    next_query,
    progress,
    query_view,
    rate,
    skip,
    undo,
)
from .review import (  # noqa: F401
    disputed,
    record_verdict,
    review_view,
    reviewer_disputed,
    reviewer_of,
    reviewer_verdict,
    reviewer_view,
    verdicts,
)
from .sessions import (  # noqa: F401
    COMPONENT,
    GUIDELINES,
    RUBRIC,
    SUBJECT_NOTE,
    drop_subject,
    from_probe,
    from_rankings,
    from_run,
    get_session,
    list_sessions,
    sample,
)
from .stats import (  # noqa: F401
    EXPORT_FORMATS,
    EXPORT_TABLES,
    data_version,
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
