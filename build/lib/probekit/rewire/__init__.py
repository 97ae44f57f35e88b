"""Contrastive rewiring (Meng et al., 2022, Rewire-then-Probe): span masking, InfoNCE training,
checkpoints and checkpoint sweeps.
"""

from __future__ import annotations

from .core import (  # noqa: F401
    CORPUS_FILES,
    CPU_BATCH_SIZE,
    STALE_AFTER_S,
    SWEEP_COLUMNS,
    RewireSettings,
    StepReport,
    best_checkpoint,
    checkpoints,
    delete_run,
    info_nce,
    list_corpora,
    list_runs,
    load_log,
    make_pairs,
    read_sentences,
    resolve_corpus,
    run_info,
    runs_dir,
    save_corpus,
    span_pair,
    start_sweep,
    start_train,
    sweep,
    sweep_curve,
    train,
)
