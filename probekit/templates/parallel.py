"""Parallel sets: the same fact (S, R, O) as a template prompt and as a natural sentence (Shaier et al. RQ2).

"Since both Google-RE and T-REx are composed of parallel template-free and template-based datasets in
which each template has a corresponding template-free text, we can directly compare models' scores
across them" — there "the number of entities stays the same and the only different variable is the
probing method". :func:`pair_datasets` builds such a pair from any template-based dataset (MedLAMA, the
demo set, a triples file) and any template-free dataset whose rows name their subject and relation (the
corpus layer's LIPID output, or sentences found any other way): a fact is paired when the sentence's
subject and relation name a template query and its masked object is one of that query's gold answers.

Both sides get the same query ids, the same single gold object and the same candidate vocabulary, so
their runs differ only in the prompt; :func:`parallel_drop` then gives acc@k on each side per relation.
The pairs table (``Parallel.pairs``: prompt with ``[MASK]``, object, subject, relation, source, template)
is itself a valid template-free file for :mod:`probekit.datasets.freetext`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ..datasets.base import Dataset
from ..datasets.freetext import KIND
from ..errors import ProbekitError, positive_int
from ..metrics.registry import get_metric, metric_names
from ..types import MASK, OBJECT, Query, normalize_name

VOCABS = ("pairs", "template")


@dataclass
class Parallel:
    """A template-based and a template-free dataset over the same facts, and the table of pairs."""

    template: Dataset
    free: Dataset
    pairs: pd.DataFrame
    stats: dict


def pair_datasets(template: Dataset, free: Dataset, *, per_fact: int = 1, vocab: str = "pairs",
                  name: str | None = None) -> Parallel:
    """Pair ``free``'s sentences with ``template``'s queries by (subject, relation, object).

    ``per_fact`` sentences at most per fact (the first ones, in file order); ``vocab`` is the shared
    candidate set: ``pairs`` (the paired objects: the template-free convention, the dataset's entity
    list) or ``template`` (the template dataset's own heads+tails vocabulary).
    """
    if vocab not in VOCABS:
        raise ProbekitError(f"unknown vocabulary {vocab!r} for a parallel set; available: {', '.join(VOCABS)}")
    positive_int("per_fact", per_fact)
    by_fact: dict[tuple[str, str], Query] = {}
    for q in template.queries:
        by_fact.setdefault((normalize_name(q.subject), q.relation), q)
    sources = free.meta.get("sources", {})
    rows: list[dict[str, str]] = []
    used: dict[tuple[str, str], int] = {}  # (template query, object) -> pairs made
    stats = {"sentences": len(free), "no_subject": 0, "no_template_fact": 0, "not_gold": 0}
    for fq in free.queries:
        if not fq.subject:
            stats["no_subject"] += 1
            continue
        tq = by_fact.get((normalize_name(fq.subject), fq.relation))
        if tq is None:
            stats["no_template_fact"] += 1
            continue
        golds = {normalize_name(g): g for g in tq.golds}
        objs = [golds[normalize_name(o)] for o in fq.golds if normalize_name(o) in golds]
        if not objs:
            stats["not_gold"] += 1
            continue
        for obj in objs:
            fact = (tq.id, normalize_name(obj))
            if used.get(fact, 0) >= per_fact:
                continue
            used[fact] = used.get(fact, 0) + 1
            rows.append({"subject": tq.subject, "relation": tq.relation, "object": obj, "template_query": tq.id,
                         "template": tq.template, "free_query": fq.id, "prompt": fq.text(MASK),
                         "source": "; ".join(sources.get(fq.id, []))})
    if not rows:
        raise ProbekitError(f"no sentence of {free.name!r} matches a fact of {template.name!r}: a pair needs the "
                            "sentence's subject and relation to name a template query and its object to be one "
                            f"of that query's answers ({stats['no_subject']} sentences without subject, "
                            f"{stats['no_template_fact']} with no such query, {stats['not_gold']} with another "
                            "object)")
    pairs = pd.DataFrame(rows)
    counters: dict[str, int] = {}
    ids = []
    for rel in pairs.relation:
        counters[rel] = counters.get(rel, 0) + 1
        ids.append(f"{rel}:{counters[rel] - 1:05d}")
    pairs.insert(0, "query_id", ids)
    names = (list(dict.fromkeys(pairs.object)) if vocab == "pairs"
             else list(template.candidates("heads+tails").names))
    tb = [Query(id=r.query_id, subject=r.subject, relation=r.relation, template=r.template, golds=(r.object,))
          for r in pairs.itertuples(index=False)]
    tf = [Query(id=r.query_id, subject=r.subject, relation=r.relation, template=r.prompt.replace(MASK, OBJECT),
                golds=(r.object,))
          for r in pairs.itertuples(index=False)]
    base = name or f"{template.name}~{free.name}"
    version = f"{template.version}+{free.version}:{per_fact}:{vocab}"
    common = {"vocab_names": names, "parallel": base}
    tb_ds = Dataset(f"{base}:template", tb, dict(template.templates), version=version, source=template.source,
                    meta={**common, "kind": "template-based"})
    sources = {qid: [src] for qid, src in zip(pairs.query_id, pairs.source)}
    tf_ds = Dataset(f"{base}:free", tf, {}, version=version, source=free.source,
                    meta={**common, "kind": KIND, "sources": sources})
    stats["pairs"] = len(pairs)
    stats["facts"] = len(used)
    return Parallel(tb_ds, tf_ds, pairs, stats)


def parallel_drop(template: pd.DataFrame, free: pd.DataFrame, *,
                  metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Each metric (default: every registered one, :mod:`probekit.metrics.registry`) of the template and the
    template-free run of a parallel set, per relation, and the change ``Δ metric = free − template`` (negative:
    the natural sentences score lower). Rows: relations, then ``macro`` (mean over relations) and ``micro`` (over
    all pairs). Only query ids in both runs count.
    """
    for label, frame in (("template", template), ("free", free)):
        missing = [c for c in ("query_id", "relation", "best_gold_rank") if c not in frame.columns]
        if missing:
            raise ProbekitError(f"the {label} results have no {missing[0]!r} column")
    names = metric_names(metrics)
    joined = template.merge(free, on="query_id", suffixes=(" tb", " tf"))
    if not len(joined):
        raise ProbekitError("the two runs share no query id: run both sides of one parallel set")
    clash = joined[joined["relation tb"] != joined["relation tf"]]
    if len(clash):
        raise ProbekitError(f"query {clash.query_id.iloc[0]!r} has different relations in the two runs: "
                            "they are not two sides of one parallel set")
    cols = {"relation": joined["relation tb"]}
    ranks = {side: pd.to_numeric(joined[f"best_gold_rank {s}"], errors="coerce").astype(float).to_numpy()
             for side, s in (("template", "tb"), ("free", "tf"))}
    for n in names:
        for side in ("template", "free"):
            cols[f"{side} {n}"] = get_metric(n).score(ranks[side])
    hits = pd.DataFrame(cols)
    per = hits.groupby("relation", sort=True).mean()
    per.insert(0, "pairs", hits.groupby("relation", sort=True).size())
    macro = per.drop(columns="pairs").mean()
    micro = hits.drop(columns="relation").mean()
    per.loc["macro"] = [per.pairs.sum(), *macro]
    per.loc["micro"] = [per.pairs.iloc[:-1].sum(), *micro]
    per["pairs"] = per["pairs"].astype(int)
    for n in names:
        per[f"Δ {n}"] = per[f"free {n}"] - per[f"template {n}"]
    per.index.name = "relation"
    return per
