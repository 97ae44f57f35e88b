"""Dataset mode: context runs over every triple of a dataset, summarised as UCM_k, UCM_m and acc@k.

Two kinds of contexts:

* **real contexts** (the paper's experiment, Yao et al. "Context Segmentation and Retrieval"): for every
  triple (S, R, O_t) - each gold answer of a query is an O_t - a :class:`~.sources.ContextSource` finds
  documents mentioning both S and O_t; each is segmented around O_t against the pool (the tails of R)
  and run as ``real``, ``knowledge-only``, ``knowledge-sorted`` or ``knowledge-random`` (and
  negative-target). **Coverage** says how many triples found a context.
* **KB contexts** (:func:`kb_context`): a fallback, not the paper's experiment: knowledge-only documents
  built from the KB for queries with >= 2 gold answers.

The work runs as ``fn(progress, should_cancel)`` so that pages run it as a background
:class:`~probekit.jobs.Job` (:func:`start_dataset`) and the CLI in the foreground with tqdm progress.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import metrics
from ..datasets import hardness
from ..errors import ProbekitError, UnknownNameError, positive_int
from ..jobs import Cancelled, Progress, no_progress
from ..metrics import accuracy
from ..metrics.intervals import bracket_columns, run_intervals
from ..types import Query, Ranking, normalize_name
from .rank import pool_candidates, rank_inputs
from .segment import Mention, Segmentation, negative_target, segment, segment_document, unique_names
from .sources import ContextSource
from .variants import KNOWLEDGE_VARIANTS, SEPARATOR, build_inputs

DATASET_VARIANTS = ("real", *KNOWLEDGE_VARIANTS)
CONTEXT_KINDS = ("kb", "corpus", "index")
KB_LABEL = "KB contexts: a fallback, not the paper's experiment"
CHUNK_INPUTS = 2048
"""Inputs ranked per probe call: progress and cancel checks come between calls."""


def name_overlap(subject: str, target: str) -> bool:
    """Whether the fact (S, O_t) can be read off the subject's name: MedLAMA's hardness rule (Meng et al.
    2022; :func:`probekit.datasets.hardness.is_hard`) applied to the one gold O_t. Such facts need no
    knowledge ("Stage IB Eyelid Carcinoma" -> "Eyelid"); summaries show every figure without them too."""
    return bool(subject.strip()) and bool(target.strip()) and not hardness.is_hard(subject, [target])


def pool_without_subject(pool: Sequence[str], subject: str) -> list[str]:
    """The entity pool less the subject S in any spelling (case, spacing): S is the fact's subject, never an
    O_cor / O_incor, so it must not cut segments, count as an O_incor step or become the negative target."""
    skey = normalize_name(subject)
    return [n for n in pool if normalize_name(n) != skey]


def kb_context(query: Query, pool: Sequence[str], *, seed: int = 0, n_incor: int | None = None,
               sep: str = SEPARATOR) -> tuple[Segmentation, tuple[str, ...]]:
    """A knowledge-only document for a query with >= 2 golds, built from the KB (the fallback).

    Layout: O_t = the query's first gold; O_cor = its other golds; O_incor = ``n_incor`` (default: as
    many as O_cor) names drawn from ``pool`` that are not golds. O_cor and O_incor are shuffled together
    and O_t is put in the middle (index len // 2), names joined by ``", "``; segments are cut around O_t
    as for any document (S2 left of O_t, S3 right, …). Seeded per (seed, query id).
    """
    golds = tuple(unique_names(query.golds))
    if len(golds) < 2:
        raise ProbekitError(f"query {query.id!r} has fewer than 2 gold answers")
    gkeys = {normalize_name(g) for g in golds}
    rng = random.Random(f"{seed}:{query.id}")
    others = [n for n in pool_without_subject(unique_names(pool), query.subject) if normalize_name(n) not in gkeys]
    want = len(golds) - 1 if n_incor is None else n_incor
    incor = rng.sample(others, min(want, len(others)))
    items = list(golds[1:]) + incor
    rng.shuffle(items)
    items.insert(len(items) // 2, golds[0])
    mentions, pos = [], 0
    for i, name in enumerate(items):
        if i:
            pos += len(sep)
        mentions.append(Mention(pos, pos + len(name), name, name))
        pos += len(name)
    document = sep.join(items)
    return segment(document, mentions, len(items) // 2), golds


@dataclass
class DatasetContextResult:
    """Dataset mode: RC rows of every context sequence (target and, optionally, negative-target), the
    summary (UCM, acc@k; recomputable from the rows) and the coverage (triples that found a context)."""

    rows: list[dict]
    summary: dict
    settings: dict
    seconds: float
    coverage: dict = field(default_factory=dict)

    def to_dict(self, *, with_rows: bool = False) -> dict:
        out = {"settings": self.settings, "seconds": round(self.seconds, 2), "coverage": self.coverage,
               **self.summary}
        if with_rows:
            out["rows"] = self.rows
        return out


def _rankings(rows: Sequence[dict]) -> tuple[list[Ranking], list[Ranking]]:
    """Adapter to :mod:`probekit.metrics.accuracy`: one Ranking per context sequence for input_0 (the
    prompt alone) and one for its last input (the whole context), holding the best gold rank."""
    first: dict[tuple, dict] = {}
    last: dict[tuple, dict] = {}
    for r in rows:
        key = (r["query_id"], r.get("target"), r.get("context") or 0, r.get("permutation") or 0)
        if r["step"] == 0:
            first[key] = r
        if key not in last or r["step"] > last[key]["step"]:
            last[key] = r

    def ranking(r: dict) -> Ranking:
        q = Query(r["query_id"], r.get("subject") or "", r["relation"], "[X] [Y]", golds=(r.get("target") or "",))
        return Ranking(q, (), (), (), (r["best_gold_rank"],))

    return [ranking(r) for r in first.values()], [ranking(r) for r in last.values()]


def _acc(rows: list[dict], names: Sequence[str] | None) -> dict:
    """Every registered metric (acc@k, MRR) or ``names`` without context (step 0) and with the full context (last
    step), macro and micro, per context sequence, through :func:`probekit.metrics.accuracy.summary`, with their
    95 % intervals (:func:`probekit.metrics.intervals.run_intervals`: a few dozen triples move acc@k a lot).

    With KB contexts the target and negative-target runs of a triple share both of these inputs (the
    prompt alone; the whole knowledge-only context in document order), so their acc@k agree by
    construction: the modes differ only in the order segments arrive, which is what UCM measures.
    """
    none, full = _rankings(rows)
    out = {}
    for label, rs in (("none", none), ("full", full)):
        s = accuracy.summary(rs, metrics=names)
        # the bootstrap resamples in the order it is given: in one order (the rows' content), the run reloaded
        # from the store, its rows read back in another order, gets the same interval
        ordered = sorted(rs, key=lambda r: (r.query.relation, r.query.id, r.query.golds, str(r.gold_ranks)))
        out[label] = {"relations": s["relations"], "macro": s["macro"], "micro": s["micro"],
                      "intervals": run_intervals(ordered, metrics=names)}
    return out


def _figures(rs: list[dict], names: Sequence[str] | None, target_mentions: bool) -> dict:
    return {"n_triples": len({(r["query_id"], r.get("target")) for r in rs}),
            "n_contexts": len({(r["query_id"], r.get("target"), r.get("context") or 0) for r in rs}),
            "ucm_k": metrics.ucm_k(rs, target_mentions=target_mentions),
            "ucm_m": metrics.ucm_m(rs, target_mentions=target_mentions),
            "ucm_m_macro": metrics.ucm_m(rs, average="macro", target_mentions=target_mentions),
            "acc": _acc(rs, names) if rs else {}}


def summarize(rows: list[dict], *, metrics: Sequence[str] | None = None, target_mentions: bool = True) -> dict:
    """UCM_k per relation, UCM_m (micro and macro) and acc@k without / with context, per mode; and the same
    without the facts whose object is in the subject's name (:func:`name_overlap`), under
    ``without_name_overlap``, with their count in ``name_overlap_triples``. ``target_mentions``: whether a
    repeated mention of O_t counts as an O_cor step (the paper's reading, the default)."""
    out = {}
    for mode in ("target", "negative"):
        rs = [r for r in rows if r["mode"] == mode]
        if not rs:
            continue
        flagged = {(r["query_id"], r.get("target")) for r in rs
                   if name_overlap(r.get("subject") or "", r.get("target") or "")}
        kept = [r for r in rs if (r["query_id"], r.get("target")) not in flagged]
        out[mode] = {**_figures(rs, metrics, target_mentions), "name_overlap_triples": len(flagged),
                     "without_name_overlap": _figures(kept, metrics, target_mentions)}
    return out


def sample_queries(dataset, *, relations: Sequence[str] | None = None, limit: int | None = None,
                   seed: int = 0, min_golds: int = 2) -> list[Query]:
    """Queries with >= ``min_golds`` distinct golds; ``limit`` keeps a seeded sample of that many per relation."""
    rels = relations or dataset.relations
    unknown = [r for r in rels if r not in dataset.relations]
    if unknown:
        raise UnknownNameError("relation", unknown[0], dataset.relations)
    out = []
    for rel in rels:
        qs = [q for q in dataset.queries_for(rel) if len(unique_names(q.golds)) >= min_golds]
        if limit is not None and len(qs) > limit:
            keep = set(random.Random(f"{seed}:{rel}").sample(range(len(qs)), limit))
            qs = [q for i, q in enumerate(qs) if i in keep]
        out += qs
    return out


@dataclass
class _Plan:
    """One context sequence to rank: a triple's context (``context``-th) in one mode and permutation."""

    query: Query
    mode: str
    context: int
    permutation: int
    seg: Segmentation
    golds: tuple[str, ...]
    inputs: list


def _plans(q: Query, pool, *, source: ContextSource | None, variant: str, modes, permutations: int, seed: int,
           n_incor: int | None, cov: dict, exclude_name_overlap: bool = False) -> list[_Plan]:
    """Every context sequence of one query; counts triples, contexts and skips into ``cov``."""
    out: list[_Plan] = []
    golds = tuple(unique_names(q.golds))
    if exclude_name_overlap and source is None and name_overlap(q.subject, golds[0]):
        cov["name_overlap_excluded"] += 1
        return out
    if source is None:
        segs = [(kb_context(q, pool.names, seed=seed, n_incor=n_incor)[0], 0)]
        cov["triples"] += 1
        cov["with_context"] += 1
        cov["contexts"] += 1
    else:
        segs = []
        for target in golds:
            if exclude_name_overlap and name_overlap(q.subject, target):
                cov["name_overlap_excluded"] += 1
                continue
            cov["triples"] += 1
            found = source.contexts(q.subject, target)
            used = 0
            for doc in found:
                try:
                    segs.append((segment_document(doc, target, [*pool_without_subject(pool.names, q.subject),
                                                                *golds]), used))
                    used += 1
                except ProbekitError:  # O_t only inside a longer pool name, or an over-long document
                    cov["unusable"] += 1
            cov["with_context"] += used > 0
            cov["contexts"] += used
            rel = cov["by_relation"].setdefault(q.relation, {"triples": 0, "with_context": 0})
            rel["triples"] += 1
            rel["with_context"] += used > 0
    n_perm = permutations if variant == "knowledge-random" else 1
    for seg, ci in segs:
        for mode in modes:
            try:
                s = negative_target(seg, golds) if mode == "negative" else seg
            except ProbekitError:
                cov["no_incor"] += 1  # no O_incor in this context: no negative-target run for it
                continue
            for p in range(n_perm):
                out.append(_Plan(q, mode, ci, p, s, golds, build_inputs(s, variant=variant, seed=seed, permutation=p)))
    return out


def _tracked(plan: _Plan) -> list[str]:
    """The entities whose ranks a sequence needs: O_t, the golds and every segment's entity."""
    return unique_names([plan.seg.target, *plan.golds, *(x.entity for x in plan.seg.segments)])


def _rows(plan: _Plan, results: list[dict]) -> list[dict]:
    s, golds = plan.seg, plan.golds
    correct = [g for g in golds if normalize_name(g) != normalize_name(s.target)]
    steps = metrics.rank_changes([r["ranks"] for r in results], [None] + [x.added.entity for x in plan.inputs[1:]],
                                 target=s.target, correct=correct)
    out = []
    for row, r in zip(steps, results):
        ranks = [r["ranks"].get(g) for g in golds]
        out.append({"mode": plan.mode, "query_id": plan.query.id, "relation": plan.query.relation,
                    "subject": plan.query.subject, "target": s.target, "context": plan.context,
                    "permutation": plan.permutation, **row,
                    "best_gold_rank": min((x for x in ranks if x is not None), default=None), "notice": r["notice"]})
    return out


def run_dataset(model, dataset, *, contexts: str | ContextSource = "kb", probe: str = "retrieval",
                relations: Sequence[str] | None = None, limit: int | None = None, seed: int = 0,
                n_incor: int | None = None, negative: bool = True, variant: str | None = None,
                permutations: int = 3, k: int = 10, target_mentions: bool = True, exclude_name_overlap: bool = False,
                progress: Progress | None = None, should_cancel: Callable[[], bool] | None = None,
                **probe_options) -> DatasetContextResult:
    """Dataset mode over ``dataset``: ``contexts`` is ``"kb"`` (KB knowledge-only contexts for queries with
    >= 2 golds: a fallback) or a :class:`~.sources.ContextSource` of real documents (every gold of every
    query is an O_t). Each context is ranked against the tails of the query's relation with ``probe``;
    target (and negative-target) RC rows, UCM, acc@k and coverage. ``variant`` defaults to
    ``knowledge-only`` for KB contexts and ``real`` for documents; ``knowledge-random`` runs
    ``permutations`` seeded orders. The subject S is never a pool entity of its own contexts
    (:func:`pool_without_subject`). ``target_mentions``: a repeated mention of O_t counts as an O_cor step
    (the paper's reading; False leaves it out). ``exclude_name_overlap`` skips the facts whose object is in
    the subject's name (:func:`name_overlap`; counted in the coverage); without it the summary shows every
    figure with and without them. ``should_cancel()`` is checked between probe calls (raises
    :class:`~probekit.jobs.Cancelled`)."""
    from ..probes import get_probe

    source = None if isinstance(contexts, str) else contexts  # None: KB contexts
    kb = source is None
    if kb and contexts != "kb":
        raise ProbekitError(f"contexts must be 'kb' or a documents source, got {contexts!r}")
    if not kb and not isinstance(contexts, ContextSource):
        raise ProbekitError("contexts must be 'kb' or a documents source with contexts(subject, target)")
    variant = variant or ("knowledge-only" if kb else "real")
    allowed = KNOWLEDGE_VARIANTS if kb else DATASET_VARIANTS
    if variant not in allowed:
        raise ProbekitError(f"{'KB contexts are knowledge-only; ' if kb else ''}variant must be one of "
                            f"{', '.join(allowed)}")
    if limit is not None:
        positive_int("limit", limit)
    positive_int("permutations", permutations)
    started = time.perf_counter()
    p = get_probe(probe)
    queries = sample_queries(dataset, relations=relations, limit=limit, seed=seed, min_golds=2 if kb else 1)
    if not queries:
        raise ProbekitError("no query with at least 2 gold answers in this selection" if kb else
                            "no query with a gold answer in this selection")
    by_rel: dict[str, list[Query]] = {}
    for q in queries:
        by_rel.setdefault(q.relation, []).append(q)
    modes = ("target", "negative") if negative else ("target",)
    cov: dict[str, Any] = {"triples": 0, "with_context": 0, "contexts": 0, "unusable": 0, "no_incor": 0,
                           "name_overlap_excluded": 0, "by_relation": {}}
    report = progress or no_progress
    cancelled = should_cancel or (lambda: False)
    rows: list[dict] = []
    done = 0
    for r_i, (rel, qs) in enumerate(by_rel.items(), start=1):
        head = f"relation {r_i}/{len(by_rel)} {rel}"
        pool = pool_candidates(dataset.candidates("relation", rel).names)
        report(done, len(queries), f"{head} · finding contexts")
        plans = [pl for q in qs for pl in _plans(q, pool, source=source, variant=variant,
                                                 modes=modes, permutations=permutations, seed=seed,
                                                 n_incor=n_incor, cov=cov,
                                                 exclude_name_overlap=exclude_name_overlap)]
        # rank in chunks of whole plans, so progress moves and a cancel is seen between probe calls
        chunks, cur, size = [], [], 0
        for pl in plans:
            cur.append(pl)
            size += len(pl.inputs)
            if size >= CHUNK_INPUTS:
                chunks.append(cur)
                cur, size = [], 0
        if cur:
            chunks.append(cur)
        for c_i, chunk in enumerate(chunks, start=1):
            if cancelled():
                raise Cancelled("the context run was cancelled; nothing was stored")
            jobs = [(pl.query, inp.context, _tracked(pl)) for pl in chunk for inp in pl.inputs]
            results = rank_inputs(model, p, jobs, pool, k=k, **probe_options)
            pos = 0
            for pl in chunk:
                rows += _rows(pl, results[pos:pos + len(pl.inputs)])
                pos += len(pl.inputs)
            report(done + int(len(qs) * c_i / len(chunks)), len(queries), f"{head} · ranking {c_i}/{len(chunks)}")
        done += len(qs)
        report(done, len(queries), head)
    for rel in cov["by_relation"].values():
        rel["share"] = rel["with_context"] / rel["triples"] if rel["triples"] else float("nan")
    cov["share"] = cov["with_context"] / cov["triples"] if cov["triples"] else float("nan")
    seconds = time.perf_counter() - started
    settings = {"model": model.id, "probe": p.name, "dataset": dataset.name, "dataset_version": dataset.version,
                "relations": list(by_rel), "limit": limit, "seed": seed, "n_incor": n_incor, "variant": variant,
                "permutations": permutations if variant == "knowledge-random" else 1, "negative": negative,
                "n_queries": len(queries), "contexts": "kb" if source is None else source.describe(), "coverage": cov,
                "target_mentions": target_mentions, "exclude_name_overlap": exclude_name_overlap,
                "options": {k_: v for k_, v in probe_options.items() if v is not None}}
    return DatasetContextResult(rows=rows, summary=summarize(rows, target_mentions=target_mentions),
                                settings=settings, seconds=seconds, coverage=cov)


def summary_frames(summary: dict):
    """(UCM table: mode, relation, U, C, M, n with ``UCM_m`` rows; acc table: mode, context, acc@k (macro) and
    ``acc@k [lo, hi]`` (its interval, text in %))."""
    import pandas as pd

    ucm_rows, acc_rows = [], []
    for mode, summ in summary.items():
        for rel, u in [*summ["ucm_k"].items(), ("UCM_m", summ["ucm_m"])]:
            ucm_rows.append({"mode": mode, "relation": rel, **u})
        for label, acc in summ["acc"].items():
            got = bracket_columns(acc.get("intervals"), list(acc["macro"]))  # a summary stored before: "–"
            acc_rows.append({"mode": mode, "context": label,
                             **{c: v for n, x in acc["macro"].items() for c, v in ((n, x), (f"{n} [lo, hi]",
                                                                                         got[f"{n} [lo, hi]"]))}})
    return pd.DataFrame(ucm_rows), pd.DataFrame(acc_rows)
