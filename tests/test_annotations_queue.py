"""Sessions from where judgement is needed: the selection rules over two stored runs, one run, or a session's
ratings (each against a naive loop over the same rankings), the rule registry, the stored rule, and the CLI."""

from __future__ import annotations

import json

import pytest

from probekit import annotations as ann
from probekit import cli
from probekit.annotations import queue
from probekit.errors import ProbekitError
from probekit.store import get_store
from probekit.types import Ranking


def _ranking(q, order, scores):
    """``q`` ranked as ``order`` (names), its golds' ranks from their positions."""
    pos = {n: i + 1 for i, n in enumerate(order)}
    return Ranking(q, tuple(range(len(order))), tuple(order), tuple(scores), tuple(pos.get(g) for g in q.golds),
                   n_candidates=len(order))


@pytest.fixture
def two_runs(tiny_encoder, tiny_dataset):
    """Run A puts a query's first gold first on even queries and "aspirin" first on odd ones, with a margin of
    0.1 × the query number; run B agrees except on queries 1, 2 and 5 (another top answer)."""
    from probekit.bench import runs

    objects = sorted({g for q in tiny_dataset.queries for g in q.golds})
    a, b = [], []
    for i, q in enumerate(tiny_dataset.queries):
        top = q.golds[0] if i % 2 == 0 else "aspirin"
        rest = [o for o in objects if o != top][:4]
        a.append(_ranking(q, [top, *rest], [1.0 + 0.1 * i, 1.0, 0.9, 0.8, 0.7]))
        b_order = [rest[0], top, *rest[1:]] if i in (1, 2, 5) else [top, *rest]
        b.append(_ranking(q, b_order, [2.0, 1.5, 1.0, 0.5, 0.1]))
    ids = [runs.save_run(r, model=tiny_encoder, dataset=tiny_dataset, probe="retrieval", k=5, label=label)
           for r, label in ((a, "A"), (b, "B"))]
    return ids, a, b


def test_disagreement_rates_both_runs_answers(two_runs):
    (run_a, run_b), a, b = two_runs
    want = [ra.query.id for ra, rb in zip(a, b) if ra.names[0].lower() != rb.names[0].lower()]  # naive
    assert len(want) == 3
    sid = ann.from_selection("disagreement", runs=[run_a, run_b], name="disputes", n_queries=10, k=4, seed=1)
    meta = ann.get_session(sid)
    assert meta["source"] == "selection" and meta["source_run"] == run_a
    assert meta["selection"] == {"rule": "disagreement", "params": {}, "runs": [run_a, run_b], "qualified": 3,
                                 "taken": 3}
    stored = get_store().fetch("SELECT selection FROM annotation_sessions WHERE session_id = ?", [sid])[0][0]
    assert json.loads(stored) == meta["selection"]  # in the database, not only in memory
    items = ann.items_frame(sid)
    assert sorted(items.query_id.unique()) == sorted(want)
    for qid, group in items.groupby("query_id"):
        ra, rb = a[[r.query.id for r in a].index(qid)], b[[r.query.id for r in b].index(qid)]
        merged = []
        for x, y in zip(ra.names, rb.names):  # interleaved, each name once, at most k
            for n in (x, y):
                if n not in merged:
                    merged.append(n)
        assert group.sort_values("rank").answer.tolist() == merged[:4]
        gold = {n for n in merged[:4] if n in ra.query.golds}
        assert set(group[group.is_gold].answer) == gold
    assert "disagreement" in queue.describe(meta["selection"]) and "3 of 3" in queue.describe(meta["selection"])


def test_confident_miss_takes_the_largest_margins_first(two_runs):
    (run_a, _), a, _ = two_runs
    misses = sorted(((r.scores[0] - r.scores[1], r.query.id) for r in a if r.names[0] not in r.query.golds),
                    reverse=True)  # naive: the odd queries, margin 0.1 × i
    picked, table, described = ann.select("confident-miss", runs=[run_a], params={"min_margin": "0.25"})
    assert [r.query.id for r in picked] == [q for m, q in misses if m >= 0.25]
    assert table.margin.tolist() == pytest.approx([m for m, _ in misses if m >= 0.25])
    assert described["params"] == {"min_margin": 0.25} and described["qualified"] == len(picked) == 3
    sid = ann.from_selection("confident-miss", runs=[run_a], name="misses", n_queries=2, k=3)
    taken = ann.items_frame(sid).drop_duplicates("query_index").query_id.tolist()
    assert taken == [q for _, q in misses[:2]]  # the two most confident misses
    assert ann.get_session(sid)["selection"]["taken"] == 2


def test_expert_disagreement_from_a_sessions_ratings():
    from test_annotations import rankings

    old = ann.from_rankings(rankings(), name="first round", k=5, seed=2)
    items = ann.items_frame(old)
    alice, bob = ann.join(old, "alice"), ann.join(old, "bob")
    spread = {0: 4, 1: 1, 2: 3, 3: 0}  # per query, on its rank-1 answer
    for it in items.itertuples():
        ann.rate(old, it.item_id, alice, 5)
        ann.rate(old, it.item_id, bob, 5 - spread[it.query_index] if it.rank == 1 else 5)
    sid = ann.from_selection("expert-disagreement", session=old, name="second round", params={"min_spread": 2})
    new = ann.items_frame(sid)
    assert new.drop_duplicates("query_index").query_id.tolist() == ["q0", "q2"]  # spread 4 first, then 3
    for qid, group in new.groupby("query_id"):
        was = items[items.query_id == qid].sort_values("rank")
        now = group.sort_values("rank")
        assert now.answer.tolist() == was.answer.tolist() and now.is_gold.tolist() == was.is_gold.tolist()
        assert now.best_gold_rank.tolist() == was.best_gold_rank.tolist()
    assert ann.get_session(sid)["selection"]["session"] == old
    with pytest.raises(ProbekitError, match="no query qualifies"):
        ann.from_selection("expert-disagreement", session=old, name="x", params={"min_spread": 5})


@pytest.mark.parametrize("name", sorted(queue.SELECTIONS))
def test_every_selection_rule_keeps_the_contract(name):
    rule = queue.get_rule(name)
    assert rule.name == name and rule.description and rule.sources in ("runs:1", "runs:2", "session")
    assert queue.check_params(rule, {}) == {k: p.default for k, p in rule.params.items()}
    with pytest.raises(ProbekitError, match=f"unknown parameter of selection rule '{name}' 'nope'"):
        queue.check_params(rule, {"nope": 1})
    for key, spec in rule.params.items():
        with pytest.raises(ProbekitError, match=f"{key} must be"):
            queue.check_params(rule, {key: "x"})
        with pytest.raises(ProbekitError, match=f"{key} must be"):
            queue.check_params(rule, {key: spec.minimum - 1})
    with pytest.raises(ProbekitError, match="needs|reads an existing session"):
        ann.select(name)  # no sources


def test_unknown_rule_says_what_exists():
    with pytest.raises(ProbekitError) as e:
        ann.select("confident-mis", runs=["a"])
    assert str(e.value) == ("unknown selection rule 'confident-mis'; did you mean 'confident-miss'; available: "
                            "confident-miss, disagreement, expert-disagreement")


def test_cli_create_from_runs(two_runs, capsys):
    (run_a, run_b), _, _ = two_runs

    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, out, err = run("annotations", "create", "--from-runs", run_a, run_b, "--select", "disagreement",
                         "--preview", "--k", "4")
    assert code == 0, err
    assert "preview: nothing created" in out and f"top of {run_a}" in out and ann.list_sessions().empty
    code, out, err = run("annotations", "create", "--name", "cli queue", "--from-runs", run_a, "--select",
                         "confident-miss", "--param", "min_margin=0.6", "--k", "3")
    assert code == 0, err
    sid = out.split()[2].rstrip(":")
    assert "confident-miss' (min_margin=0.6)" in out and "1 of 1 qualifying" in out
    assert ann.get_session(sid)["selection"]["params"] == {"min_margin": 0.6}
    code, out, _ = run("annotations", "stats", "--session", sid)
    assert code == 0 and "queries chosen by selection rule 'confident-miss'" in out
    code, out, _ = run("annotations", "list")
    assert code == 0 and f"{sid}  cli queue" in out and "chosen by rule 'confident-miss'" in out
    for argv, message in ((("--select", "nope", "--from-runs", run_a), "unknown selection rule 'nope'"),
                          (("--from-runs", run_a, run_b), "need --select RULE"),
                          (("--select", "disagreement", "--from-runs", run_a), "needs 2 stored runs"),
                          (("--select", "confident-miss", "--from-runs", run_a, "--param", "min_margin"),
                           "KEY=VALUE"),
                          (("--select", "confident-miss", "--from-runs", run_a, "--param", "min_margin=-1"),
                           "min_margin must be"),
                          (("--param", "min_margin=1"), "go with --select")):
        code, out, err = run("annotations", "create", "--name", "x", *argv)
        assert code == 2 and err.startswith("error: ") and message in err and len(err.strip().splitlines()) == 1
