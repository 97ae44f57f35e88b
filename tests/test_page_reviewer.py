"""AppTest of the reviewer app: a reviewer link opens the disputed answers of its session alone, their ratings as
rater 1, rater 2… whatever the organiser allowed on their own panel, the gold answers when the session shows them,
and a verdict recorded under the link's name that the organiser's Annotation results then use; nothing else of the
app (no organiser page, no Annotate, no other session). The organiser's panel issues the link."""

from __future__ import annotations

import pytest
from apptest_utils import errors, open_app
from test_annotations import rankings

from probekit import annotations as ann

RATERS = ("Alice", "Bob", "Carol")


def organiser_widgets(at) -> list[str]:
    keys = [w.key for kind in ("button", "selectbox", "text_input", "number_input", "toggle") for w in at.get(kind)]
    return [k for k in keys if k and k.startswith(("rs_", "an_", "pk_model", "pk_dataset", "pb_", "bm_"))]


def texts(at) -> str:
    kinds = ("markdown", "caption", "title", "success", "error", "info", "warning")
    return "\n".join(str(e.value) for kind in kinds for e in at.get(kind)).replace("\\", "")  # Markdown escapes


@pytest.fixture
def session():
    """Not blind, two queries × top-2, rated by three experts: the first query's rank-1 answer 1, 5, 2 (disputed),
    every other answer 3, 3, 3."""
    sid = ann.from_rankings(rankings(2, k=2), name="adjudicated", k=2, blind=False)
    items = ann.items_frame(sid).set_index(["query_index", "rank"]).item_id
    for j, name in enumerate(RATERS):
        who = ann.join(sid, name)
        for item in items:
            ann.rate(sid, item, who, (1, 5, 2)[j] if item == items[(0, 1)] else 3)
    return sid, items[(0, 1)]


def test_a_reviewer_link_opens_the_review_app_alone_and_its_verdict_counts(session):
    sid, hot = session
    token = ann.issue_token(sid, "Dr  Rev", role="reviewer")  # as the organiser's panel hands it out
    # the reviewer opens it in a new browser session (organiser=False), with the organiser's name toggle on there
    at = open_app(None, query_params={"session": sid, "token": token}, organiser=False, state={"rv_names": True})
    assert errors(at) == [] and [t.value for t in at.title] == ["Review"]
    assert organiser_widgets(at) == [] and at.sidebar.selectbox.len == 0 and at.get("download_button") == []
    assert [d.value.item_id.tolist() for d in at.dataframe] == [[hot]]  # the disputed answer only
    page = texts(at)
    assert "reviewing as **Dr Rev**" in page and "rater 1: **1** · rater 2: **2** · rater 3: **5**" in page
    assert "gold: a0-1 (this answer is one)" in page  # the session shows gold answers
    assert not any(name in page for name in RATERS)
    for other in ("results", "annotate", "probe"):  # the review app has no other page to switch to
        with pytest.raises(ValueError, match=rf"navigation page for '[^']*pages/{other}.py'"):
            at.switch_page(f"pages/{other}.py")
    assert at.button(key="rv_record").disabled  # no score chosen yet
    at.segmented_control(key="rv_score").set_value(5)
    at.text_input(key="rv_note").set_value("a known treatment").run()
    at.button(key="rv_record").click().run()
    assert errors(at) == [] and any("Verdict 5 recorded" in s.value for s in at.success)
    assert ann.verdicts(sid)[["item_id", "reviewer", "score", "note"]].values.tolist() == \
        [[hot, "Dr Rev", 5, "a known treatment"]]
    assert "Verdict in effect: 5 by Dr Rev" in texts(at)
    assert at.segmented_control(key="rv_score").value is None and at.button(key="rv_record").disabled  # for the next
    # the organiser's results use it (the page shows this note: tests/test_annotations_pages.py)
    assert ann.stats(sid)["verdict_note"] == "a reviewer's verdict replaces the raters' consensus on 1 answer(s)"
    # a revoked reviewer link shows nothing at the next click (an expert's link opens Annotate alone:
    # tests/test_page_annotate.py)
    ann.revoke_tokens(sid, "dr rev")
    at.run()
    assert [e.value for e in at.error] == [ann.INVALID_LINK] and at.get("dataframe") == [] and at.button.len == 0
