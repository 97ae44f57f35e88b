"""Named fine-tuning recipes for DisKnE (the fields of :class:`~probekit.diskne.finetune.FinetuneSettings`
each sets), kept free of torch so the CLI and the page can list them cheaply.

``diskne-reference`` is the authors' ``evaluate.py`` (israa-alghanmi/DisKnE@11bbdb9) and their
``splits.py`` training filter; ``probekit`` is the earlier reading (see :mod:`probekit.diskne.finetune`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Registry

if TYPE_CHECKING:
    from .data import DisKnESet

OPTIMIZERS = ("adam", "adamw")
SCHEDULES = ("constant", "linear")
STOPPING = ("best", "reference")

RECIPES: Registry = Registry("fine-tuning recipe")
"""Named fine-tuning readings: the fields of :class:`FinetuneSettings` each sets (see the module docstring)."""
RECIPES["diskne-reference"] = {"optimizer": "adam", "weight_decay": 0.0, "schedule": "linear", "clip_norm": 1.0,
                               "clear_grads": False, "stopping": "reference", "patience": 2, "max_length": 256,
                               "train_filter": "repository"}
RECIPES["probekit"] = {"optimizer": "adamw", "weight_decay": 0.01, "schedule": "constant", "clip_norm": 0.0,
                       "clear_grads": True, "stopping": "best", "patience": 1, "max_length": 128,
                       "train_filter": "strict"}


def default_recipe(ds: DisKnESet) -> str:
    """``diskne-reference`` for the licensed (paper's) set, ``probekit`` for a derived smoke set."""
    return "diskne-reference" if ds.settings.get("kind") == "licensed" else "probekit"
