"""The keyboard rules of the Annotate page (probekit.annotations.key_action), as a pure function, and press()
carrying them out on a real session."""

from __future__ import annotations

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
