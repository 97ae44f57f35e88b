"""Tours in the DuckDB store (component ``tours``: :mod:`probekit.store.schema`). A tour's steps are rewritten
whole in one transaction on every change, so a reader sees the old order or the new one, never a mix, and
positions stay 0..n-1 without gaps."""

from __future__ import annotations

import json
from datetime import datetime

import pandas as pd

from ..errors import ProbekitError, UnknownNameError
from ..store import component_store
from .tour import MAX_STEPS, Step, Tour, check_name


def _store():
    return component_store("tours")


def _now() -> datetime:
    return datetime.now()


def tour_names() -> list[str]:
    return [n for (n,) in _store().fetch("SELECT name FROM tours ORDER BY name")]


def list_tours() -> pd.DataFrame:
    """One row per tour: name, number of steps, last change."""
    return _store().fetch_df(
        "SELECT t.name, count(s.position) AS steps, t.updated_at FROM tours t LEFT JOIN tour_steps s "
        "ON s.tour = t.name GROUP BY t.name, t.updated_at ORDER BY t.name")


def get_tour(name: str) -> Tour:
    name = check_name(name)
    store = _store()
    if not store.fetch("SELECT 1 FROM tours WHERE name = ?", [name]):
        names = tour_names()
        if not names:
            raise ProbekitError(f"no tour {name!r} in this store (none yet: press 'Add to tour' next to a share "
                                "link, or import a tour file)")
        raise UnknownNameError("tour", name, names)
    rows = store.fetch("SELECT page, params, title, note FROM tour_steps WHERE tour = ? ORDER BY position", [name])
    return Tour(name, tuple(Step(page, json.loads(params), title, note) for page, params, title, note in rows))


def save_tour(tour: Tour, *, replace: bool = True) -> Tour:
    """Store ``tour`` (its steps in this order); an existing tour of that name is replaced unless ``replace`` is
    False (then it is refused)."""
    name = check_name(tour.name)
    if len(tour.steps) > MAX_STEPS:
        raise ProbekitError(f"tour {name!r} has {len(tour.steps)} steps; at most {MAX_STEPS}")
    store = _store()
    with store.transaction() as cur:
        exists = cur.execute("SELECT 1 FROM tours WHERE name = ?", [name]).fetchall()
        if exists and not replace:
            raise ProbekitError(f"a tour named {name!r} exists already; pick another name or replace it")
        now = _now()
        if exists:
            cur.execute("UPDATE tours SET updated_at = ? WHERE name = ?", [now, name])
        else:
            cur.execute("INSERT INTO tours (name, created_at, updated_at) VALUES (?, ?, ?)", [name, now, now])
        cur.execute("DELETE FROM tour_steps WHERE tour = ?", [name])
        for i, s in enumerate(tour.steps):
            cur.execute("INSERT INTO tour_steps (tour, position, page, params, title, note) VALUES (?, ?, ?, ?, ?, ?)",
                        [name, i, s.page, json.dumps(s.params, sort_keys=True), s.title, s.note])
    return Tour(name, tuple(tour.steps))


def add_step(name: str, step: Step) -> Tour:
    """Append ``step`` to tour ``name`` (made when it does not exist yet)."""
    name = check_name(name)
    steps = get_tour(name).steps if name in tour_names() else ()
    return save_tour(Tour(name, (*steps, step)))


def _position(tour: Tour, position: int) -> int:
    if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < len(tour.steps):
        raise ProbekitError(f"tour {tour.name!r} has no step {position!r} (steps 0 to {len(tour.steps) - 1})")
    return position


def remove_step(name: str, position: int) -> Tour:
    tour = get_tour(name)
    i = _position(tour, position)
    return save_tour(Tour(tour.name, tour.steps[:i] + tour.steps[i + 1:]))


def move_step(name: str, position: int, offset: int) -> Tour:
    """Move a step ``offset`` places (−1: earlier); at either end it stays where it is."""
    tour = get_tour(name)
    i = _position(tour, position)
    j = min(max(i + offset, 0), len(tour.steps) - 1)
    steps: list[Step] = list(tour.steps)
    steps.insert(j, steps.pop(i))
    return save_tour(Tour(tour.name, tuple(steps)))


def delete_tour(name: str) -> None:
    get_tour(name)  # an unknown name says so
    with _store().transaction() as cur:
        cur.execute("DELETE FROM tour_steps WHERE tour = ?", [name])
        cur.execute("DELETE FROM tours WHERE name = ?", [name])



