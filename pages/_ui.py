"""Shared UI pieces, one import for the pages (``from pages import _ui as ui``): each piece lives in its own module
and none of them imports this one.

``_shell`` (app.py's shell, the page title), ``_guard`` (errors as messages, the progress bar), ``_sidebar`` (model,
device, dataset), ``_uploads`` (parsed uploads), ``_share`` (share links), ``_display`` (data as text, legible
charts), ``_access`` (who sees what), ``_job_panel``, ``_kept`` (results and downloads kept per session),
``_options`` (probe option widgets).
"""

from __future__ import annotations

from pages._access import EXPERT_KEY, ORGANISER_KEY, access, expert, remember_sign_in  # noqa: F401
from pages._display import FONT_PX, chart_text, html_text, legible, md, message, short_label  # noqa: F401
from pages._guard import guard, log, progress, stopped  # noqa: F401
from pages._job_panel import job_panel  # noqa: F401
from pages._kept import download, forget, keep, kept  # noqa: F401
from pages._options import (  # noqa: F401
    NONE_LABELS,
    choice_box,
    none_label,
    option_axes,
    option_state,
    probe_option_widgets,
    vocab_picker,
)
from pages._share import share_link  # noqa: F401
from pages._shell import APP, PAGE_KEY, shell, title  # noqa: F401
from pages._sidebar import (  # noqa: F401
    CPU_KEY,
    CUSTOM,
    CUSTOM_KEY,
    DATASET_KEY,
    MODEL_KEY,
    UPLOAD,
    UPLOAD_FORMAT_KEY,
    UPLOAD_KEY,
    current_dataset,
    current_model,
    dataset_label,
    load_model,
    model_label,
    selected_device,
    selected_model_id,
    sidebar,
)
from pages._uploads import memory_line, upload_cache_bytes  # noqa: F401
