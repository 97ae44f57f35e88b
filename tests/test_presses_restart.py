"""Key presses applied exactly once across a server restart, against a real DuckDB file.

The browser's listener numbers a window's presses 1, 2, 3, … and sends every unacknowledged one again until it
is acknowledged; a server killed after storing a press but before acknowledging it gets that press again from
the same window after it restarts (Streamlit reconnects the page; it is not reloaded). The rule checked: a
press is applied once, whatever the server's memory: the database holds (session, expert, window, number) with
the event the press produced, written in the event's transaction, and a restarted server's desk reads the
window's stored last number on its first press from it and acknowledges that number.

"A restart" here is what the server loses: its desks (a new :class:`Desk`, empty memory) and its database
connection (closed, the file opened again); the file is the only thing kept.
"""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from test_annotations import rankings

from pages._rating_keys import Desk
from probekit import annotations as ann
from probekit import store


def desk_for(sid: str, who: str) -> Desk:
    """A desk with the Annotate page's action (tests/keys_app.py's, the same calls as pages/annotate.py)."""
    desk = Desk()

    def act(key: str, ms: int | None) -> None:
        with desk.lock:
            desk.query[sid], desk.flash = ann.press(sid, who, key, query_index=desk.query.get(sid), elapsed_ms=ms)

    desk.query[sid] = ann.next_query(sid, who)
    desk.act = act
    return desk


def restart(sid: str, who: str) -> Desk:
    """What a killed and restarted server has left: the database file, nothing of its memory."""
    store.close_all()
    return desk_for(sid, who)


def state(client: str, keys: str, first: int = 1) -> dict:
    """The listener's message: the window's presses numbered from ``first``, each with a time in ms."""
    return {"client": client, "queue": [[first + i, k, 100 + i] for i, k in enumerate(keys)]}


def events(sid: str) -> list[tuple]:
    frame = ann.events_frame(sid)
    return list(zip(frame.kind, frame.item_id, [None if pd.isna(s) else int(s) for s in frame.score]))


def stored_presses(sid: str) -> list[tuple]:
    return store.get_store().fetch("SELECT client, seq, key, event_id FROM annotation_presses WHERE session_id = ? "
                                   "ORDER BY client, seq", [sid])


@pytest.fixture
def session():
    sid = ann.from_rankings(rankings(3, k=3), name="restart", k=3)
    return sid, ann.join(sid, "Rae")


def test_presses_stored_but_unacknowledged_are_not_applied_again_after_a_restart(session):
    """Four presses stored (three ratings and Enter), the server killed before acknowledging them: the window sends
    them again to the new server, which applies none and acknowledges 4 (the stored last number); the next press
    applies, on the next query."""
    sid, who = session
    assert desk_for(sid, who).take(state("w1", "543e")) == 4
    before = events(sid)
    desk = restart(sid, who)
    assert desk.take(state("w1", "543e")) == 4  # the acknowledgement after a restart: the stored last number
    assert events(sid) == before and len(before) == 3
    assert desk.take(state("w1", "543e2")) == 5  # press 5 is new
    assert [e[2] for e in events(sid)] == [5, 4, 3, 2] and events(sid)[3][1].endswith(":1:0")
    assert desk.take(state("w1", "543e2")) == 5 and len(events(sid)) == 4  # the memory now answers
    # each press is stored once, a rating's with its event
    rows = stored_presses(sid)
    assert [r[:3] for r in rows] == [("w1", n, k) for n, k in zip(range(1, 6), "543e2")]
    ids = ann.events_frame(sid).event_id.tolist()
    assert [r[3] for r in rows] == ids[:3] + [None] + ids[3:]


def test_an_undo_re_sent_after_a_restart_is_not_applied_twice(session):
    """5, 4, U typed and stored (the 4 undone); after a restart the same three arrive again: no second undo (which
    would take back the 5 too), no second rating."""
    sid, who = session
    desk_for(sid, who).take(state("w", "54u"))
    assert [e[0] for e in events(sid)] == ["rate", "rate", "undo"]
    desk = restart(sid, who)
    assert desk.take(state("w", "54u")) == 3
    assert desk.take(state("w", "u", first=3)) == 3  # a later message holding only the undo
    assert [e[0] for e in events(sid)] == ["rate", "rate", "undo"]
    assert [a["score"] for a in ann.query_view(sid, who, 0)["answers"]] == [5, None, None]


def test_a_press_that_changed_nothing_is_stored_too(session):
    """A key on a finished query changes nothing and Enter only moves on; re-sent after a restart they must not act
    on the query the restarted server shows (the next one): the 4 would rate its first answer."""
    sid, who = session
    desk_for(sid, who).take(state("w", "5554e"))  # three ratings, a 4 on the finished query, Enter
    assert len(events(sid)) == 3
    desk = restart(sid, who)
    assert desk.query[sid] == 1  # the restarted page shows the next query
    assert desk.take(state("w", "4e", first=4)) == 5
    assert len(events(sid)) == 3 and ann.progress(sid, who)["done"] == 3
    assert [(r[1], r[3] is None) for r in stored_presses(sid)] == [(1, False), (2, False), (3, False), (4, True),
                                                                   (5, True)]


def test_two_windows_of_one_expert_are_counted_apart_across_a_restart(session):
    """Each window numbers its own presses from 1: after a restart neither window's stored number hides the
    other's presses, and each is acknowledged its own last number."""
    sid, who = session
    desk = desk_for(sid, who)
    assert desk.take(state("old", "54")) == 2
    assert desk.take(state("new", "3")) == 1
    desk = restart(sid, who)
    assert desk.take(state("new", "32", first=1)) == 2  # press 1 stored, press 2 new
    assert desk.take(state("old", "543", first=1)) == 3  # presses 1-2 stored, press 3 new
    assert [e[2] for e in events(sid)] == [5, 4, 3, 2, 3]
    assert desk.handled == {"old": 3, "new": 2}


def test_two_desks_of_one_window_apply_a_press_once(session):
    """The page reconnected while its old session still lives on the server: the window's presses reach both
    desks. The database's stored number and key decide: each press once."""
    sid, who = session
    first, second = desk_for(sid, who), desk_for(sid, who)
    assert first.take(state("w", "5")) == 1
    assert second.take(state("w", "54")) == 2  # read the stored 1, applied 2
    assert first.take(state("w", "543")) == 3  # its memory says 1: press 2 refused in the transaction, 3 new
    assert [e[2] for e in events(sid)] == [5, 4, 3]


def test_the_database_refuses_a_press_stored_twice(session):
    """The key (session, expert, window, number) is the database's own: a second row for one press is refused."""
    sid, who = session
    desk_for(sid, who).take(state("w", "5"))
    row = store.get_store().fetch("SELECT * FROM annotation_presses")[0]
    with pytest.raises(duckdb.ConstraintException), store.get_store().transaction() as cur:
        cur.execute("INSERT INTO annotation_presses VALUES (?, ?, ?, ?, ?, ?, ?)", list(row))
    assert len(stored_presses(sid)) == 1


def test_presses_outside_a_desk_are_not_stored(session):
    """A click (or any call of press outside a desk's handling) has no window and number: it writes its event
    only."""
    sid, who = session
    assert ann.press(sid, who, "5", query_index=0) == (0, None)
    assert ann.undo(sid, who) is not None
    assert len(events(sid)) == 2 and stored_presses(sid) == []
