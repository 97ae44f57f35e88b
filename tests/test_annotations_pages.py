"""AppTest of the Annotation results page's additions: ordinal agreement, rater quality and the reliability-weighted
acc@k tables; the "where judgement is needed" form (preview, create, the rule shown with the session)."""

from __future__ import annotations

from apptest_utils import errors, open_app
from test_annotations_quality import rated  # noqa: F401  (the fixture)

from probekit import annotations as ann


def frame_with(at, column):
    return next(d.value for d in at.dataframe if column in d.value.columns)


def test_results_page_quality_tables_and_the_queue_form(rated):  # noqa: F811
    res = open_app("results", query_params={"session": rated})
    assert errors(res) == []
    assert "ICC(2,1) absolute agreement, one rater" in frame_with(res, "measure").measure.tolist()
    quality = frame_with(res, "reliability")
    assert sorted(quality.annotator) == ["alice", "bob", "carol"]
    assert frame_with(res, "reliability-weighted expert acc (≥5)").relation.tolist()[:1] == ["may_prevent"]
    # a second round over the answers the experts disputed
    res.selectbox(key="rq_rule").set_value("expert-disagreement").run()
    res.selectbox(key="rq_session").set_value(rated).run()
    assert errors(res) == []
    preview = frame_with(res, "largest spread")
    assert len(preview) and (preview["largest spread"] >= 2).all()
    res.button(key="rq_create").click().run()
    assert errors(res) == []
    sid = res.session_state["rs_session"]
    assert sid != rated and ann.get_session(sid)["selection"]["rule"] == "expert-disagreement"
    assert any("queries chosen by selection rule 'expert-disagreement' (min_spread=2)" in c.value.replace("\\", "")
               for c in res.caption)  # Markdown-escaped on the page
