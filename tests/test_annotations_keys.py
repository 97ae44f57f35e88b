"""The keyboard rules of the Annotate page (probekit.annotations.key_action), as a pure function, and press()
carrying them out on a real session; the exactly-once rule for presses re-sent by the browser (take_presses)."""

from __future__ import annotations

import random

from test_annotations import rankings

from probekit import annotations as ann
from probekit.annotations import Action


def view(statuses, complete=None):
    answers = [{"item_id": f"i{p}", "position": p, "answer": f"a{p}", "status": s, "score": None}
               for p, s in enumerate(statuses)]
    return {"answers": answers, "complete": all(s is not None for s in statuses) if complete is None else complete}


def test_digits_and_s_act_on_the_marked_answer():
    """The page's rule: '1–5 rate the marked answer' and 'S skip' it; the marked answer is the first one, in
    display order, not yet rated or skipped."""
    v = view(["rate", None, "skip", None])
    assert ann.key_action("5", v) == Action("rate", "i1", 5)
    assert ann.key_action("1", v) == Action("rate", "i1", 1)
    assert ann.key_action("S", v) == Action("skip", "i1") == ann.key_action("s", v)
    assert ann.key_action("3", view([None, None])) == Action("rate", "i0", 3)
    done = ann.key_action("4", view(["rate", "skip"]))
    assert done.kind == "none" and "Enter moves on" in done.message
    assert ann.key_action("2", None).kind == "none"  # no query left


def test_u_undoes_enter_moves_on_only_when_the_query_is_done():
    """'U undo' always; 'Enter next query' only once every answer of the query is rated or skipped."""
    assert ann.key_action("u", view([None])) == Action("undo") == ann.key_action("U", None)
    refused = ann.key_action("Enter", view(["rate", None]))
    assert refused.kind == "none" and "every answer" in refused.message
    assert ann.key_action("enter", view(["rate", "skip"])) == Action("next")
    assert ann.key_action("Enter", None) == Action("next")


def test_other_keys_are_ignored():
    for key in ("6", "0", "x", "", None, 5, "Escape"):
        assert ann.key_action(key, view([None])) is None


def test_press_follows_the_rules_on_a_session():
    sid = ann.from_rankings(rankings(2, k=2), name="keys", k=2)
    who = ann.join(sid, "Kim")
    qi, msg = ann.press(sid, who, "Enter", query_index=0)
    assert (qi, "every answer" in msg) == (0, True) and ann.progress(sid, who)["done"] == 0
    assert ann.press(sid, who, "5", query_index=0) == (0, None)
    assert ann.press(sid, who, "s", query_index=0) == (0, None)
    qi, msg = ann.press(sid, who, "3", query_index=0)
    assert qi == 0 and "Enter moves on" in msg
    assert ann.press(sid, who, "Enter", query_index=0) == (1, None)
    assert ann.press(sid, who, "u", query_index=1) == (0, None)  # back to the skipped answer's query
    assert [a["status"] for a in ann.query_view(sid, who, 0)["answers"]] == ["rate", None]
    assert ann.press(sid, who, "x", query_index=0) == (0, None)
    ann.press(sid, who, "u", query_index=0)
    assert ann.press(sid, who, "u", query_index=0) == (0, "Nothing to undo.")
    assert ann.events_frame(sid).kind.tolist() == ["rate", "skip", "undo", "undo"]


def test_presses_resent_lost_doubled_and_late_are_each_taken_once_in_order():
    """The listener's contract, simulated: a window numbers its presses and sends its unacknowledged ones with
    each new press and again when the server is quiet; messages are lost, doubled and delivered late (an older
    one after a newer one); the acknowledgement (the server's last handled number) comes back late or not at
    all. Every press is taken exactly once, in the order typed."""
    keys = "12345suE"
    for trial in range(300):
        rng = random.Random(trial)
        handled: dict[str, int] = {}
        taken: list[str] = []
        typed: list[str] = []
        queue: list[list] = []  # the window's unacknowledged presses
        in_flight: list[dict] = []  # messages on their way, delivered in any order
        ack = 0
        for seq in range(1, rng.randint(1, 40) + 1):
            typed.append(rng.choice(keys))
            queue = [e for e in queue if e[0] > ack] + [[seq, typed[-1]]]
            for _ in range(rng.choice([0, 1, 1, 1, 2])):  # lost, sent, or doubled
                in_flight.append({"client": "w", "queue": [list(e) for e in queue]})
            while in_flight and rng.random() < 0.6:  # some arrive, in any order; the ack sometimes comes back
                taken += ann.take_presses(handled, in_flight.pop(rng.randrange(len(in_flight))))
                if rng.random() < 0.5:
                    ack = handled.get("w", 0)
        while in_flight:  # the stragglers arrive
            taken += ann.take_presses(handled, in_flight.pop(rng.randrange(len(in_flight))))
        resend = {"client": "w", "queue": [e for e in queue if e[0] > ack]}  # sent again until acknowledged
        taken += ann.take_presses(handled, resend) + ann.take_presses(handled, resend)
        assert taken == typed, trial
        assert handled == {"w": len(typed)}


def test_presses_from_two_windows_are_counted_apart():
    """Each window numbers its own presses from 1 (a reloaded page is a new window): neither hides the other's."""
    handled: dict[str, int] = {}
    assert ann.take_presses(handled, {"client": "old", "queue": [[1, "5"], [2, "4"]]}) == ["5", "4"]
    assert ann.take_presses(handled, {"client": "new", "queue": [[1, "3"]]}) == ["3"]
    assert ann.take_presses(handled, {"client": "old", "queue": [[2, "4"], [3, "s"]]}) == ["s"]
    assert handled == {"old": 3, "new": 1}


def test_malformed_press_states_are_ignored():
    """The state comes from the browser: anything but ``{"client": id, "queue": [[number, key], …]}`` is ignored,
    entry by entry, and never marks anything handled."""
    handled: dict[str, int] = {}
    for state in (None, [], "x", {"queue": [[1, "5"]]}, {"client": "", "queue": [[1, "5"]]},
                  {"client": "w" * 65, "queue": [[1, "5"]]}, {"client": 3, "queue": [[1, "5"]]},
                  {"client": "w", "queue": "1"}, {"client": "w", "queue": None}):
        assert ann.take_presses(handled, state) == []
    bad = {"client": "w", "queue": [["1", "5"], [True, "5"], [1.0, "5"], [1, 5], [1], 1, None, [2, "4"]]}
    assert ann.take_presses(handled, bad) == ["4"] and handled == {"w": 2}
