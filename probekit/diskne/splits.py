"""Per-disease training/validation/test splits (Alghanmi et al. 2021, §3.3) and negative examples (§3.2).

For a target disease X with negatives neg(X) = {Y1..Yn}:

* ``Test_X``: every positive whose hypothesis disease is X, plus, for each of them and each Y in
  neg(X), the negative e_{X->Y} (X replaced by Y; a preceding "a"/"an" fixed for Y's first letter).
* ``Train_X``: the positives that mention neither X nor any disease of neg(X) (by any synonym, in the
  premise or the hypothesis), each with its own negatives e_{Z->Y}; a negative that would swap in X or
  a disease of neg(X) is dropped too, so no training example mentions them.
* validation: 10 % of Train_X's positives (with their negatives), drawn by seed.

That Train_X is the ``strict`` reading. The ``repository`` reading is DisKnE's own ``splits.py``
(israa-alghanmi/DisKnE@11bbdb9, ``prepare_splits``): a row is removed when "str(all_data['CUI'][i])==CUI
or str(all_data['original_cui'][i])==CUI or any(x in str(all_data['P'][i]).lower() for x in matches)", i.e.
the positives of X, every row swapping in X, and every row whose *premise* contains one of X's names as a
lower-cased substring; diseases of neg(X) stay in. It keeps more rows (a side-by-side check counted 3,377 against the
strict 2,979 per target).

Hypotheses are canonicalised (§3.4: the hypothesis *is* the disease name) unless ``hypothesis="full"``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..errors import ProbekitError
from .data import DisKnESet, Positive

HYPOTHESES = ("canonical", "full")
TRAIN_FILTERS = ("strict", "repository")
"""How Train_X is filtered (see :func:`split_for`): ``strict`` bans X and every disease of neg(X) by whole
words in premise and hypothesis; ``repository`` is DisKnE's ``splits.py`` (only X, by substring, in the premise)."""


@dataclass(frozen=True)
class Example:
    """One classification pair; ``label`` 1 = entailed. ``source`` is the positive it came from."""

    premise: str
    hypothesis: str
    label: int
    disease: str
    category: str
    source: str


@dataclass(frozen=True)
class Split:
    target: str
    train: list[Example]
    validation: list[Example]
    test: list[Example]

    def test_of(self, category: str) -> list[Example]:
        """The test set restricted to one category (the paper's per-category evaluation)."""
        return [e for e in self.test if e.category == category]

    def counts(self) -> dict:
        return {part: {"pos": sum(e.label for e in xs), "neg": sum(1 - e.label for e in xs)}
                for part, xs in (("train", self.train), ("validation", self.validation), ("test", self.test))}


@lru_cache(maxsize=4096)
def _pattern(name: str) -> re.Pattern:
    words = name.lower().split()
    return re.compile(r"(?<![a-z0-9])" + r"\s+".join(re.escape(w) for w in words) + r"(?![a-z0-9])")


def mentions(text: str, names: Iterable[str]) -> bool:
    """Whether ``text`` mentions any of ``names`` as whole words, case-insensitively.

    >>> mentions("History of CHF and COPD.", ["chf"]), mentions("chfx", ["chf"])
    (True, False)
    """
    low = text.lower()
    return any(n.strip() and _pattern(n).search(low) for n in names)


def fix_article(before: str, replacement: str) -> str:
    """Fix an "a"/"an" that ends ``before`` for a word starting with ``replacement``'s first letter.

    The paper: "If the word before the occurrence of X is a or an, we modify it depending on
    whether Y starts with a vowel or consonant."

    >>> fix_article("The patient has an ", "stroke"), fix_article("He had a ", "aneurysm")
    ('The patient has a ', 'He had an ')
    >>> fix_article("An ", "cold"), fix_article("Banana ", "ulcer")
    ('A ', 'Banana ')
    """
    m = re.search(r"(?:^|(?<=\s))(a|an|A|An|AN)(\s+)$", before)
    if not m:
        return before
    vowel = replacement[:1].lower() in "aeiou"
    word = m.group(1)
    new = ("an" if vowel else "a")
    if word[0].isupper():
        new = new.capitalize() if len(word) == 1 or word[1:].islower() else new.upper()
    return before[:m.start(1)] + new + m.group(2)


def swap(p: Positive, replacement: str) -> str:
    """The full hypothesis of ``p`` with its disease mention replaced by ``replacement`` (a/an fixed)."""
    start, end = p.span
    return fix_article(p.hypothesis[:start], replacement) + replacement + p.hypothesis[end:]


def _example(ds: DisKnESet, p: Positive, disease: str, hypothesis: str) -> Example:
    name = ds.diseases[disease].name
    if hypothesis == "canonical":
        text = name
    elif disease == p.disease:
        text = p.hypothesis
    else:
        text = swap(p, name)
    return Example(p.premise, text, int(disease == p.disease), disease, p.category, p.id)


def with_negatives(ds: DisKnESet, p: Positive, negatives: dict[str, list[str]], *, hypothesis: str = "canonical",
                   exclude: frozenset[str] = frozenset()) -> list[Example]:
    """``p`` and its negatives e_{X->Y} for Y in neg(X) (the pair's own list when the set gives one), skipping
    Y in ``exclude`` or known to hold too."""
    out = [_example(ds, p, p.disease, hypothesis)]
    for y in (p.negatives or negatives.get(p.disease, [])):
        if y != p.disease and y not in exclude and y not in p.also_true:
            out.append(_example(ds, p, y, hypothesis))
    return out


def _check(ds: DisKnESet, target: str, hypothesis: str, val_fraction: float) -> None:
    if target not in ds.diseases:
        raise ProbekitError(f"unknown disease {target!r} in DisKnE set {ds.name!r}")
    if hypothesis not in HYPOTHESES:
        raise ProbekitError(f"unknown hypothesis form {hypothesis!r}; available: {', '.join(HYPOTHESES)}")
    if not 0 <= val_fraction < 1:
        raise ProbekitError(f"validation fraction must be in [0, 1), got {val_fraction}")


def _kept_for_training(ds: DisKnESet, p: Positive, target: str, banned: frozenset[str], banned_names: list[str],
                       train_filter: str) -> bool:
    if train_filter == "repository":  # splits.py: CUI / original_cui == X, or a name of X inside the premise
        low = p.premise.lower()
        return p.disease != target and not any(n.lower() in low for n in ds.diseases[target].names)
    return p.disease not in banned and not mentions(p.premise, banned_names) \
        and not mentions(p.hypothesis, banned_names)


def split_for(ds: DisKnESet, target: str, negatives: dict[str, list[str]], *, hypothesis: str = "canonical",
              val_fraction: float = 0.1, seed: int = 0, train_filter: str = "strict") -> Split:
    """Train/validation/test for one target disease, as §3.3 (see the module docstring for the two
    ``train_filter`` readings)."""
    _check(ds, target, hypothesis, val_fraction)
    if train_filter not in TRAIN_FILTERS:
        raise ProbekitError(f"unknown training-set filter {train_filter!r}; available: {', '.join(TRAIN_FILTERS)}")
    banned = frozenset([target, *negatives.get(target, [])])
    banned_names = [n for d in sorted(banned) if d in ds.diseases for n in ds.diseases[d].names]
    test: list[Example] = []
    train_pos: list[Positive] = []
    for p in ds.positives:
        if p.disease == target:
            test += with_negatives(ds, p, negatives, hypothesis=hypothesis)
        elif _kept_for_training(ds, p, target, banned, banned_names, train_filter):
            train_pos.append(p)
    if train_filter == "repository":  # only rows swapping in X itself are removed
        banned = frozenset([target])
    rng = random.Random(f"diskne-val:{seed}:{target}")
    order = list(range(len(train_pos)))
    rng.shuffle(order)
    n_val = int(round(val_fraction * len(train_pos)))
    if val_fraction > 0 and len(train_pos) >= 2:
        n_val = max(1, n_val)
    val_idx = set(order[:n_val])
    train: list[Example] = []
    validation: list[Example] = []
    for i, p in enumerate(train_pos):
        (validation if i in val_idx else train).extend(with_negatives(ds, p, negatives, hypothesis=hypothesis,
                                                                      exclude=banned))
    return Split(target, train, validation, test)


def train_counts(ds: DisKnESet, target: str, negatives: dict[str, list[str]], *, hypothesis: str = "canonical"
                 ) -> dict[str, int]:
    """Training + validation rows of ``target`` under each filter reading (both are reported beside a run)."""
    out = {}
    for f in TRAIN_FILTERS:
        sp = split_for(ds, target, negatives, hypothesis=hypothesis, val_fraction=0.0, train_filter=f)
        out[f] = len(sp.train)
    return out


def train_rows_by_filter(ds: DisKnESet, *, hypothesis: str = "canonical") -> dict[str, float]:
    """Mean Train_X rows (training + validation) over the evaluated targets, under each filter reading, with
    the set's own negatives."""
    todo = targets(ds)
    if not todo:
        return {}
    counts = [train_counts(ds, t, ds.negatives, hypothesis=hypothesis) for t in todo]
    return {f: sum(c[f] for c in counts) / len(counts) for f in TRAIN_FILTERS}


def targets(ds: DisKnESet, categories: Sequence[str] | None = None, *, min_positives: int = 2) -> list[str]:
    """Diseases to fine-tune for: those with ``>= min_positives`` positives in at least one chosen category."""
    cats = list(categories) if categories else ds.categories
    unknown = [c for c in cats if c not in ds.categories]
    if unknown:
        raise ProbekitError(f"unknown category {unknown[0]!r} in DisKnE set {ds.name!r}; "
                            f"available: {', '.join(ds.categories)}")
    return sorted({d for c in cats for d in ds.eligible(c, min_positives=min_positives)})
