"""One query through every probe (probekit.probes.every): each usable probe once, with exactly its own explain's
result on the same inputs; the others named with their reason; each probe's own vocabulary rule; and the
agreement summary checked against a naive loop over the top-k lists."""

from __future__ import annotations

import pytest

from probekit.datasets import load_dataset
from probekit.errors import ProbekitError
from probekit.probes import PROBES, get_probe
from probekit.probes.every import ProbeRun, agreement, every_probe
from probekit.probes.generated import answer_keys
from probekit.types import CandidateSet, Query, Ranking, parse_free_query


@pytest.fixture(scope="module")
def demo():
    return load_dataset("demo")


@pytest.fixture(scope="module")
def mlm_result(tiny_mlm, demo):
    q = demo.queries[0]
    calls: list[str] = []

    def load(name):
        calls.append(name)
        return demo.candidates(name, q.relation)

    result = every_probe(tiny_mlm, q, load, k=5, common={"exclude_subject": True},
                         options={"retrieval": {"pooling": "mean"}})
    return q, result, calls


def test_every_usable_probe_appears_once_and_the_others_are_named_with_their_reason(tiny_mlm, mlm_result):
    _, result, _ = mlm_result
    usable = [n for n, p in PROBES.items() if p.usable_with(tiny_mlm)]
    assert [r.probe for r in result.runs] == usable
    assert {"retrieval", "mask_average", "mask_predict", "likelihood"} <= set(usable)  # an MLM head: all of these
    assert [s.probe for s in result.skipped] == [n for n in PROBES if n not in usable]
    for s in result.skipped:  # generative: the tiny MLM is no encoder-decoder
        assert s.reason == get_probe(s.probe).unusable_reason(tiny_mlm)
        assert s.reason.startswith(f"probe {s.probe!r} needs")


def test_each_result_is_its_own_explain_on_the_same_inputs(tiny_mlm, demo, mlm_result):
    q, result, _ = mlm_result
    for run in result.runs:
        probe = get_probe(run.probe)
        cands = demo.candidates(run.vocab, q.relation)
        extra = {"pooling": "mean"} if run.probe == "retrieval" else {}
        ranking, explanation = probe.explain(tiny_mlm, q, cands, k=5, exclude_subject=True, **extra)
        assert run.ranking == ranking, run.probe
        assert run.explanation == explanation, run.probe
        assert run.n_candidates == len(cands) and run.seconds > 0
        assert run.gold_rank == ranking.best_gold_rank
    assert result.run("likelihood").explanation is not None  # its per-token log-probabilities travel with it
    assert result.agreement.gold_ranks == {r.probe: r.ranking.best_gold_rank for r in result.runs}


def test_each_probe_ranks_its_own_vocabulary_unless_one_is_named(tiny_mlm, demo, mlm_result):
    q, result, calls = mlm_result
    assert {r.probe: r.vocab for r in result.runs} == {
        n: get_probe(n).vocab(has_relation=True) for n in (r.probe for r in result.runs)}
    assert result.run("likelihood").vocab == "relation" and result.run("retrieval").vocab == "heads+tails"
    assert sorted(calls) == sorted(set(calls))  # each vocabulary loaded once
    typed = parse_free_query("Aspirin might treat [MASK].")
    one = every_probe(tiny_mlm, typed, lambda name: demo.candidates(name), k=3, vocab="tails", has_relation=False)
    assert {r.vocab for r in one.runs} == {"tails"}
    given = demo.candidates("tails")
    same = every_probe(tiny_mlm, typed, given, k=3)
    assert {r.n_candidates for r in same.runs} == {len(given)} and {r.vocab for r in same.runs} == {"given"}


def test_an_encoder_without_an_lm_head_runs_retrieval_alone(tiny_encoder, demo):
    q = demo.queries[0]
    result = every_probe(tiny_encoder, q, demo.candidates("heads+tails"), k=3)
    assert [r.probe for r in result.runs] == ["retrieval"]
    reasons = {s.probe: s.reason for s in result.skipped}
    assert set(reasons) == set(PROBES) - {"retrieval"}
    assert all(reasons[n] == get_probe(n).unusable_reason(tiny_encoder) for n in reasons)
    assert result.agreement.unanimous and result.agreement.only_some == {}


def test_bad_inputs_are_one_clear_line_before_any_probe_runs(tiny_mlm, demo):
    seen: list = []
    report = lambda done, total, stage="": seen.append(stage)
    q = demo.queries[0]
    cases = [
        (q, CandidateSet.from_names([]), {}, "the candidate set is empty"),
        (Query(id="t", subject="A", relation="r", template="A treats it.", golds=()), demo.candidates("tails"), {},
         "has no object slot"),
        (q, demo.candidates("tails"), {"k": 0}, "k must be"),
        (q, demo.candidates("tails"), {"options": {"retrival": {}}}, "did you mean 'retrieval'"),
        (q, demo.candidates("tails"), {"common": {"pooling": "mean"}}, "unknown common option 'pooling'"),
        (q, "tails", {}, "must be a CandidateSet or a vocabulary loader"),
    ]
    for query, cands, kwargs, message in cases:
        with pytest.raises(ProbekitError, match=message) as e:
            every_probe(tiny_mlm, query, cands, progress=report, **kwargs)
        assert "\n" not in str(e.value)
    assert seen == []  # refused before any probe started


def _run(probe: str, names: list[str], golds=("b",)) -> ProbeRun:
    q = Query(id="q", subject="s", relation="r", template="[X] is [Y].", golds=golds)
    ranking = Ranking(query=q, ids=tuple(range(len(names))), names=tuple(names),
                      scores=tuple(float(-i) for i in range(len(names))),
                      gold_ranks=tuple(names.index(g) + 1 if g in names else None for g in golds))
    return ProbeRun(probe=probe, ranking=ranking, explanation=None, vocab="given", n_candidates=len(names), seconds=0.1)


def test_agreement_is_the_naive_comparison_of_the_top_k_lists(tiny_mlm):
    """The rule: two answers are one when their answer keys (the hit rule of MedLAMA §3, in the model's own
    tokenisation) are equal; an answer listed by every probe is agreement, one listed by some is a disagreement;
    #1 answers group the probes that chose them."""
    runs = [_run("p1", ["Heart-Attack", "b", "c"]), _run("p2", ["heart - attack", "c", "d"]),
            _run("p3", ["b", "HEART-attack", "e"])]
    got = agreement(runs, tiny_mlm.tokenizer)
    # the naive loop: every answer of every list, compared by key
    key = lambda name: answer_keys(tiny_mlm.tokenizer, [name])[0]
    listed: dict[str, dict[str, int]] = {}
    first_spelling: dict[str, str] = {}
    for run in runs:
        for rank, name in enumerate(run.ranking.names, 1):
            first_spelling.setdefault(key(name), name)
            listed.setdefault(key(name), {}).setdefault(run.probe, rank)
    naive_partial = {first_spelling[k]: v for k, v in listed.items() if len(v) < len(runs)}
    assert got.only_some == naive_partial
    assert "Heart-Attack" not in got.only_some  # all three list it, spelled three ways
    assert list(got.only_some) == ["b", "c", "d", "e"]  # best rank first, then by how many list it
    naive_top1: dict[str, list[str]] = {}
    for run in runs:
        naive_top1.setdefault(first_spelling[key(run.ranking.names[0])], []).append(run.probe)
    assert got.top1 == {a: tuple(p) for a, p in naive_top1.items()} == {"Heart-Attack": ("p1", "p2"), "b": ("p3",)}
    assert list(got.top1)[0] == "Heart-Attack" and not got.unanimous
    assert got.gold_ranks == {"p1": 2, "p2": None, "p3": 1}
