"""A UMLS-derived smoke set, not DisKnE: a set in DisKnE's shape from MedLAMA triples (or the shipped demo set).

What it can show: that the whole pipeline (splits, negatives, fine-tuning, F1 tables, a grid) runs end
to end on a model, and how fast. What it cannot show: anything about DisKnE or the paper's numbers. Its
premises are UMLS neighbours in clinical-note templates, mostly not entailments ("The patient has a
history of Anemia." ⇒ "The patient has a Small Cell Undifferentiated Hepatoblastoma"); the evidence
of many positives supports other diseases of the set too; every target has exactly ``per_disease``
positives; ``Disease → Disease`` is not a category of the paper, and Tests,
Procedures and Terminological do not exist here.

* Symptoms → Disease from ``disease_may_have_finding``: the target is the head disease, the premise
  lists some of its findings.
* Treatments → Disease from ``may_treat``: the target is a tail disease, the premise names drugs that
  may treat it.
* Disease → Disease from ``disease_may_have_associated_disease``: the target is the head disease,
  the premise names diseases associated with it.

Each positive's premise is a clinical-note template filled with a subset (1 or 2 items) of the
target's evidence; the full hypothesis comes from a per-category template whose wording differs by
category (the kind of artefact §3.4 canonicalises away); the canonical hypothesis is the disease name.
Everything is drawn from ``random.Random(seed)``: one seed, one set. MedLAMA is derived from UMLS:
the built set goes to the cache, never into git.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from .. import config
from ..datasets import load_dataset
from ..errors import ProbekitError
from .data import Disease, DisKnESet, Positive, save_set
from .splits import mentions

SMOKE_NOTE = ("The demo / MedLAMA sets are UMLS-derived smoke sets, not DisKnE: they show that the pipeline runs "
              "and how fast, never the paper's numbers (templated UMLS neighbours, mostly not entailments; "
              "Disease → Disease is not a paper category; no Tests, Procedures or Terminological).")
"""One line saying what a derived set is, for the CLI and the page."""

RELATIONS = {
    "symptoms_diseases": "disease_may_have_finding",
    "treatments_diseases": "may_treat",
    "disease_diseases": "disease_may_have_associated_disease",
}
PREMISES = {
    "symptoms_diseases": [
        "The patient presented with {items}.",
        "On examination the patient had {items}.",
        "She was admitted with {items}.",
        "He reports {items} over the last few weeks.",
    ],
    "treatments_diseases": [
        "The patient was started on {items}.",
        "Her home medications include {items}.",
        "He was discharged on {items}.",
        "The patient is currently taking {items}.",
    ],
    "disease_diseases": [
        "The patient has a history of {items}.",
        "Past medical history is significant for {items}.",
        "He was previously diagnosed with {items}.",
        "Her chart lists {items}.",
    ],
}
HYPOTHESES = {
    "symptoms_diseases": ["The patient has symptoms of {art} {disease}", "The symptoms suggest {art} {disease}"],
    "treatments_diseases": ["The patient is treated for {art} {disease}", "The patient has {disease}"],
    "disease_diseases": ["The patient has {art} {disease}", "The patient is at risk of {disease}"],
}


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _evidence(ds, category: str) -> tuple[dict[str, list[tuple[str, str]]], dict[str, set[str]]]:
    """target id -> its evidence as (id, name) pairs; evidence id -> every target it supports."""
    rel = RELATIONS[category]
    ev: dict[str, list[tuple[str, str]]] = {}
    supports: dict[str, set[str]] = {}
    for q in ds.queries_for(rel):
        for gid, g in zip(q.gold_ids, q.golds, strict=False):
            # may_treat: the drug (head) is evidence for each disease (tail); otherwise the tails are
            # evidence for the head disease
            target, item = (gid, (q.subject_id, q.subject)) if category == "treatments_diseases" \
                else (q.subject_id, (gid, g))
            if item not in ev.setdefault(target, []):
                ev[target].append(item)
            supports.setdefault(item[0], set()).add(target)
    return ev, supports


def _names(ds) -> dict[str, list[str]]:
    """Every name seen for each id (heads and tails of every relation): the synonyms of a disease."""
    out: dict[str, list[str]] = {}
    for q in ds.queries:
        for i, n in [(q.subject_id, q.subject), *zip(q.gold_ids, q.golds, strict=False)]:
            if i and n and n not in out.setdefault(i, []):
                out[i].append(n)
    return out


def derive(ds, *, seed: int = 0, per_disease: int = 3, max_diseases: int | None = 40, name: str = "") -> DisKnESet:
    """A smoke set (not DisKnE) from a MedLAMA-layout :class:`~probekit.datasets.Dataset`.

    ``per_disease``: positives per target disease (distinct evidence subsets of 1–2 items; a target
    with one item of evidence gets one positive and is never evaluated, only trained on).
    ``max_diseases``: targets kept per category, drawn by seed among those with >= 2 positives
    (None: all). Deterministic for a seed.
    """
    if per_disease < 1:
        raise ProbekitError(f"positives per disease must be at least 1, got {per_disease}")
    if max_diseases is not None and max_diseases < 1:
        raise ProbekitError(f"max diseases per category must be at least 1, got {max_diseases}")
    missing = [r for r in RELATIONS.values() if not ds.queries_for(r)]
    if missing:
        raise ProbekitError(f"dataset {ds.name!r} has no {', '.join(missing)} triples; the smoke set needs "
                            f"{', '.join(RELATIONS.values())}")
    names = _names(ds)
    rng = random.Random(f"diskne-build:{seed}")
    chosen: dict[str, tuple[dict, dict, list[str]]] = {}
    for category in RELATIONS:  # first pass: each category's evidence subsets and its kept targets
        ev, supports = _evidence(ds, category)
        plans: dict[str, list[list[tuple[str, str]]]] = {}
        for target in sorted(ev):
            tname = names[target][0]
            items = [e for e in ev[target] if not mentions(e[1], names[target]) and not mentions(tname, [e[1]])]
            subsets = [list(s) for k in (1, 2) for s in itertools.combinations(items, k)]
            rng.shuffle(subsets)
            plans[target] = subsets[:per_disease]
        eligible = sorted(t for t, s in plans.items() if len(s) >= 2)
        if max_diseases is not None and len(eligible) > max_diseases:
            eligible = sorted(rng.sample(eligible, max_diseases))
        chosen[category] = (plans, supports, eligible)
    used = {t for *_, eligible in chosen.values() for t in eligible}
    if not used:
        raise ProbekitError(f"dataset {ds.name!r} yields no disease with 2 or more positives")
    positives: list[Positive] = []
    for category, (plans, supports, eligible) in chosen.items():
        for target in eligible:
            tname = names[target][0]
            for k, subset in enumerate(plans[target]):
                # diseases this premise's evidence supports too: never used as its negatives
                also = tuple(sorted({d for i, _ in subset for d in supports.get(i, ()) if d != target} & used))
                premise = rng.choice(PREMISES[category]).format(items=_join([n for _, n in subset]))
                before, after = rng.choice(HYPOTHESES[category]).split("{disease}")
                before = before.replace("{art}", _article(tname))
                positives.append(Positive(f"{category}:{target}:{k}", premise, before + tname + after,
                                          (len(before), len(before) + len(tname)), target, category, also))
    diseases = {d: Disease(d, names[d][0], tuple(names[d][1:])) for d in sorted(used)}
    settings = {"kind": "derived", "from": ds.name, "from_version": ds.version, "seed": seed,
                "per_disease": per_disease, "max_diseases": max_diseases}
    return DisKnESet(name or f"smoke-{ds.name}", diseases, positives, source=f"derived from {ds.name}",
                     settings=settings)


def default_path(source: str, seed: int, per_disease: int, max_diseases: int | None) -> Path:
    cap = "all" if max_diseases is None else max_diseases
    return config.cache_dir() / "diskne" / f"{source}-seed{seed}-p{per_disease}-d{cap}.json"


def build(source: str = "demo", *, seed: int = 0, per_disease: int = 3, max_diseases: int | None = 40,
          data_dir: str | Path | None = None, out: str | Path | None = None) -> tuple[DisKnESet, Path]:
    """Build the derived set from ``demo`` or ``medlama`` and write it (default: ``cache/diskne/``)."""

    if source not in ("demo", "medlama"):
        raise ProbekitError(f"unknown DisKnE source {source!r}; available: demo, medlama (or the licensed files)")
    ds = load_dataset(source, path=data_dir)
    built = derive(ds, seed=seed, per_disease=per_disease, max_diseases=max_diseases, name=f"smoke-{source}")
    path = Path(out) if out else default_path(source, seed, per_disease, max_diseases)
    return built, save_set(built, path)


def sources() -> list[str]:
    """The license-free sources present here: the shipped demo set always, MedLAMA when found."""
    return ["demo"] + (["medlama"] if (config.medlama_dir() / "2021AA").is_dir() else [])


def ensure(source: str = "demo", *, seed: int = 0, per_disease: int = 3, max_diseases: int | None = 40) -> Path:
    """The built set's path, building it first when it is not in the cache yet (deterministic by seed)."""
    path = default_path(source, seed, per_disease, max_diseases)
    if not path.is_file():
        path = build(source, seed=seed, per_disease=per_disease, max_diseases=max_diseases)[1]
    return path


def built_sets() -> list[Path]:
    """Sets written to ``cache/diskne/``, newest first."""
    root = config.cache_dir() / "diskne"
    return sorted(root.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True) if root.is_dir() else []
