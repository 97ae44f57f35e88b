"""Contrastive rewiring (Meng et al., 2022, Rewire-then-Probe), one module per step:

- :mod:`.data`: the elicit corpora and the seeded span masking (sentence -> (query ending in [MASK], span));
- :mod:`.train`: settings, the InfoNCE loss, the training loop and its checkpoints;
- :mod:`.runs`: the run folders (read, listed, deleted; a run whose process is gone reads ``interrupted``);
- :mod:`.sweep`: probing every checkpoint of runs on a dataset (MedLAMA Fig. 4).

Every public name is re-exported here (``from probekit import rewire; rewire.train(...)``).
"""

from __future__ import annotations

from .data import (
    CORPUS_FILES,
    SPAN_RULE,
    list_corpora,
    make_pairs,
    read_sentences,
    resolve_corpus,
    save_corpus,
    span_pair,
)
from .runs import (
    LOG_FILE,
    RUN_FILE,
    STALE_AFTER_S,
    checkpoints,
    damage_notes,
    damaged_checkpoints,
    delete_run,
    list_runs,
    load_log,
    run_info,
    runs_dir,
)
from .sweep import (
    HARD_IN_FULL,
    SUBSETS,
    SWEEP_COLUMNS,
    best_checkpoint,
    start_sweep,
    stored_sweeps,
    sweep,
    sweep_curve,
)
from .train import (
    CPU_BATCH_SIZE,
    RewireSettings,
    StepReport,
    info_nce,
    start_train,
    train,
)

__all__ = [
    "CORPUS_FILES", "CPU_BATCH_SIZE", "HARD_IN_FULL", "LOG_FILE", "RUN_FILE", "RewireSettings", "SPAN_RULE",
    "STALE_AFTER_S", "SUBSETS", "SWEEP_COLUMNS", "StepReport", "best_checkpoint", "checkpoints", "damage_notes",
    "damaged_checkpoints", "delete_run",
    "info_nce", "list_corpora", "list_runs", "load_log", "make_pairs", "read_sentences", "resolve_corpus", "run_info",
    "runs_dir", "save_corpus", "span_pair", "start_sweep", "start_train", "stored_sweeps", "sweep", "sweep_curve",
    "train",
]
