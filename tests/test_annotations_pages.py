"""AppTest of the Annotation results page's additions: ordinal agreement, rater quality and the reliability-weighted
acc@k tables; the review panel (blind ratings, a verdict recorded); a reviewer's link (the reviewer app:
tests/test_page_reviewer.py); the "where judgement is needed" form (preview, create, the rule shown with the
session). One page session for all, as an organiser would go through it."""

from __future__ import annotations

from apptest_utils import errors, open_app
from test_annotations_quality import rated  # noqa: F401  (the fixture)

from probekit import annotations as ann


def frame_with(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_results_page_quality_review_and_queue(rated):  # noqa: F811
    res = open_app("results", query_params={"session": rated})
    assert errors(res) == []
    assert "ICC(2,1) absolute agreement, one rater" in frame_with(res, "measure").measure.tolist()
    quality = frame_with(res, "reliability")
    assert sorted(quality.annotator) == ["alice", "bob", "carol"]
    assert frame_with(res, "reliability-weighted expert acc (≥5)").relation.tolist()[:1] == ["may_prevent"]
    # expert acc@k per query: each share's 95 % interval right after it, the value inside it, the method named
    acc = frame_with(res, "gold acc [lo, hi]")
    values = ["gold acc", "expert acc (≥5)", "gold or expert acc"]
    assert list(acc.columns[-6:]) == [x for c in values for x in (c, f"{c} [lo, hi]")]
    for c in values:
        for value, text in zip(acc[c], acc[f"{c} [lo, hi]"]):
            lo, hi = (float(x) for x in text.strip("[]").split(","))
            assert 0 <= lo and lo - 0.05 <= value <= hi + 0.05 and hi <= 100, (c, value, text)  # the value in %
    assert any("Wilson score (Wilson 1927)" in c.value and "macro: bootstrap over queries within relations"
               in c.value for c in res.caption)
    # the review panel: the disputed answers, their ratings without names until the organiser allows them
    disputed = frame_with(res, "spread")
    assert disputed.item_id.tolist() == ann.disputed(rated).item_id.tolist() and len(disputed)
    names = ("alice", "bob", "carol")
    assert not any(n in m.value for m in res.markdown for n in names)
    # the organiser's clicks batched into few runs (each run recomputes the page's statistics)
    res.toggle(key="rv_names").set_value(True)
    res.segmented_control(key="rv_score").set_value(5)
    res.text_input(key="rv_reviewer").set_value("Dr Reviewer")
    res.text_input(key="rs_expert").set_value("Dr  Rev")  # a reviewer link, created below
    res.segmented_control(key="rs_role").set_value("reviewer")
    res.selectbox(key="rq_rule").set_value("expert-disagreement").run()
    assert errors(res) == [] and any("carol" in m.value for m in res.markdown)
    res.selectbox(key="rq_session").set_value(rated)
    res.button(key="rv_record").click().run()  # enabled once a score is chosen
    assert errors(res) == []
    assert ann.verdicts(rated)[["item_id", "score"]].values.tolist() == [[disputed.item_id[0], 5]]
    assert any("replaces the raters' consensus on 1 answer" in c.value.replace("\\", "") for c in res.caption)
    # a reviewer who is not the organiser: a reviewer link, shown once, and the reviewer listed apart from experts
    res.button(key="rs_link").click().run()
    assert errors(res) == [] and any("Reviewer link for **Dr Rev**" in s.value for s in res.success)
    url = next(c.value for c in res.code)
    assert f"/reviewer?session={rated}&token=" in url
    assert ann.verify_token(url.split("token=")[1], session_id=rated, role="reviewer").name == "Dr Rev"
    assert frame_with(res, "reviewer").reviewer.tolist() == ["Dr Rev"]
    assert "Dr Rev" not in frame_with(res, "joined").expert.tolist()
    # a second round over the answers the experts disputed: the preview, then the session
    preview = frame_with(res, "largest spread")
    assert len(preview) and (preview["largest spread"] >= 2).all()
    res.button(key="rq_create").click().run()
    assert errors(res) == []
    sid = res.session_state["rs_session"]
    assert sid != rated and ann.get_session(sid)["selection"]["rule"] == "expert-disagreement"
    assert any("queries chosen by selection rule 'expert-disagreement' (min_spread=2)" in c.value.replace("\\", "")
               for c in res.caption)  # Markdown-escaped on the page
