"""Rewiring run folders: ``cache/rewired/<run_id>/`` with ``run.json`` (settings, status, timings), ``log.jsonl``
(one line per step) and a checkpoint folder per saved step; reading, listing and deleting them, and telling a run
whose process is gone (``interrupted``) from one still training. :mod:`.train` writes them.

While a run trains, its folder also holds :data:`TRAINER_FILE` (the optimizer and random state at the newest
checkpoint) and a lock its process holds: a killed run keeps both files, the kernel drops the lock, and the same
command run again finds it (:func:`interrupted_runs`), locks it and resumes it from that checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from .. import atomic, config
from ..errors import ProbekitError, UnknownNameError
from ..models import CHECKPOINT_META
from ..store import owner

RUN_FILE, LOG_FILE = "run.json", "log.jsonl"
TRAINER_FILE, LOCK_FILE = "trainer.pt", ".lock"
"""The optimizer and random state at the newest checkpoint (kept while a run trains, removed when it ends: a killed
run keeps it, and a rerun resumes from it); the lock a training process holds on its run folder."""
STALE_AFTER_S = 120
"""A run still marked ``running`` whose files have not changed for this long was interrupted."""

_LIVE: dict[str, bool] = {}
"""Runs training in this process (their ``running`` status is not stale)."""


# ---------------------------------------------------------------- run folders
def runs_dir() -> Path:
    return config.cache_dir() / "rewired"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _write_json(path: Path, obj: dict) -> None:
    atomic.write_json(path, obj, indent=1, default=str)


def _run_folder(run_id: str) -> Path:
    folder = runs_dir() / str(run_id)
    if not run_id or "/" in str(run_id) or not (folder / RUN_FILE).is_file():
        known = [p.name for p in sorted(runs_dir().glob(f"*/{RUN_FILE}"))]
        raise UnknownNameError("rewiring run", str(run_id), [p.split("/")[0] for p in known],
                               empty_hint="train one with `probekit rewire` or on the Rewire page")
    return folder


def run_info(run_id: str) -> dict:
    """``run.json`` of a run, its checkpoints, and ``status`` = ``interrupted`` for a dead ``running`` run."""
    folder = _run_folder(run_id)
    info = json.loads((folder / RUN_FILE).read_text())
    log = folder / LOG_FILE
    touched = max(p.stat().st_mtime for p in (folder / RUN_FILE, log) if p.exists())
    if info.get("status") == "running" and not _LIVE.get(run_id):
        alive = owner.owner_alive(info.get("owner_host"), info.get("owner_pid"), info.get("owner_start"))
        if alive is False or time.time() - touched > STALE_AFTER_S:  # its process is gone, or silent too long
            info["status"] = "interrupted"
    info["checkpoints"] = checkpoints(run_id)
    info["damaged"] = damaged_checkpoints(run_id)
    return info


def checkpoints(run_id: str) -> list[dict]:
    """The run's saved checkpoints (each: step, path, label, loss), by step."""
    out = []
    for meta in (runs_dir() / run_id).glob(f"step-*/{CHECKPOINT_META}"):
        with contextlib.suppress(OSError, ValueError):
            out.append({**json.loads(meta.read_text()), "path": str(meta.parent)})
    return sorted(out, key=lambda d: d["step"])


def damaged_checkpoints(run_id: str) -> list[str]:
    """One line per checkpoint folder of the run that cannot be used (its metadata missing or unreadable, or its
    config or weights gone): these are left out of listings and sweeps, and this says so. Hidden folders are
    checkpoints still being written, not damage."""
    out = []
    for folder in sorted((runs_dir() / run_id).glob("step-*")):
        if not folder.is_dir():
            continue
        meta = folder / CHECKPOINT_META
        try:
            json.loads(meta.read_text())["step"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            why = "no metadata" if isinstance(e, FileNotFoundError) else f"unreadable {CHECKPOINT_META}"
            out.append(f"{folder.name} of run {run_id} is damaged ({why}); left out")
            continue
        if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")) \
                and not any(folder.glob("*.bin")):
            out.append(f"{folder.name} of run {run_id} is damaged (config or weights missing); left out")
    return out


def load_log(run_id: str) -> pd.DataFrame:
    """The loss curve: one row per step (step, loss, seconds)."""
    path = _run_folder(run_id) / LOG_FILE
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    return pd.DataFrame(rows, columns=["step", "loss", "seconds"]) if not rows else pd.DataFrame(rows)


def lock_run(folder: Path):
    """The run folder's lock, held by this process until the returned file is closed (the kernel lets it go when
    the process dies), or None when another process holds it: two reruns never take over one run."""
    import fcntl

    fh = open(folder / LOCK_FILE, "a+b")  # noqa: SIM115 - held for the whole training, closed by the caller
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def interrupted_runs(settings: dict, *, device: str) -> list[dict]:
    """Runs trained with exactly ``settings`` on ``device`` whose process died mid-training leaving a trainer state
    (:data:`TRAINER_FILE`), newest first: what a rerun of the same command resumes."""
    out = []
    for f in runs_dir().glob(f"*/{TRAINER_FILE}"):
        try:
            info = run_info(f.parent.name)
        except (OSError, ValueError, KeyError, TypeError, ProbekitError):
            continue
        if info["status"] == "interrupted" and info.get("settings") == settings and info.get("device") == device:
            out.append(info)
    return sorted(out, key=lambda i: str(i.get("started_at")), reverse=True)


def keep_log_until(folder: Path, step: int) -> float:
    """Drop the log lines after ``step`` (steps a resumed run trains again); returns the seconds logged at it."""
    path = folder / LOG_FILE
    kept, seconds = [], 0.0
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            row = json.loads(line)
            if int(row["step"]) <= step:
                kept.append(line + "\n")
                seconds = float(row.get("seconds") or 0.0)
    atomic.write_text(path, "".join(kept))
    return seconds


def list_runs() -> pd.DataFrame:
    """Every rewiring run under ``cache/rewired``, newest first; a damaged one is listed as such (its ``damaged``
    lines say what), never left out silently."""
    rows: list[dict] = []
    for f in runs_dir().glob(f"*/{RUN_FILE}"):
        try:
            info = run_info(f.parent.name)
            s = info["settings"]
        except (OSError, ValueError, KeyError, TypeError, ProbekitError) as e:  # listed as damaged, never hidden
            rows.append({"run_id": f.parent.name, "label": "", "status": f"damaged ({RUN_FILE}: {type(e).__name__})",
                         "damaged": [f"run {f.parent.name} is damaged ({RUN_FILE} unreadable); left out"]})
            continue
        rows.append({"run_id": info["run_id"], "label": info["label"], "status": info["status"],
                     "model": s["model"], "corpus": s["corpus"], "seed": s["seed"], "layer": info["layer"],
                     "batch_size": info["batch_size"], "steps": f"{info.get('steps_done', 0)}/{s['steps']}",
                     "checkpoints": len(info["checkpoints"]), "last loss": info.get("last_loss"),
                     "steps/s": info.get("steps_per_s"), "device": info.get("device"),
                     "started": info.get("started_at"), "damaged": info["damaged"]})
    cols = ["run_id", "label", "status", "model", "corpus", "seed", "layer", "batch_size", "steps", "checkpoints",
            "last loss", "steps/s", "device", "started", "damaged"]
    frame = pd.DataFrame(rows, columns=cols)
    return frame.sort_values("started", ascending=False, ignore_index=True)


def damage_notes(listed: pd.DataFrame) -> list[str]:
    """The damaged runs and checkpoints of a :func:`list_runs` frame, one line each (for a warning)."""
    return [note for notes in listed["damaged"] for note in (notes or [])]


def delete_run(run_id: str) -> None:
    if _LIVE.get(run_id):
        raise ProbekitError(f"rewiring run {run_id} is still training; stop it first")
    shutil.rmtree(_run_folder(run_id))
