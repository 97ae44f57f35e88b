"""The DisKnE data model, the built set's file format, and the loader for the licensed (paper's) files.

A DisKnE set is a list of *positive* premise–hypothesis pairs, each saying that the patient has one
target disease, tagged with the category of knowledge it needs (Alghanmi et al. 2021, §3.1). Negatives
and the per-disease splits are derived from it (:mod:`probekit.diskne.splits`), so the set on disk
holds only what is fixed: diseases (id, name, synonyms), positives, and, where the user supplies them,
each disease's negative diseases.

Two sources produce a set:

* :func:`load_licensed`, the paper's set and the way to reproduce it: one of the DisKnE repository's four
  public annotation CSVs plus the user's own MedNLI / MEDIQA-NLI files (licensed, never shipped);
* the smoke-set builder (:mod:`probekit.diskne.build`) from MedLAMA triples or the shipped demo set: a
  UMLS-derived smoke set, not DisKnE.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .. import atomic
from ..errors import DataFormatError, ProbekitError, command
from ..types import normalize_name

CATEGORY_LABELS = {
    "symptoms_diseases": "Symptoms → Disease",
    "treatments_diseases": "Treatments → Disease",
    "tests_diseases": "Tests → Disease",
    "procedure_diseases": "Procedures → Disease",
    "terminological": "Terminological",
    "disease_diseases": "Disease → Disease",
}
"""Category keys as DisKnE's annotation files spell them, plus the derived set's ``disease_diseases``."""

FORMAT_VERSION = 1


def category_label(key: str) -> str:
    """The display label of a category key.

    >>> category_label("symptoms_diseases")
    'Symptoms → Disease'
    """
    return CATEGORY_LABELS.get(key, key)


@dataclass(frozen=True)
class Disease:
    """A target disease: an id (UMLS CUI or demo id), its display name, and every name it goes by."""

    id: str
    name: str
    synonyms: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The name first, then the other synonyms, without duplicates (by normalised spelling)."""
        seen, out = set(), []
        for n in (self.name, *self.synonyms):
            key = normalize_name(n)
            if key and key not in seen:
                seen.add(key)
                out.append(n)
        return tuple(out)


@dataclass(frozen=True)
class Positive:
    """One entailed pair: ``hypothesis[span[0]:span[1]]`` is the mention of ``disease``.

    ``also_true`` lists diseases the premise is known to support too (from the KB the set was derived
    from): a negative that swaps in one of them would be mislabelled, so it is never generated.
    ``negatives``, when given, are this pair's own negative diseases (the annotation's ``pair_id,ng`` rows:
    DisKnE's *random* variants draw them per pair), used instead of the disease's list.
    """

    id: str
    premise: str
    hypothesis: str
    span: tuple[int, int]
    disease: str
    category: str
    also_true: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()


@dataclass
class DisKnESet:
    """Diseases, positives and (optionally) given negatives; ``version`` fingerprints the content."""

    name: str
    diseases: dict[str, Disease]
    positives: list[Positive]
    negatives: dict[str, list[str]] = field(default_factory=dict)
    source: str = ""
    settings: dict = field(default_factory=dict)
    version: str = ""

    def __post_init__(self):
        if not self.version:
            self.version = self.fingerprint()

    @property
    def categories(self) -> list[str]:
        return sorted({p.category for p in self.positives})

    def positives_of(self, disease: str, category: str | None = None) -> list[Positive]:
        return [p for p in self.positives if p.disease == disease and category in (None, p.category)]

    def eligible(self, category: str, *, min_positives: int = 2) -> list[str]:
        """Diseases with at least ``min_positives`` positives in ``category`` (the paper reports only those)."""
        counts: dict[str, int] = {}
        for p in self.positives:
            if p.category == category:
                counts[p.disease] = counts.get(p.disease, 0) + 1
        return sorted(d for d, n in counts.items() if n >= min_positives)

    def summary(self) -> dict:
        per_cat = {c: {"positives": sum(p.category == c for p in self.positives),
                       "diseases": len({p.disease for p in self.positives if p.category == c}),
                       "eligible": len(self.eligible(c))} for c in self.categories}
        return {"name": self.name, "version": self.version, "source": self.source, "diseases": len(self.diseases),
                "positives": len(self.positives), "given_negatives": bool(self.negatives), "categories": per_cat}

    def to_json(self) -> dict:
        return {"format": FORMAT_VERSION, "name": self.name, "source": self.source, "settings": self.settings,
                "diseases": [asdict(d) for d in self.diseases.values()],
                "positives": [asdict(p) for p in self.positives], "negatives": self.negatives}

    def fingerprint(self) -> str:
        body = {k: v for k, v in self.to_json().items() if k not in ("source",)}
        return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]


def save_set(ds: DisKnESet, path: str | Path) -> Path:
    """Write atomically (temp file + rename), so a crashed build never leaves half a set behind."""
    path = Path(path)
    atomic.write_json(path, {**ds.to_json(), "version": ds.version})
    return path


def read_set(path: str | Path) -> DisKnESet:
    """Read a set written by :func:`save_set`; a malformed file gets a message naming it."""
    path = Path(path)
    if not path.is_file():
        raise ProbekitError(f"DisKnE set {path} not found: build one with `{command()} diskne build`")
    try:
        raw = json.loads(path.read_text())
        diseases = {d["id"]: Disease(d["id"], d["name"], tuple(d.get("synonyms", ()))) for d in raw["diseases"]}
        positives = [Positive(p["id"], p["premise"], p["hypothesis"], tuple(p["span"]), p["disease"], p["category"],
                              tuple(p.get("also_true", ())), tuple(p.get("negatives", ())))
                     for p in raw["positives"]]
        return DisKnESet(raw["name"], diseases, positives, {k: list(v) for k, v in raw.get("negatives", {}).items()},
                         source=str(path), settings=raw.get("settings", {}), version=raw.get("version", ""))
    except (ValueError, KeyError, TypeError) as e:
        raise DataFormatError(f"{path} is not a DisKnE set written by probekit ({type(e).__name__}: {e}); "
                              f"rebuild it with `{command()} diskne build`") from None


# ---------------------------------------------------------------- the licensed path (MedNLI + DisKnE files)
ANNOTATION_COLUMNS = ("pair_id", "CUI")
"""Required columns of a DisKnE annotation CSV (the four files of israa-alghanmi/DisKnE, ``annotation_files/``);
``label``, ``category``, ``original_cui``, ``start_index``/``end_index`` (the disease mention in the
hypothesis) and ``disease`` (its name) are read when present. The two terminological files have no
``category`` column: their rows are ``terminological``. ``end_index`` is exclusive (in the repository's medical
file, C0042029's mention spans 18..41, the 23 characters of "urinary tract infection" after "The patient has
a "); the repository's ``generate.py`` slices ``[start_index:end_index+1]`` and strips spaces, so a mention
that ends the sentence keeps its final full stop there."""


def _require_file(path, what: str) -> Path:
    if path is None or not str(path).strip():
        raise ProbekitError(f"the licensed DisKnE path needs {what}")
    p = Path(path).expanduser()
    if not p.is_file():
        raise ProbekitError(f"{what} not found: {p} (DisKnE's licensed files are never shipped with probekit; "
                            "point at your own copy)")
    return p


def read_nli(paths: Sequence[str | Path]) -> dict[str, tuple[str, str]]:
    """pairID -> (premise, hypothesis) from MedNLI / MEDIQA-NLI JSONL (``pairID, sentence1, sentence2``)."""
    if not paths:
        raise ProbekitError("the licensed DisKnE path needs the MedNLI / MEDIQA-NLI JSONL files "
                            "(mli_train_v1.jsonl, mli_dev_v1.jsonl, mli_test_v1.jsonl, MEDIQA-NLI's test file)")
    pairs: dict[str, tuple[str, str]] = {}
    for raw in paths:
        path = _require_file(raw, "the NLI file")
        with open(path, encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    raise DataFormatError(f"{path}, line {line_no}: not a JSON object") from None
                missing = [c for c in ("pairID", "sentence1", "sentence2") if c not in row]
                if missing:
                    raise DataFormatError(f"{path}, line {line_no}: missing field(s) {', '.join(missing)} "
                                          "(MedNLI JSONL has pairID, sentence1, sentence2)")
                pairs[str(row["pairID"])] = (str(row["sentence1"]), str(row["sentence2"]))
    return pairs


def _csv_rows(path: Path, required: Sequence[str]) -> list[tuple[int, dict]]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        missing = [c for c in required if c not in header]
        if missing:
            raise DataFormatError(f"{path}, line 1: missing column(s) {', '.join(missing)}; "
                                  f"found {', '.join(header) or 'no header'}")
        return [(n, {(k or "").strip(): (v or "").strip() for k, v in row.items()})
                for n, row in enumerate(reader, start=2)]


def read_negatives_csv(path: str | Path, diseases: dict[str, Disease]) -> dict[str, list[str]]:
    """A ``disease, negative_disease`` CSV (ids or names) -> disease id -> negative ids, in file order."""
    path = _require_file(path, "the negatives CSV (columns disease, negative_disease)")
    by_name: dict[str, str] = {}
    for d in diseases.values():
        by_name.setdefault(normalize_name(d.id), d.id)
        for n in d.names:
            by_name.setdefault(normalize_name(n), d.id)
    out: dict[str, list[str]] = {}
    for line, row in _csv_rows(path, ("disease", "negative_disease")):
        ids = []
        for col in ("disease", "negative_disease"):
            key = by_name.get(normalize_name(row[col]))
            if key is None:
                raise DataFormatError(f"{path}, line {line}, column {col}: {row[col]!r} is not a disease of the "
                                      "set (give its CUI or one of its names)")
            ids.append(key)
        if ids[0] != ids[1] and ids[1] not in out.setdefault(ids[0], []):
            out[ids[0]].append(ids[1])
    return out


def read_names_csv(path: str | Path) -> dict[str, list[str]]:
    """A ``CUI, name`` CSV (one row per name; the first row of a CUI is its display name) -> CUI -> names."""
    path = _require_file(path, "the disease names CSV (columns CUI, name)")
    out: dict[str, list[str]] = {}
    for line, row in _csv_rows(path, ("CUI", "name")):
        if not row["CUI"] or not row["name"]:
            raise DataFormatError(f"{path}, line {line}: empty CUI or name")
        if row["name"] not in out.setdefault(row["CUI"], []):
            out[row["CUI"]].append(row["name"])
    return out


def load_licensed(nli_files: Sequence[str | Path], annotations: str | Path, *,
                  negatives_csv: str | Path | None = None, names_csv: str | Path | None = None,
                  name: str = "diskne") -> DisKnESet:
    """The paper's set from MedNLI / MEDIQA-NLI and a DisKnE annotation CSV (plus optional negatives CSV).

    Positive rows (``label`` entailment, or any row whose ``pair_id`` does not end in ``,ng``) become
    positives; the disease name is the ``disease`` column or the hypothesis span
    ``start_index:end_index``. Negative rows (``pair_id,ng``) give each ``original_cui``'s negatives
    unless a negatives CSV is given. A disease's synonyms are all the names seen for its CUI.

    A negative CUI needs a name to be swapped in: the repository's ``generate.py`` takes its SNOMED CT
    label from the user's UMLS. ``names_csv`` (``CUI, name``, exported from the user's own UMLS) supplies
    them; without it a negative is kept only when the CUI is also a positive disease of the file (its
    mention there is its name).
    """
    pairs = read_nli(nli_files)
    ann_path = _require_file(annotations, "the DisKnE annotation CSV (pair_id, CUI, category, ...)")
    rows = _csv_rows(ann_path, ANNOTATION_COLUMNS)
    names: dict[str, list[str]] = {}
    positives: list[Positive] = []
    given: dict[str, list[str]] = {}
    per_pair: dict[str, list[str]] = {}
    missing_pairs = []
    for line, row in rows:
        pid, cui, cat = row["pair_id"], row["CUI"], row.get("category") or "terminological"
        if pid.endswith(",ng") or row.get("label", "entailment") not in ("", "entailment"):
            target = row.get("original_cui") or ""
            if target and cui not in given.setdefault(target, []):
                given[target].append(cui)
            own = per_pair.setdefault(pid.removesuffix(",ng"), [])
            if cui not in own:
                own.append(cui)
            continue
        if pid not in pairs:
            missing_pairs.append(pid)
            continue
        premise, hypothesis = pairs[pid]
        start, end = row.get("start_index", ""), row.get("end_index", "")
        if start and end:
            try:
                span = (int(float(start)), int(float(end)))
            except ValueError:
                raise DataFormatError(f"{ann_path}, line {line}: start_index/end_index must be integers") from None
            mention = hypothesis[span[0]:span[1]]
        elif row.get("disease"):
            mention = row["disease"]
            at = hypothesis.lower().find(mention.lower())
            span = (at, at + len(mention)) if at >= 0 else (len(hypothesis), len(hypothesis))
        else:
            raise DataFormatError(f"{ann_path}, line {line}: a positive row needs start_index/end_index or a "
                                  "disease column naming the disease")
        disease_name = row.get("disease") or mention
        if not disease_name.strip():
            raise DataFormatError(f"{ann_path}, line {line}: empty disease mention for pair {pid}")
        names.setdefault(cui, [])
        for n in (disease_name, mention):
            if n.strip() and n.strip() not in names[cui]:
                names[cui].append(n.strip())
        positives.append(Positive(f"{pid}:{cat}", premise, hypothesis, span, cui, cat))
    if missing_pairs:
        raise ProbekitError(f"{len(missing_pairs)} annotated pair(s) are in none of the NLI files given "
                            f"(first: {', '.join(missing_pairs[:3])}); pass every MedNLI split and MEDIQA-NLI's file")
    if not positives:
        raise ProbekitError(f"{ann_path} holds no positive (entailment) rows")
    extra = read_names_csv(names_csv) if names_csv else {}
    for c, ns in extra.items():  # UMLS names first (the negatives' swapped-in name), then the mentions seen
        names[c] = ns + [n for n in names.get(c, []) if n not in ns]
    diseases = {c: Disease(c, ns[0], tuple(ns[1:])) for c, ns in names.items()}
    if negatives_csv:
        negatives = read_negatives_csv(negatives_csv, diseases)
    else:  # the annotation's own negative rows, restricted to diseases that have a name in the set
        negatives = {t: [c for c in cs if c in diseases and c != t] for t, cs in given.items() if t in diseases}
        positives = [replace(p, negatives=tuple(c for c in per_pair.get(p.id.rsplit(":", 1)[0], [])
                                                if c in diseases and c != p.disease)) for p in positives]
    return DisKnESet(name, diseases, positives, negatives,
                     source=f"licensed: {ann_path.name} + {len(nli_files)} NLI file(s)",
                     settings={"kind": "licensed", "annotations": str(ann_path),
                               "negatives_csv": str(negatives_csv) if negatives_csv else None,
                               "names_csv": str(names_csv) if names_csv else None})
