"""Starting or joining Ray, and leaving it: the one place that knows how, shared by the grid's Ray backend and
the vocabulary shards encoded on Ray actors.

Ray is optional (``pip install -r requirements-ray.txt`` or ``probekit[ray]``) and heavy, so it is imported inside
these functions: a run that never asks for Ray never pays for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .errors import ProbekitError

ROOT = Path(__file__).resolve().parents[1]


def one_line(e: BaseException) -> str:
    """A worker's failure as one line (a :class:`ProbekitError` says its own message)."""
    if isinstance(e, ProbekitError):
        return str(e)
    if isinstance(e, MemoryError):
        return "out of memory"
    first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"


def runtime_env() -> dict:
    """Environment for workers: probekit importable and the driver's PROBEKIT_/HF_ settings passed on as they are
    (a worker reads them through :mod:`probekit.config` like the driver)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("PROBEKIT_", "HF_", "TRANSFORMERS_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    return {"env_vars": env}


def local_gpus() -> int:
    """GPUs a local Ray may hand out (torch imported here: only a local start needs it)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def ray_address(address: str | None) -> str | None:
    """The cluster to join: ``address``, else Ray's own ``RAY_ADDRESS``, else None (start a local Ray)."""
    return address or os.environ.get("RAY_ADDRESS") or None


def start_ray(*, address: str | None, workers: int):
    """The ``ray`` module, initialised: joined to the cluster at ``address``, else a local Ray with ``workers``
    CPUs. A missing Ray or a failed start is one line."""
    try:
        import ray
    except ImportError:
        raise ProbekitError("the ray backend needs Ray: pip install -r requirements-ray.txt "
                            "(or pip install 'probekit[ray]')") from None
    if not ray.is_initialized():
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False,
                                      runtime_env=runtime_env())
        try:
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=workers, num_gpus=local_gpus(), **kwargs)
        except Exception as e:  # noqa: BLE001 - connection/start failures: one clear line
            where = f"the Ray cluster at {address}" if address else "a local Ray"
            raise ProbekitError(f"could not start or join {where}: {one_line(e)}") from None
    return ray


def stop_ray(actors, *, address: str | None) -> None:
    """Kill ``actors`` and, when this process started a local Ray (no ``address``), shut it down."""
    try:
        import ray
    except ImportError:
        return
    for actor in actors:
        try:
            ray.kill(actor)
        except Exception:  # noqa: BLE001, S110 - already gone
            pass
    if ray.is_initialized() and not address:
        ray.shutdown()
