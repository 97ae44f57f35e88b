"""Review and adjudication on a real store: disputed answers, blind ratings, a verdict as one more row (no rating
lost), statistics that use it and say so, refusals that write nothing, the CLI, and a reviewer's link (only its
session's disputed answers, always blind, the verdict under the link's name; the page's review panel:
tests/test_annotations_pages.py; the reviewer app: tests/test_page_reviewer.py)."""

from __future__ import annotations

import json

import pytest
from test_annotations import rankings

from probekit import annotations as ann
from probekit import cli
from probekit.errors import ProbekitError
from probekit.store import get_store

NAMES = ("Alice", "Bob", "Carol")


@pytest.fixture
def panel():
    """Two queries × top-2; every answer rated 3 by all three, except the first query's rank-1 answer (1, 5, 2:
    disputed) and its rank-2 answer (4, 4, 5: not disputed at spread 2)."""
    sid = ann.from_rankings(rankings(2, k=2), name="review", k=2, seed=1)
    items = ann.items_frame(sid).set_index(["query_index", "rank"]).item_id
    special = {items[(0, 1)]: (1, 5, 2), items[(0, 2)]: (4, 4, 5)}
    for j, name in enumerate(NAMES):
        who = ann.join(sid, name)
        for item in items:
            ann.rate(sid, item, who, special.get(item, (3, 3, 3))[j])
    return sid, items[(0, 1)], items[(0, 2)]


def counts():
    store = get_store()
    return {t: store.fetch(f"SELECT count(*) FROM {t}")[0][0] for t in ("annotation_events", "annotation_verdicts")}


def test_disputed_answers_are_shown_blind(panel):
    sid, hot, mild = panel
    table = ann.disputed(sid)
    assert table.item_id.tolist() == [hot] and table.scores[0] == [1, 2, 5] and table.spread[0] == 4
    assert pd_na(table.verdict[0])
    assert set(ann.disputed(sid, min_spread=1).item_id) == {hot, mild}
    view = ann.review_view(sid, hot)
    assert view["ratings"] == [{"rater": "rater 1", "score": 1}, {"rater": "rater 2", "score": 2},
                               {"rater": "rater 3", "score": 5}]
    text = json.dumps(view, default=str).lower()
    assert not any(n.lower() in text for n in NAMES) and "golds" not in view  # no names, blind session
    named = ann.review_view(sid, hot, show_names=True)
    assert [r["rater"] for r in named["ratings"]] == ["Alice", "Carol", "Bob"]  # sorted by score
    with pytest.raises(ProbekitError, match="min_spread"):
        ann.disputed(sid, min_spread=0)


def pd_na(x) -> bool:
    import pandas as pd

    return bool(pd.isna(x))


def test_a_verdict_is_one_more_row_and_the_statistics_use_it(panel, tmp_path):
    sid, hot, _ = panel
    before, stats_before = counts(), ann.stats(sid)
    ratings_before = ann.ratings_frame(sid)
    assert stats_before["verdict_note"].startswith("no reviewer verdicts")
    # consensus (lower median) of 1, 5, 2 is 2; the reviewer settles it at 5
    event = ann.record_verdict(sid, hot, "Dr Reviewer", 5, note="a known treatment")
    after = counts()
    assert after == {"annotation_events": before["annotation_events"],
                     "annotation_verdicts": before["annotation_verdicts"] + 1}
    assert ann.ratings_frame(sid).drop(columns=["rated_at"]).equals(ratings_before.drop(columns=["rated_at"]))
    row = get_store().fetch("SELECT role, reviewer, score, note FROM annotation_verdicts WHERE event_id = ?", [event])
    assert row == [("reviewer", "Dr Reviewer", 5, "a known treatment")]
    result = ann.stats(sid)
    assert result["verdict_note"] == "a reviewer's verdict replaces the raters' consensus on 1 answer(s)"
    t5 = result["table5"].set_index(["answers", "gold"])
    t5_before = stats_before["table5"].set_index(["answers", "gold"])
    assert t5.loc[("top-1", "all"), "5"] == t5_before.loc[("top-1", "all"), "5"] + 1
    assert t5.loc[("top-1", "all"), "2"] == t5_before.loc[("top-1", "all"), "2"] - 1
    assert result["agreement"].equals(stats_before["agreement"])  # agreement reads the ratings only
    assert result["adjusted_accuracy"].loc[0, "reliability-weighted expert acc (≥5)"] == \
        result["accuracy"].loc[0, "expert acc (≥5)"]
    # a second verdict supersedes the first; both rows stay
    ann.record_verdict(sid, hot, "Second Reviewer", 4)
    assert ann.verdicts(sid)[["reviewer", "score"]].values.tolist() == [["Second Reviewer", 4]]
    assert len(ann.export_frame(sid, "verdicts")) == 2
    assert ann.review_view(sid, hot)["verdict"]["score"] == 4 and ann.disputed(sid).verdict[0] == 4


def test_verdict_refusals_write_nothing(panel):
    sid, hot, _ = panel
    other = ann.from_rankings(rankings(1, k=1), name="other", k=1)
    unrated = ann.items_frame(other).item_id[0]
    before = counts()
    for args, message in (((hot, "R", 6), "1 to 5"), ((hot, "  ", 3), "reviewer's name"),
                          (("s-x:0:0", "R", 3), "has no answer"), ((unrated, "R", 3), "another session")):
        with pytest.raises(ProbekitError, match=message):
            ann.record_verdict(sid, *args)
    with pytest.raises(ProbekitError, match="no rating yet"):
        ann.record_verdict(other, unrated, "R", 3)
    assert counts() == before


def test_cli_review(panel, capsys):
    sid, hot, _ = panel

    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, _ = run("annotations", "review", "--session", sid)
    assert code == 0 and hot in out and "rater 1: 1, rater 2: 2, rater 3: 5" in out
    assert not any(n in out for n in NAMES)
    code, out, _ = run("annotations", "review", "--session", sid, "--show-names")
    assert code == 0 and "Alice: 1" in out
    code, out, _ = run("annotations", "review", "--session", sid, "--item", hot, "--score", "5", "--name", "Rev")
    assert code == 0 and "recorded verdict 5" in out
    code, out, _ = run("annotations", "stats", "--session", sid)
    assert code == 0 and "A reviewer's verdict replaces the raters' consensus on 1 answer(s)" in out
    for argv, message in ((("--item", hot, "--score", "5"), "needs --name REVIEWER"),
                          (("--score", "5"), "needs --item"),
                          (("--item", hot, "--score", "9", "--name", "R"), "1 to 5")):
        code, _, err = run("annotations", "review", "--session", sid, *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_reviewer_link_reaches_only_its_sessions_disputed_answers_blind(panel):
    """The rule: a reviewer who is not the organiser acts through a reviewer link: the disputed answers of that
    session only, ratings as rater 1, rater 2… always, the verdict under the link's name; an expert's link cannot
    review and a reviewer's cannot rate."""
    sid, hot, mild = panel
    token = ann.issue_token(sid, "Dr  Rev", role="reviewer")
    table = ann.reviewer_disputed(token)
    assert table.equals(ann.disputed(sid)) and table.item_id.tolist() == [hot]
    view = ann.reviewer_view(token, hot)
    assert [r["rater"] for r in view["ratings"]] == ["rater 1", "rater 2", "rater 3"]
    assert not any(n.lower() in json.dumps(view, default=str).lower() for n in NAMES)
    before = counts()
    event = ann.reviewer_verdict(token, hot, 5, note="settled")
    assert counts()["annotation_verdicts"] == before["annotation_verdicts"] + 1
    assert counts()["annotation_events"] == before["annotation_events"]
    assert get_store().fetch("SELECT reviewer, score, note FROM annotation_verdicts WHERE event_id = ?",
                             [event]) == [("Dr Rev", 5, "settled")]  # the link's name, as typed
    assert ann.stats(sid)["verdict_note"] == "a reviewer's verdict replaces the raters' consensus on 1 answer(s)"
    assert ann.reviewer_view(token, hot)["verdict"]["reviewer"] == "Dr Rev"
    assert ann.reviewers(sid).verdicts.tolist() == [1]


def test_reviewer_link_refusals_write_nothing(panel):
    sid, hot, mild = panel
    reviewer = ann.issue_token(sid, "Rev", role="reviewer")
    expert = ann.issue_token(sid, "Alice")  # an expert's new link (her earlier ratings stay)
    other = ann.from_rankings(rankings(1, k=1), name="other", k=1)
    elsewhere = ann.items_frame(other).item_id[0]
    agreed = ann.items_frame(sid).item_id.iloc[-1]  # 3, 3, 3
    before = counts()
    with pytest.raises(ProbekitError, match="expert's annotation link: it rates answers and cannot record"):
        ann.reviewer_verdict(expert, hot, 5)
    for call in (ann.reviewer_disputed, lambda t: ann.reviewer_view(t, hot)):
        with pytest.raises(ProbekitError, match="cannot record a reviewer's verdict"):
            call(expert)
    with pytest.raises(ProbekitError, match="has not joined session"):  # a reviewer's link cannot rate
        ann.rate(sid, hot, ann.verify_token(reviewer).annotator, 3)
    assert ann.reviewer_view(reviewer, mild)["ratings"][-1] == {"rater": "rater 3", "score": 5}  # 4, 4, 5: apart
    for item, message in ((elsewhere, "another session"), (agreed, "not disputed")):
        with pytest.raises(ProbekitError, match=message):
            ann.reviewer_view(reviewer, item)
        with pytest.raises(ProbekitError, match=message):
            ann.reviewer_verdict(reviewer, item, 4)
    with pytest.raises(ProbekitError, match="1 to 5"):
        ann.reviewer_verdict(reviewer, hot, 0)
    ann.revoke_tokens(sid, "rev")
    with pytest.raises(ProbekitError) as e:
        ann.reviewer_verdict(reviewer, hot, 5)
    assert str(e.value) == ann.INVALID_LINK
    assert counts() == before
