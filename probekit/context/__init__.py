"""Context variance (Yao et al., 2023): segment a real context around the target, build variants,
rank the pool at each step with any probe, rank change and UCM; dataset mode on real (or KB) contexts and
stored context runs.

``segment`` (entity matching, segments around O_t, negative target), ``variants`` (real / knowledge-only /
-sorted / -random inputs, prompts with context, token budgets), ``rank`` (the pool ranked at each step
through ``probe.rank``; one triple), ``sources`` (documents providers: corpus scan, corpus index),
``dataset`` (dataset mode, summaries, background job), ``store`` (stored runs).
"""

from __future__ import annotations

from ..jobs import Progress  # noqa: F401, E402
from .dataset import (  # noqa: F401
    CONTEXT_KINDS,
    DATASET_VARIANTS,
    KB_LABEL,
    DatasetContextResult,
    kb_context,
    run_dataset,
    sample_queries,
    summarize,
    summary_frames,
)
from .glossary import TERMS, VARIANT_HELP  # noqa: F401
from .rank import (  # noqa: F401
    ContextResult,
    ContextRun,
    pool_candidates,
    rank_inputs,
    run_context,
    truncation_summary,
    ucm_sentence,
)
from .segment import (  # noqa: F401
    MAX_DOCUMENT_CHARS,
    SIDES,
    Mention,
    Segment,
    Segmentation,
    check_document,
    document_pieces,
    match_entities,
    negative_target,
    role_of,
    segment,
    segment_document,
    unique_names,
)
from .sources import (  # noqa: F401
    ContextSource,
    CorpusScan,
    IndexSource,
    corpus_files,
    resolve_corpora,
    search_sentences,
    short_name,
)
from .store import start_dataset  # noqa: E402, F401 - saves what it computes
from .variants import (  # noqa: F401
    DEFAULT_MAX_LENGTH,
    KNOWLEDGE_VARIANTS,
    SEPARATOR,
    VARIANTS,
    ContextInput,
    build_inputs,
    compose,
    fit_context,
    model_limit,
    probe_overhead,
    random_order,
    token_budget,
)
