"""Annotation sessions: creation, the annotator API (rate, skip, undo, resume, progress), refusals that change
nothing, blind mode, raters per item, statistics, exports and the CLI."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest

from probekit import annotations as ann
from probekit import cli
from probekit.errors import ProbekitError
from probekit.store import get_store, schema
from probekit.types import Query, Ranking


def rankings(n_queries=4, k=5, relations=("may_treat", "may_prevent")):
    """Synthetic rankings: answer 'a{q}-1' is gold for even queries (rank 1), none for odd ones."""
    out = []
    for q in range(n_queries):
        query = Query(f"q{q}", f"drug {q}", relations[q % len(relations)], "[X] may treat [Y].",
                      golds=(f"a{q}-1",) if q % 2 == 0 else ("not shown",))
        names = tuple(f"a{q}-{r}" for r in range(1, k + 1))
        out.append(Ranking(query, tuple(range(k)), names, tuple(1.0 - r / 10 for r in range(k)),
                           (1,) if q % 2 == 0 else (40,), n_candidates=100))
    return out


@pytest.fixture
def session():
    return ann.from_rankings(rankings(), name="pilot", organiser="Org", k=5, seed=7)


def snapshot():
    """Every annotation table's rows: a refused call must leave them exactly as they were."""
    ann.list_sessions()  # creates the schema if needed
    store = get_store()
    return {t: store.fetch(f"SELECT * FROM {t} ORDER BY ALL") for t in
            ("annotation_sessions", "annotation_queries", "annotation_items", "annotation_annotators",
             "annotation_assignments", "annotation_events")}


def rate_query(sid, who, qi, score=3):
    for a in ann.query_view(sid, who, qi)["answers"]:
        ann.rate(sid, a["item_id"], who, score)


def test_session_items_and_seeded_display_order(session):
    meta = ann.get_session(session)
    assert (meta["name"], meta["organiser"], meta["k"], meta["n_queries"], meta["blind"]) == \
        ("pilot", "Org", 5, 4, True)
    assert meta["relations"] == ["may_prevent", "may_treat"]
    items = ann.items_frame(session)
    assert len(items) == 20 and items.item_id.is_unique
    assert items[items.is_gold].answer.tolist() == ["a0-1", "a2-1"]
    orders = [tuple(g.sort_values("display_order")["rank"]) for _, g in items.groupby("query_index")]
    assert all(sorted(o) == [1, 2, 3, 4, 5] for o in orders)
    assert any(o != (1, 2, 3, 4, 5) for o in orders)  # shuffled
    again = ann.from_rankings(rankings(), name="same seed", k=5, seed=7)
    assert orders == [tuple(g.sort_values("display_order")["rank"])
                      for _, g in ann.items_frame(again).groupby("query_index")]
    assert get_store().schema_version("annotations") == len(schema.MIGRATIONS["annotations"])


def test_blind_view_hides_gold_and_scores(session):
    who = ann.join(session, "Alice")
    view = ann.query_view(session, who, 0)
    assert view["blind"] and "golds" not in view
    assert all(set(a) == {"item_id", "position", "answer", "status", "score"} for a in view["answers"])
    assert [a["position"] for a in view["answers"]] == list(range(5))
    open_sid = ann.from_rankings(rankings(), name="open", k=5, blind=False)
    ann.join(open_sid, "Alice")
    view = ann.query_view(open_sid, "alice", 0)
    assert view["golds"] == ["a0-1"]
    assert sum(a["gold"] for a in view["answers"]) == 1 and {a["rank"] for a in view["answers"]} == {1, 2, 3, 4, 5}


def test_rate_resume_edit_undo(session):
    who = ann.join(session, " Alice ")
    assert who == "alice" and ann.join(session, "ALICE") == "alice"
    assert ann.next_query(session, who) == 0
    answers = ann.query_view(session, who, 0)["answers"]
    ann.rate(session, answers[0]["item_id"], who, 5, elapsed_ms=1500)
    ann.skip(session, answers[1]["item_id"], who, elapsed_ms=500)
    assert ann.next_query(session, who) == 0  # still unfinished: resume here
    for a in answers[2:]:
        ann.rate(session, a["item_id"], who, 2)
    assert ann.query_view(session, who, 0)["complete"] and ann.next_query(session, who) == 1
    p = ann.progress(session, who)
    counts = (p["done"], p["total"], p["rated"], p["skipped"], p["queries_done"], p["queries_total"])
    assert counts == (5, 20, 4, 1, 1, 4)
    assert p["seconds_per_answer"] is not None
    # edit: rating again replaces the earlier rating; undo of the edit restores it
    ann.rate(session, answers[0]["item_id"], who, 4)
    assert ann.query_view(session, who, 0)["answers"][0]["score"] == 4
    undone = ann.undo(session, who)
    assert undone["item_id"] == answers[0]["item_id"] and undone["query_index"] == 0
    assert ann.query_view(session, who, 0)["answers"][0]["score"] == 5
    # undo walks back: the last rating of query 0 is undone, so the annotator resumes on query 0
    undone = ann.undo(session, who)
    assert undone["item_id"] == answers[4]["item_id"]
    view = ann.query_view(session, who, 0)
    assert view["answers"][4]["status"] is None and not view["complete"]
    assert ann.next_query(session, who) == 0
    ann.undo(session, who), ann.undo(session, who), ann.undo(session, who)  # 4th, 3rd, skip of 2nd
    assert ann.query_view(session, who, 0)["answers"][1]["status"] is None
    assert ann.undo(session, who)["item_id"] == answers[0]["item_id"]
    assert ann.undo(session, who) is None  # nothing left
    assert ann.progress(session, who)["done"] == 0
    kinds = ann.events_frame(session).kind.value_counts().to_dict()
    assert kinds == {"rate": 5, "skip": 1, "undo": 6}  # append-only: nothing was updated or deleted


def test_annotators_never_see_or_touch_each_others_ratings(session):
    alice, bob = ann.join(session, "alice"), ann.join(session, "bob")
    item = ann.query_view(session, alice, 0)["answers"][0]["item_id"]
    alice_event = ann.rate(session, item, alice, 5)
    assert ann.query_view(session, bob, 0)["answers"][0]["status"] is None
    assert ann.my_ratings(session, bob).empty
    ann.rate(session, item, bob, 1)  # bob's own rating of the same answer, alice's stays
    assert ann.query_view(session, alice, 0)["answers"][0]["score"] == 5
    assert ann.my_ratings(session, alice).score.tolist() == [5]
    before = snapshot()
    with pytest.raises(ProbekitError, match="only undo your own"):
        ann.undo(session, bob, event_id=alice_event)
    assert snapshot() == before
    assert ann.undo(session, bob)["item_id"] == item  # bob's undo takes back bob's rating only
    assert ann.query_view(session, alice, 0)["answers"][0]["score"] == 5
    assert ann.ratings_frame(session)[["annotator", "score"]].values.tolist() == [["alice", 5]]


@pytest.mark.parametrize("score", [0, 6, -1, "4", "five", 3.5, True, None, [5]])
def test_bad_scores_refused_and_nothing_written(session, score):
    who = ann.join(session, "alice")
    item = ann.query_view(session, who, 0)["answers"][0]["item_id"]
    before = snapshot()
    with pytest.raises(ProbekitError, match="whole number from 1 to 5"):
        ann.rate(session, item, who, score)
    assert snapshot() == before


def test_other_refusals_change_nothing(session):
    other = ann.from_rankings(rankings(2), name="other", k=5)
    who = ann.join(session, "alice")
    item = ann.query_view(session, who, 0)["answers"][0]["item_id"]
    foreign = ann.items_frame(other).item_id[0]
    before = snapshot()
    cases = [
        (lambda: ann.rate("s-nope", item, who, 3), "no annotation session 's-nope'"),
        (lambda: ann.rate("", item, who, 3), "give a session id"),
        (lambda: ann.rate(session, "s-x:0:0", who, 3), "has no answer"),
        (lambda: ann.rate(session, 12, who, 3), "has no answer"),
        (lambda: ann.rate(session, foreign, who, 3), "belongs to another session"),
        (lambda: ann.rate(session, item, "mallory", 3), "has not joined"),
        (lambda: ann.rate(session, item, "", 3), "enter your name"),
        (lambda: ann.rate(session, item, who, 3, elapsed_ms=-5), "elapsed"),
        (lambda: ann.skip(session, foreign, who), "belongs to another session"),
        (lambda: ann.undo(session, "mallory"), "has not joined"),
        (lambda: ann.undo(session, who, event_id=10**9), "not an effective rating"),
        (lambda: ann.join(session, "<script>"), "plain name"),
        (lambda: ann.join(session, "x" * 61), "plain name"),
        (lambda: ann.query_view(session, who, 99), "no query 99"),
        (lambda: ann.next_query(session, "nobody"), "has not joined"),
    ]
    for call, message in cases:
        with pytest.raises(ProbekitError, match=message):
            call()
    assert snapshot() == before


def test_database_checks_back_the_api(session):
    """Even a direct INSERT cannot store a score outside 1..5 or a rating without a score."""
    cur = get_store().cursor()
    for score, kind in ((6, "rate"), (0, "rate"), (None, "rate"), (3, "skip"), (None, "bogus")):
        with pytest.raises(duckdb.ConstraintException):
            cur.execute("INSERT INTO annotation_events (session_id, item_id, annotator, kind, score, created_at) "
                        "VALUES (?, ?, 'x', ?, ?, now())", [session, f"{session}:0:0", kind, score])
    cur.close()


def test_raters_per_item_assigns_each_query_to_n_annotators():
    sid = ann.from_rankings(rankings(3, k=2), name="two each", k=2, raters_per_item=2)
    a, b, c = (ann.join(sid, n) for n in ("a", "b", "c"))
    assert ann.next_query(sid, a) == 0 and ann.next_query(sid, b) == 0
    assert ann.next_query(sid, c) == 1  # query 0 has its two annotators
    assert ann.progress(sid, c)["total"] == 4  # queries 1 and 2 are still open to c
    before = snapshot()
    with pytest.raises(ProbekitError, match="not assigned to you"):
        ann.rate(sid, f"{sid}:0:0", c, 3)
    assert snapshot() == before
    rate_query(sid, a, 0)
    assert ann.next_query(sid, a) == 1
    assert ann.next_query(sid, b) == 0
    rate_query(sid, b, 0)
    assert ann.next_query(sid, b) == 2  # 1 is taken by c and a
    rate_query(sid, b, 2)
    rate_query(sid, c, 1)
    assert ann.next_query(sid, c) == 2
    rate_query(sid, c, 2)
    assert ann.next_query(sid, c) is None and ann.progress(sid, c)["done"] == ann.progress(sid, c)["total"] == 4
    assignments = get_store().fetch("SELECT query_index, count(*) FROM annotation_assignments WHERE session_id = ? "
                                    "GROUP BY ALL ORDER BY 1", [sid])
    assert assignments == [(0, 2), (1, 2), (2, 2)]


def test_sample_spreads_over_relations_and_is_seeded():
    qs = [Query(f"q{i}", "s", f"r{i % 3}", "[X] [Y]") for i in range(30)]
    picked = ann.sample(qs, n=6, seed=4)
    assert sorted(q.relation for q in picked) == ["r0", "r0", "r1", "r1", "r2", "r2"]
    assert picked == ann.sample(qs, n=6, seed=4) and picked != ann.sample(qs, n=6, seed=5)
    assert len(ann.sample(qs, n=100, seed=0)) == 30
    with pytest.raises(ProbekitError, match="number of queries"):
        ann.sample(qs, n=0)


def test_create_refuses_bad_settings():
    before = snapshot()
    for kw, message in (({"name": ""}, "session name"), ({"k": 0}, "k must be"), ({"raters_per_item": -1}, "raters"),
                        ({"seed": -1}, "seed")):
        with pytest.raises(ProbekitError, match=message):
            ann.from_rankings(rankings(), **{"name": "x", **kw})
    with pytest.raises(ProbekitError, match="empty"):
        ann.from_rankings([], name="x")
    assert snapshot() == before


def test_from_probe_and_from_run(tiny_encoder, tiny_dataset):
    from probekit.bench import runs
    from probekit.probes import get_probe

    sid = ann.from_probe(tiny_encoder, tiny_dataset, name="fresh", relations=["may_treat"], n_queries=3, k=4,
                         seed=1, organiser="Org")
    meta = ann.get_session(sid)
    assert (meta["source"], meta["probe"], meta["dataset"], meta["n_queries"], meta["k"]) == \
        ("probe", "retrieval", "tiny", 3, 4)
    items = ann.items_frame(sid)
    assert set(items.relation) == {"may_treat"} and len(items) == 12
    # the stored answers are the probe's own ranking of the same queries, less the query's own subject
    assert meta["exclude_subject"] is True
    probe = get_probe("retrieval")
    for qid, stored in items.groupby("query_id"):
        q = tiny_dataset.query(qid)
        direct = probe.rank(tiny_encoder, [q], tiny_dataset.candidates(), k=len(tiny_dataset.candidates()))[0]
        want = [(n, s) for n, s in zip(direct.names, direct.scores) if n.lower() != q.subject.lower()][:4]
        stored = stored.sort_values("rank")
        assert stored.answer.tolist() == [n for n, _ in want] and q.subject not in stored.answer.tolist()
        assert stored.model_score.tolist() == pytest.approx([s for _, s in want])
    # switched off, the session keeps the probe's ranking as it is (the subject included where ranked)
    sid_all = ann.from_probe(tiny_encoder, tiny_dataset, name="all", relations=["may_treat"], n_queries=3, k=4,
                             seed=1, exclude_subject=False)
    assert ann.get_session(sid_all)["exclude_subject"] is False
    q = tiny_dataset.query(items.query_id[0])
    direct = probe.rank(tiny_encoder, [q], tiny_dataset.candidates(), k=4)[0]
    first = ann.items_frame(sid_all).query("query_id == @q.id").sort_values("rank")
    assert first.answer.tolist() == list(direct.names)
    with pytest.raises(ProbekitError, match="unknown relation"):
        ann.from_probe(tiny_encoder, tiny_dataset, name="x", relations=["nope"])
    # from a stored run
    rs = get_probe("retrieval").rank(tiny_encoder, tiny_dataset.queries, tiny_dataset.candidates(), k=5)
    run_id = runs.save_run(rs, model=tiny_encoder, dataset=tiny_dataset, probe="retrieval", k=5)
    sid2 = ann.from_run(run_id, name="from run", n_queries=4, k=5, seed=2)
    meta2 = ann.get_session(sid2)
    assert (meta2["source"], meta2["source_run"], meta2["n_queries"]) == ("run", run_id, 4)
    assert meta2["exclude_subject"] is False  # the run recorded its setting: off (the reference behaviour)
    assert sorted(ann.items_frame(sid2).relation.unique()) == ["may_prevent", "may_treat"]
    with pytest.raises(ProbekitError, match="k ≤ 5"):
        ann.from_run(run_id, name="x", k=10)


def test_stats_and_exports(session, tmp_path):
    alice, bob = ann.join(session, "alice"), ann.join(session, "bob")
    for qi in range(4):
        for a in ann.query_view(session, alice, qi)["answers"]:
            ann.rate(session, a["item_id"], alice, 5 if a["answer"].endswith("-1") else 2)
        for a in ann.query_view(session, bob, qi)["answers"]:
            ann.rate(session, a["item_id"], bob, 5 if a["answer"].endswith(("-1", "-2")) else 1)
    result = ann.stats(session)
    t5 = result["table5"].set_index(["answers", "gold"])
    assert t5.loc[("top-5", "all"), "total"] == 20 and t5.loc[("top-1", "all"), "5"] == 4
    assert t5.loc[("top-5", "gold hit"), "5"] == 2
    assert result["shares"]["gold_hits"] == 2 and result["shares"]["expert_hits"] == 4
    acc = result["accuracy"].set_index(["k", "relation"])
    assert acc.loc[(1, "all"), "gold acc"] == 0.5 and acc.loc[(1, "all"), "expert acc (≥5)"] == 1.0
    # beside them, in the same rows, their 95 % Wilson intervals (Wilson 1927): 2 of 4 queries and 4 of 4
    ci = result["accuracy_intervals"].set_index(["k", "relation"])
    assert list(ci.index) == list(acc.index)
    assert ci.loc[(1, "all"), "gold acc [lo, hi]"] == "[15.0, 85.0]"
    assert ci.loc[(1, "all"), "expert acc (≥5) [lo, hi]"] == "[51.0, 100.0]"
    facts = result["missing_facts"]
    assert sorted(facts.answer) == ["a1-1", "a3-1"]  # rated 5 by both, not gold
    assert set(result["table5_by_annotator"]) == {"alice", "bob"}
    assert result["agreement"].relation.tolist() == ["all", "may_prevent", "may_treat"]
    assert result["kappa"].n.tolist() == [20]
    json.dumps(ann.stats_json(result))  # serialisable
    for fmt in ann.EXPORT_FORMATS:
        path = ann.export(session, tmp_path / f"ratings.{fmt}")
        back = {"csv": pd.read_csv, "parquet": pd.read_parquet,
                "jsonl": lambda p: pd.read_json(p, lines=True)}[fmt](path)
        assert len(back) == 40 and set(back.annotator) == {"alice", "bob"} and (back.session_id == session).all()
    assert len(ann.export_frame(session, "items")) == 20 and len(ann.export_frame(session, "events")) == 40
    with pytest.raises(ProbekitError, match="unknown export format"):
        ann.export(session, tmp_path / "x.xlsx")


def test_cli_create_stats_export(capsys, tmp_path, tiny_encoder_dir):
    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = run("annotations", "create", "--name", "cli pilot", "--model", str(tiny_encoder_dir),
                         "--dataset", "demo", "--n", "2", "--k", "3", "--quiet")
    assert code == 0, err
    sid = out.split()[2].rstrip(":")
    assert ann.get_session(sid)["n_queries"] == 2
    who = ann.join(sid, "alice")
    rate_query(sid, who, 0, score=4)
    code, out, _ = run("annotations", "list")
    assert code == 0 and sid in out and "3 ratings" in out
    code, out, _ = run("annotations", "stats", "--session", sid, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["n_ratings"] == 3 and data["table5"][2]["4"] == 1
    code, out, _ = run("annotations", "stats", "--session", sid)
    assert code == 0 and "Expert score × gold hit" in out
    code, out, _ = run("annotations", "export", "--session", sid, "--format", "jsonl", "--out", str(tmp_path / "r"))
    assert code == 0 and len((tmp_path / "r").read_text().splitlines()) == 3
    for argv, message in ((("annotations", "stats", "--session", "s-nope"), "no annotation session"),
                          (("annotations", "export", "--session", sid), "needs --out"),
                          (("annotations", "stats"), "needs --session"),
                          (("annotations", "stats", "--session", sid, "--format", "csv"), "does not apply"),
                          (("annotations", "create"), "needs --name")):
        code, out, err = run(*argv)
        assert code == 2 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1


def test_drop_subject_moves_gold_ranks_up():
    """Fresh-probe sessions leave out the query's own subject: answers named like the subject go, the
    ranks of the gold answers behind them move up, a gold that *is* the subject is no longer a candidate."""
    from probekit.annotations.sessions import drop_subject

    q = Query("q", "Aspirin", "may_treat", "[X] may treat [Y].", golds=("pain", "aspirin", "fever"))
    r = Ranking(q, (0, 1, 2, 3, 4), ("ASPIRIN", "pain", "aspirin ", "headache", "fever"), (5, 4, 3, 2, 1),
                (2, 1, 5), n_candidates=50)
    out = drop_subject(r, 2)
    assert out.names == ("pain", "headache") and out.ids == (1, 3) and out.scores == (4, 2)
    assert out.gold_ranks == (1, None, 3) and out.best_gold_rank == 1 and out.n_candidates == 48
    assert drop_subject(Ranking(Query("q", "", "r", "[Y]"), (0, 1), ("a", "b"), (1, 0), ()), 1).names == ("a",)


def test_data_version_changes_with_ratings_and_annotators(session):
    """Export buttons memoise their bytes per data_version: it must move whenever an export would change."""
    v0 = ann.data_version(session)
    who = ann.join(session, "Ida")
    v1 = ann.data_version(session)
    ann.rate(session, f"{session}:0:0", who, 3)
    v2 = ann.data_version(session)
    ann.undo(session, who)
    v3 = ann.data_version(session)
    assert len({v0, v1, v2, v3}) == 4 and v3 == ann.data_version(session)
