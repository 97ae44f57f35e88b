"""torch imported where it is first used, not when probekit is.

Why: ``import torch`` takes 1.3–1.8 s on two cores. Every command line imports each probe (their options become
flags), and a warm retrieval ``bench`` ranks vectors read from the embedding cache without touching torch, so the
import was a fifth of its time. A module that needs torch names it as usual for the type checker and binds it, at
run time, to a :class:`LazyModule` that imports torch on the first attribute read::

    if TYPE_CHECKING:
        import torch
    else:
        torch = lazy_module("torch")

>>> m = lazy_module("json")
>>> m.dumps([1])
'[1]'
"""

from __future__ import annotations

import functools
import importlib
import types
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class LazyModule(types.ModuleType):
    """Stands for the module ``name`` and imports it on the first attribute read (then reads from it)."""

    def __getattr__(self, attr: str) -> Any:
        module = self.__dict__.get("_module")
        if module is None:
            module = self.__dict__["_module"] = importlib.import_module(self.__name__)
        return getattr(module, attr)


def lazy_module(name: str) -> Any:
    """A stand-in for the module ``name`` (see the module docstring)."""
    return LazyModule(name)


def inference_mode(fn: F) -> F:
    """``@torch.inference_mode()`` that imports torch when ``fn`` is called (the decorator itself would import it
    when the defining module is imported). For plain functions only (not generators)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        import torch

        with torch.inference_mode():
            return fn(*args, **kwargs)
    return wrapper  # type: ignore[return-value]


__all__ = ["LazyModule", "inference_mode", "lazy_module"]
