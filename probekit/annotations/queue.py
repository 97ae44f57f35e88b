"""A rating queue from where judgement is needed: sessions whose queries a *selection rule* picks.

A seeded sample (:func:`.sessions.sample`) spends expert time evenly; these rules spend it where an expert's
verdict changes something:

- ``disagreement``: two stored runs (two probes, two models) give different top answers to the same query. The
  experts rate both runs' answers, interleaved (first of A, first of B, second of A, …; a name both gave is
  shown once); model scores from two runs are not comparable, so the items carry none (NaN).
- ``confident-miss``: one run's top answer is not gold although the model put it far ahead of its second
  answer (top score − second score ≥ ``min_margin``), most confident first: candidate missing facts, or gold
  lists that are wrong.
- ``expert-disagreement``: answers of an existing session whose raters' scores are ``min_spread`` or more apart;
  their queries, with the same answers, go to a new session (for more raters, or other ones).

Rules live in :data:`SELECTIONS` (unknown names get "did you mean"); each declares its sources and parameters.
The rule, its parameters, its sources and how many queries qualified are stored with the session (column
``selection``) and shown to the organiser (:func:`describe`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..errors import ProbekitError, Registry, UnknownNameError
from ..types import Query, Ranking, normalize_name
from .sessions import _check_int, _load, from_rankings, sample


@dataclass(frozen=True)
class Param:
    """One parameter of a selection rule: its default (which also fixes its type) and what it means."""

    default: float | int
    help: str
    minimum: float = 0


@dataclass(frozen=True)
class SelectionRule:
    """A registered rule: ``sources`` is ``"runs:2"``, ``"runs:1"`` or ``"session"``; ``pick(sources, params)``
    returns the qualifying rankings in the order to take them and a preview table (one row per ranking, its
    reason); ``ordered`` False means the first n are a seeded sample spread over relations instead."""

    name: str
    description: str
    sources: str
    pick: Callable[[list, dict], tuple[list[Ranking], pd.DataFrame]]
    params: dict[str, Param] = field(default_factory=dict)
    ordered: bool = True


SELECTIONS: Registry = Registry("selection rule")
"""Name -> :class:`SelectionRule`."""


def get_rule(name: str) -> SelectionRule:
    if not isinstance(name, str):
        raise ProbekitError(f"a selection rule is a name; available: {', '.join(SELECTIONS)}")
    return SELECTIONS.get_or_raise(name)


def check_params(rule: SelectionRule, params: dict | None) -> dict:
    """The rule's parameters with defaults filled in; strings (from a command line) are converted. One line for
    an unknown name, a wrong type or a value below the minimum."""
    out: dict = {}
    for key, value in (params or {}).items():
        if key not in rule.params:
            raise UnknownNameError(f"parameter of selection rule '{rule.name}'", key, sorted(rule.params))
        spec = rule.params[key]
        kind = type(spec.default)
        try:
            number = kind(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or (isinstance(number, float) and not math.isfinite(number)) or number < spec.minimum:
            want = "a whole number" if kind is int else "a number"
            raise ProbekitError(f"{rule.name}: {key} must be {want} ≥ {spec.minimum:g}, got {value!r}")
        out[key] = number
    return {key: out.get(key, spec.default) for key, spec in rule.params.items()}


# ---------------------------------------------------------------- the rules
def _merge(a: Ranking, b: Ranking, k: int) -> Ranking:
    """A's and B's answers interleaved (a name once), at most ``k``; gold by either run's own rule; scores NaN."""
    names: list[str] = []
    ids: list[int] = []
    gold: list[bool] = []
    seen: set[str] = set()
    flags = {"a": a.gold_flags(), "b": b.gold_flags()}
    for depth in range(max(len(a.names), len(b.names))):
        for side, r in (("a", a), ("b", b)):
            if depth < len(r.names) and normalize_name(r.names[depth]) not in seen and len(names) < k:
                seen.add(normalize_name(r.names[depth]))
                names.append(r.names[depth])
                ids.append(int(r.ids[depth]))
                gold.append(bool(flags[side][depth]))
    best = next((i + 1 for i, g in enumerate(gold) if g), None)
    gold_ranks = (best,) + (None,) * max(len(a.query.golds) - 1, 0)
    return Ranking(a.query, tuple(ids), tuple(names), (float("nan"),) * len(names), gold_ranks,
                   n_candidates=max(a.n_candidates, b.n_candidates), gold_hits=tuple(gold))


def _disagreement(sources: list, params: dict) -> tuple[list[Ranking], pd.DataFrame]:
    (ra, a), (rb, b) = sources
    by_id = {r.query.id: r for r in b.rankings()}
    picked, rows = [], []
    for r in a.rankings():
        other = by_id.get(r.query.id)
        if other is None or not r.names or not other.names:
            continue
        if normalize_name(r.names[0]) != normalize_name(other.names[0]):
            picked.append(_merge(r, other, params["k"]))
            rows.append({"query_id": r.query.id, "relation": r.query.relation, "query": r.query.text(),
                         f"top of {ra}": r.names[0], f"top of {rb}": other.names[0]})
    if not any(r.query.id in by_id for r in a.rankings()):
        raise ProbekitError(f"runs {ra} and {rb} share no query: pick two runs over the same dataset")
    return picked, pd.DataFrame(rows)


def _confident_miss(sources: list, params: dict) -> tuple[list[Ranking], pd.DataFrame]:
    (run_id, run), = sources
    found = []
    for r in run.rankings():
        if len(r.names) < 2 or r.gold_flags()[0]:
            continue
        margin = float(r.scores[0]) - float(r.scores[1])
        if margin >= params["min_margin"]:
            found.append((margin, r))
    found.sort(key=lambda x: -x[0])
    rows = [{"query_id": r.query.id, "relation": r.query.relation, "query": r.query.text(), "top answer": r.names[0],
             "margin": m, "golds": "; ".join(r.query.golds)} for m, r in found]
    return [r for _, r in found], pd.DataFrame(rows)


def session_rankings(session_id: str) -> list[Ranking]:
    """A session's queries and answers as rankings again (answers in rank order, gold flags as stored)."""
    entry = _load(session_id)
    out = []
    for q in entry["queries"].itertuples(index=False):
        items = sorted(entry["by_query"][int(q.query_index)], key=lambda it: it["rank"])
        golds = tuple(q.golds)
        best = None if pd.isna(q.best_gold_rank) else int(q.best_gold_rank)
        query = Query(q.query_id, q.subject or "", q.relation, q.template or q.query_text, golds)
        out.append(Ranking(query, tuple(int(it["answer_id"]) for it in items), tuple(it["answer"] for it in items),
                           tuple(float(it["model_score"]) for it in items),
                           (best,) + (None,) * max(len(golds) - 1, 0),
                           n_candidates=0 if pd.isna(q.n_candidates) else int(q.n_candidates),
                           gold_hits=tuple(bool(it["is_gold"]) for it in items)))
    return out


def _expert_disagreement(sources: list, params: dict) -> tuple[list[Ranking], pd.DataFrame]:
    from .stats import ratings_frame

    (sid, _), = sources
    ratings = ratings_frame(sid)
    rankings = session_rankings(sid)
    if ratings.empty:
        return [], pd.DataFrame()
    per_item = ratings.groupby(["query_index", "item_id"])["score"].agg(["min", "max", "count"]).reset_index()
    per_item = per_item[per_item["count"] >= 2]
    per_item["spread"] = per_item["max"] - per_item["min"]
    spread = per_item.groupby("query_index").agg(spread=("spread", "max"),
                                                 disputed=("spread", lambda s: int((s >= params["min_spread"]).sum())))
    spread = spread[spread["spread"] >= params["min_spread"]].sort_values(["spread", "disputed"], ascending=False,
                                                                         kind="stable")
    picked = [rankings[int(qi)] for qi in spread.index]
    rows = [{"query_id": r.query.id, "relation": r.query.relation, "query": r.query.text(), "largest spread": int(s),
             "disputed answers": int(d)} for r, s, d in zip(picked, spread["spread"], spread["disputed"])]
    return picked, pd.DataFrame(rows)


SELECTIONS["disagreement"] = SelectionRule(
    "disagreement", "queries where two stored runs give different top answers; both runs' answers are rated",
    "runs:2", _disagreement, ordered=False)
SELECTIONS["confident-miss"] = SelectionRule(
    "confident-miss", "queries whose top answer is not gold although the model put it well ahead of the second "
    "(candidate missing facts); most confident first", "runs:1", _confident_miss,
    {"min_margin": Param(0.0, "least top score − second score, on the probe's own score scale")})
SELECTIONS["expert-disagreement"] = SelectionRule(
    "expert-disagreement", "queries of an existing session where raters' scores for an answer are far apart",
    "session", _expert_disagreement, {"min_spread": Param(2, "least (highest − lowest score) of an answer", 1)})


# ---------------------------------------------------------------- selecting and creating
def _sources(rule: SelectionRule, runs: Sequence[str], session: str | None) -> list:
    from ..bench import runs as stored

    runs = [r for r in (runs or []) if r]
    if rule.sources == "session":
        if not session or runs:
            raise ProbekitError(f"selection rule '{rule.name}' reads an existing session: give --from-session ID "
                                "(and no runs)")
        return [(_load(session)["meta"]["session_id"], None)]
    want = int(rule.sources.split(":")[1])
    if session or len(runs) != want:
        raise ProbekitError(f"selection rule '{rule.name}' needs {want} stored run{'s' * (want > 1)} "
                            f"(--from-runs {' '.join(['RUN'] * want)}), got {len(runs)}"
                            + (" and a session" if session else ""))
    if want == 2 and runs[0] == runs[1]:
        raise ProbekitError("give two different runs to compare")
    out = []
    for run_id in runs:
        meta = stored.get_run(run_id)
        if meta["status"] != "done":
            raise ProbekitError(f"run {meta['run_id']} is {meta['status']}, not finished: selection rules read "
                                "finished runs only")
        out.append((meta["run_id"], stored.load_run(meta["run_id"])))
    return out


def select(rule: str, *, runs: Sequence[str] = (), session: str | None = None, params: dict | None = None,
           k: int = 10) -> tuple[list[Ranking], pd.DataFrame, dict]:
    """Every query ``rule`` picks from its sources, in the order it would take them: (rankings, a preview table
    with each one's reason, the description stored with a session made from them)."""
    spec = get_rule(rule)
    values = check_params(spec, params)
    k = _check_int(k, "k", low=1, high=100)
    sources = _sources(spec, runs, session)
    picked, table = spec.pick(sources, {**values, "k": k})
    described = {"rule": spec.name, "params": values, "qualified": len(picked),
                 **({"session": sources[0][0]} if spec.sources == "session" else
                    {"runs": [run_id for run_id, _ in sources]})}
    return picked, table, described


def describe(selection: dict | None) -> str:
    """One line for the organiser: the rule, its parameters and sources, how many qualified and were taken."""
    if not selection:
        return "a seeded sample of the queries"
    params = ", ".join(f"{k}={v}" for k, v in selection.get("params", {}).items())
    source = (f"session {selection['session']}" if "session" in selection
              else "runs " + " vs ".join(selection.get("runs", [])))
    return (f"selection rule '{selection['rule']}'" + (f" ({params})" if params else "") + f" over {source}: "
            f"{selection.get('taken', '?')} of {selection.get('qualified', '?')} qualifying queries")


def from_selection(rule: str, *, name: str, runs: Sequence[str] = (), session: str | None = None,
                   params: dict | None = None, n_queries: int = 15, k: int = 10, seed: int = 0,
                   **session_options) -> str:
    """A session over the queries ``rule`` picks (the first ``n_queries`` in its order, or a seeded sample spread
    over relations for an unordered rule); the rule, its parameters and sources are stored with it."""
    n_queries = _check_int(n_queries, "the number of queries", low=1)
    k = _check_int(k, "k", low=1, high=100)
    picked, _, described = select(rule, runs=runs, session=session, params=params, k=k)
    if not picked:
        raise ProbekitError(f"no query qualifies under {describe({**described, 'taken': 0})}: loosen its "
                            "parameters or pick other sources")
    spec = get_rule(rule)
    chosen = picked[:n_queries] if spec.ordered else sample(picked, n=n_queries, seed=seed,
                                                              relation=lambda r: r.query.relation)
    described["taken"] = len(chosen)
    meta: dict = {}
    if spec.sources == "session":
        old = _load(described["session"])["meta"]
        meta = {key: old[key] for key in ("model", "model_revision", "dataset", "dataset_version", "probe", "vocab",
                                          "exclude_subject")}
        meta["probe_options"] = old["probe_options"]
        k = min(k, int(old["k"]))
    else:
        from ..bench import runs as stored

        metas = [stored.get_run(r) for r in described["runs"]]

        def both(key):  # one value, or each run's when they differ ("model-a vs model-b")
            values = [m.get(key) for m in metas]
            return values[0] if len(set(map(str, values))) == 1 else " vs ".join(map(str, values))

        stored_options = metas[0].get("options")
        options: dict = stored_options if isinstance(stored_options, dict) else {}
        meta = {"model": both("model"), "model_revision": both("model_revision"), "dataset": both("dataset"),
                "dataset_version": both("dataset_version"), "probe": both("probe"), "vocab": both("vocab"),
                "probe_options": options if len(metas) == 1 else {}, "source_run": metas[0]["run_id"],
                "exclude_subject": options.get("exclude_subject") if len(metas) == 1 else None}
    return from_rankings(chosen, name=name, k=k, seed=seed, source="selection", selection=described, **meta,
                         **session_options)
