"""BioLAMA JSONL (one fact a line) with templates from a ``manual.jsonl`` of ``{relation, template}``.

Gold answers are the object labels plus their aliases (``obj_aliases`` holds one list per object).
Accepts one JSONL file or a folder searched recursively (e.g. ``triples_processed/*/test.jsonl``);
the template file is ``manual.jsonl`` found next to, or in a ``prompts/`` folder above, the data.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import DataFormatError, ProbekitError
from ..types import MASK, OBJECT, Query
from .base import Dataset, fingerprint_files

REQUIRED = ("predicate_id", "sub_label", "obj_labels")


def read_manual(path: Path) -> dict[str, str]:
    out = {}
    for line, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path}, line {line}: not valid JSON ({e.msg})") from None
        for col in ("relation", "template"):
            if col not in row:
                raise DataFormatError(f"{path}, line {line}: missing column {col!r}")
        out[row["relation"]] = " ".join(row["template"].split()).replace(MASK, OBJECT)
    return out


def _find_manual(start: Path) -> Path | None:
    for folder in [start, *start.parents][:4]:
        for cand in (folder / "manual.jsonl", folder / "prompts" / "manual.jsonl"):
            if cand.exists():
                return cand
    return None


def load(path: str | Path, *, templates: str | Path | None = None, split: str = "test",
         name: str = "biolama") -> Dataset:
    path = Path(path).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob(f"{split}.jsonl")) or sorted(
            p for p in path.rglob("*.jsonl") if p.name != "manual.jsonl")
    elif path.exists():
        files = [path]
    else:
        raise ProbekitError(f"BioLAMA path {path} not found: set PROBEKIT_BIOLAMA_DIR or pass --data-dir")
    if not files:
        raise ProbekitError(f"no BioLAMA JSONL files under {path}")
    manual = Path(templates) if templates else _find_manual(files[0].parent)
    if manual is None or not manual.exists():
        raise ProbekitError(f"no manual.jsonl with templates found near {path}; pass templates=")
    tpls = read_manual(manual)
    queries: list[Query] = []
    for f in files:
        for line, raw in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{f}, line {line}: not valid JSON ({e.msg})") from None
            missing = [c for c in REQUIRED if c not in row]
            if missing:
                raise DataFormatError(f"{f}, line {line}: missing column {missing[0]!r}")
            rel = row["predicate_id"]
            if rel not in tpls:
                raise DataFormatError(f"{f}, line {line}: relation {rel!r} has no template in {manual}")
            golds: list[str] = []
            for label in row["obj_labels"]:
                if label not in golds:
                    golds.append(label)
            for aliases in row.get("obj_aliases") or []:
                for a in aliases if isinstance(aliases, list) else [aliases]:
                    if a and a not in golds:
                        golds.append(a)
            queries.append(Query(id=row.get("uuid") or f"{rel}:{len(queries):05d}", subject=row["sub_label"],
                                 relation=rel, template=tpls[rel], golds=tuple(golds),
                                 gold_ids=tuple(row.get("obj_uris") or ()), subject_id=row.get("sub_uri", "")))
    used = {q.relation for q in queries}
    return Dataset(name=name, queries=queries, templates={r: t for r, t in tpls.items() if r in used},
                   version=fingerprint_files([manual, *files]), source=str(path))
