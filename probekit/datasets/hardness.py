"""MedLAMA's hardness measures: how much of a query's answer can be read off its subject name.

MedLAMA (Meng et al. 2022) keeps a query in its *hard* set when the gold names barely overlap the
head (subject) name: ``avg_match < 0.1 and avg_rouge_l < 0.1``, computed per (head, relation) row.
Both columns are recomputed here from text and reproduce the published ``avg_match`` and
``avg_rouge_l`` columns of all 19,000 rows (see ``tests/test_hardness.py``). Two details of the
reference decide exact agreement and are kept on purpose:

* The gold names of a row are its distinct tail names (``tail_names``, first-seen order), joined
  with ``" || "`` and split again on ``"||"``. Every name but the first therefore starts with a space
  and every name but the last ends with one, and ``avg_match`` tests those padded names as
  lower-cased substrings of the head. For golds ``["Eye", "Eyelid"]`` the tested strings are
  ``"eye "`` and ``" eyelid"``; only the second occurs in "Stage IB Eyelid Carcinoma" (0.5), and a
  gold equal to the head counts only when it is the row's only gold.
* ROUGE-L is the ``rouge`` package (PyPI 1.0.1) "rouge-l" F score with the head as hypothesis and
  each gold as reference, both lower-cased: texts are cut into sentences at ``"."``, words are split
  on single spaces, and precision/recall count *distinct* words, the overlap being the set of words
  on the union of longest common subsequences. It is implemented here (no dependency on ``rouge``)
  and checked against the package in the tests.

>>> avg_match("Inner Ear Disorder", ["Ear", "Inner Ear", "Head and Neck"])  # "ear " is not in the head
0.3333333333333333
>>> round(avg_rouge_l("Inner Ear Disorder", ["Inner Ear"]), 6)
0.8
>>> is_hard("Metformin", ["Type 2 diabetes mellitus"])
True
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

from ..errors import DataFormatError, ProbekitError

THRESHOLD = 0.1
"""MedLAMA's cut-off: a row is hard when both measures are below it."""

_JOIN, _SPLIT = " || ", "||"


# ---------------------------------------------------------------- input checks

def _check_name(value, what: str) -> str:
    if not isinstance(value, str):
        raise ProbekitError(f"{what} must be a string, got {type(value).__name__}: {value!r}")
    if not value.replace(".", " ").split():
        raise ProbekitError(f"{what} is empty (or only dots and spaces): {value!r}")
    return value


def _check_golds(golds) -> list[str]:
    """Distinct gold names in first-seen order, as MedLAMA's ``tail_names`` column."""
    if isinstance(golds, str) or not isinstance(golds, Sequence):
        raise ProbekitError(f"golds must be a list of names, got {type(golds).__name__}: {golds!r}")
    if not golds:
        raise ProbekitError("golds is empty: give at least one gold name")
    out: list[str] = []
    for i, g in enumerate(golds):
        _check_name(g, f"gold name #{i + 1}")
        if g not in out:
            out.append(g)
    return out


def _as_reference(golds: list[str]) -> list[str]:
    """The gold strings exactly as the reference scored them: joined with ' || ', split on '||'."""
    return _JOIN.join(golds).split(_SPLIT)


# ---------------------------------------------------------------- ROUGE-L (rouge 1.0.1, "rouge-l", exclusive)

def _sentences(text: str) -> list[str]:
    """Cut at '.', keep non-empty pieces, collapse whitespace (a blank piece becomes '')."""
    return [" ".join(piece.split()) for piece in text.split(".") if len(piece) > 0]


def _lcs_words(x: list[str], y: list[str]) -> set[str]:
    """Words on the longest common subsequence of ``x`` and ``y``, traced back as the package does."""
    # table[i][j] = LCS length of x[:i] and y[:j]; shape (len(x)+1, len(y)+1)
    table = [[0] * (len(y) + 1)]
    for xi in x:
        prev, row = table[-1], [0]
        for j, yj in enumerate(y, start=1):
            row.append(prev[j - 1] + 1 if xi == yj else max(prev[j], row[j - 1]))
        table.append(row)
    words: set[str] = set()
    i, j = len(x), len(y)
    while i > 0 and j > 0:
        if x[i - 1] == y[j - 1]:
            words.add(x[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return words


Parsed = tuple[list[list[str]], list[set[str]], int]
"""A text as ROUGE-L reads it: each sentence's words, each sentence's word set, the number of distinct words."""


def _parse(text: str) -> Parsed:
    words = [s.split(" ") for s in _sentences(text)]
    sets = [set(w) for w in words]
    return words, sets, len(set().union(*sets))


def _rouge_l_f(hypothesis: str, reference: str) -> float:
    return _rouge_l_parsed(_parse(hypothesis), _parse(reference))


def _rouge_l_parsed(hyp: Parsed, ref: Parsed) -> float:
    hyp_words, hyp_sets, n = hyp  # n: distinct hypothesis words
    ref_words, ref_sets, m = ref  # m: distinct reference words
    union: set[str] = set()
    for r_words, r_set in zip(ref_words, ref_sets):
        for h_words, h_set in zip(hyp_words, hyp_sets):
            # the words on a common subsequence are words of both: none shared (most MedLAMA pairs), or all of
            # them already in the union, add nothing; one shared word is the whole trace (the LCS has length 1)
            common = r_set & h_set
            if len(common) > 1 and not common <= union:
                union |= _lcs_words(r_words, h_words)
            else:
                union |= common
    precision, recall = len(union) / n, len(union) / m
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def rouge_l(hypothesis: str, reference: str) -> float:
    """ROUGE-L F of two texts, exactly as ``rouge.Rouge().get_scores(h, r)[0]["rouge-l"]["f"]`` (1.0.1).

    Case is kept (MedLAMA lower-cases before calling it). The package's smoothing term makes a
    perfect match score 0.999999995, not 1.

    >>> round(rouge_l("inner ear disorder", "inner ear"), 9)  # P = 2/3, R = 1
    0.799999995
    >>> rouge_l("a b", "c")
    0.0
    """
    return _rouge_l_f(_check_name(hypothesis, "hypothesis"), _check_name(reference, "reference"))


# ---------------------------------------------------------------- MedLAMA's measures

def _avg_match(head: str, golds: list[str]) -> float:
    head = head.lower()
    refs = _as_reference(golds)
    score = 0
    for ref in refs:
        if ref.lower() in head:
            score += 1
    return score / len(refs)


def _avg_rouge_l(head: str, golds: list[str]) -> float:
    hyp = _parse(head.lower())  # once for all its golds
    refs = _as_reference(golds)
    total = 0.0
    for ref in refs:  # summed in order, as the reference does
        total += _rouge_l_parsed(hyp, _parse(ref.lower()))
    return total / len(refs)


def avg_match(head: str, golds: Sequence[str]) -> float:
    """Share of the gold names found (lower-cased substring) in the head name, as MedLAMA's column.

    Golds are deduplicated and, like the reference, padded by its ``" || "`` join (see module doc).

    >>> avg_match("Stage IB Eyelid Carcinoma", ["Eye", "Eyelid"])
    0.5
    >>> avg_match("Lymphangiomatosis", ["Lymphangiomatosis"])
    1.0
    """
    return _avg_match(_check_name(head, "head name"), _check_golds(golds))


def avg_rouge_l(head: str, golds: Sequence[str]) -> float:
    """Mean ROUGE-L F of (head, gold) over the distinct gold names, lower-cased, as MedLAMA's column.

    >>> avg_rouge_l("aspirin", ["Aspirin", "pain"])
    0.4999999975
    """
    return _avg_rouge_l(_check_name(head, "head name"), _check_golds(golds))


def scores(head: str, golds: Sequence[str]) -> tuple[float, float]:
    """``(avg_match, avg_rouge_l)`` with one input check."""
    head, golds = _check_name(head, "head name"), _check_golds(golds)
    return _avg_match(head, golds), _avg_rouge_l(head, golds)


def is_hard(head: str, golds: Sequence[str], threshold: float = THRESHOLD) -> bool:
    """MedLAMA's hard-set rule for one (head, relation) row: both measures below ``threshold``."""
    _check_threshold(threshold)
    match, rouge = scores(head, golds)
    return match < threshold and rouge < threshold


def _check_threshold(threshold) -> None:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
        raise ProbekitError(f"threshold must be a number in [0, 1], got {threshold!r}")


# ---------------------------------------------------------------- whole files

def _golds_of(value, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise DataFormatError(f"{where}: column 'tail_names_list' is not a Python list literal: "
                                  f"{value[:60]!r}") from None
    if not isinstance(value, (list, tuple)):
        raise DataFormatError(f"{where}: column 'tail_names_list' must be a list, got {value!r}")
    return [str(v) for v in value]


def recompute(df, *, label: str = "<dataframe>"):
    """A copy of a MedLAMA dataframe with ``avg_match`` and ``avg_rouge_l`` recomputed from text.

    Needs ``head_name`` and ``tail_names_list`` (a list, or its Python literal as in the CSV files).
    Errors name the row as the CSV line (header = line 1).
    """
    missing = [c for c in ("head_name", "tail_names_list") if c not in df.columns]
    if missing:
        raise DataFormatError(f"{label}, line 1: missing column {missing[0]!r}")
    match, rouge = [], []
    for line, (head, tails) in enumerate(zip(df["head_name"], df["tail_names_list"]), start=2):
        where = f"{label}, line {line}"
        golds = _golds_of(tails, where)
        try:
            m, r = scores(head, golds)
        except ProbekitError as e:
            raise DataFormatError(f"{where}: {e}") from None
        match.append(m)
        rouge.append(r)
    out = df.copy()
    out["avg_match"] = match
    out["avg_rouge_l"] = rouge
    return out


def hard_rows(df, *, threshold: float = THRESHOLD):
    """The rows of a scored dataframe that MedLAMA keeps in its hard set (order kept)."""
    _check_threshold(threshold)
    keep = (df["avg_match"].astype(float) < threshold) & (df["avg_rouge_l"].astype(float) < threshold)
    return df[keep]


def score_file(path: str | Path):
    """Read one MedLAMA relation CSV (all columns as text) and recompute both hardness columns."""
    import pandas as pd

    path = Path(path).expanduser()
    if not path.exists():
        raise ProbekitError(f"{path}: file not found")
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    return recompute(df, label=str(path))


__all__ = ["THRESHOLD", "avg_match", "avg_rouge_l", "hard_rows", "is_hard", "recompute", "rouge_l", "score_file",
           "scores"]
