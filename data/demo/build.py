"""Rebuild the demo set's MedLAMA-layout relation files from the hand-written ``facts.csv``.

``facts.csv`` (subject, relation, object; one fact a line) and ``prompts.csv`` (pid, default_prompt,
human_prompt) are the sources. This script groups the facts into one row per (subject, relation),
gives every distinct entity name a ``DEMO:E####`` id, computes MedLAMA's hardness columns with
``probekit.datasets.hardness`` and writes, per relation, ``2021AA/<relation>_<n>.csv`` (all rows) and
``2021AA/<relation>_<m>_hard.csv`` (the rows of the hard rule, only when m > 0).

    python data/demo/build.py           # rewrite data/demo/2021AA/
    python data/demo/build.py --check   # exit 1 when the committed files differ from a fresh build
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from probekit.datasets import hardness  # noqa: E402
from probekit.errors import DataFormatError  # noqa: E402

COLUMNS = ["head_cui", "head_name", "rel", "tail_cuis_list", "tail_names_list", "tail_names", "tail_cuis",
           "tail_cuis_len", "tail_names_len", "avg_match", "avg_rouge_l"]
ID_PREFIX = "DEMO:E"


def read_facts(path: Path) -> list[tuple[str, str, str]]:
    """(subject, relation, object) rows; names must be trimmed and no fact may repeat."""
    facts: list[tuple[str, str, str]] = []
    seen: dict[tuple[str, str, str], int] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != ["subject", "relation", "object"]:
            raise DataFormatError(f"{path}, line 1: header must be subject,relation,object")
        for line, row in enumerate(reader, start=2):
            fact = tuple(row[c] or "" for c in ("subject", "relation", "object"))
            if None in row or any(not v or v != " ".join(v.split()) for v in fact):
                raise DataFormatError(f"{path}, line {line}: need three trimmed, non-empty fields: {row}")
            if fact in seen:
                raise DataFormatError(f"{path}, line {line}: repeats line {seen[fact]}")
            seen[fact] = line
            facts.append(fact)
    return facts


def read_relations(path: Path) -> list[str]:
    """Relation ids of ``prompts.csv`` in file order (each template needs [X] and [Y])."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for line, row in enumerate(rows, start=2):
        for col in ("default_prompt", "human_prompt"):
            if "[X]" not in (row.get(col) or "") or "[Y]" not in (row.get(col) or ""):
                raise DataFormatError(f"{path}, line {line}: column {col!r} needs [X] and [Y]")
    return [row["pid"] for row in rows]


def entity_ids(facts) -> dict[str, str]:
    """One id per distinct name, numbered by first appearance (subject before object)."""
    ids: dict[str, str] = {}
    for subject, _, obj in facts:
        for name in (subject, obj):
            if name not in ids:
                ids[name] = f"{ID_PREFIX}{len(ids) + 1:04d}"
    return ids


def relation_frames(facts, relations):
    """relation -> MedLAMA dataframe (rows in order of first appearance), hardness columns filled."""
    import pandas as pd

    unknown = sorted({rel for _, rel, _ in facts} - set(relations))
    if unknown:
        raise DataFormatError(f"relations without a template in prompts.csv: {', '.join(unknown)}")
    ids = entity_ids(facts)
    frames = {}
    for rel in relations:
        groups: dict[str, list[str]] = {}
        for subject, r, obj in facts:
            if r == rel:
                groups.setdefault(subject, []).append(obj)
        if not groups:
            continue
        rows = []
        for subject, objects in groups.items():
            cuis = [ids[o] for o in objects]
            rows.append({"head_cui": ids[subject], "head_name": subject, "rel": rel,
                         "tail_cuis_list": repr(cuis), "tail_names_list": repr(objects),
                         "tail_names": " || ".join(objects), "tail_cuis": " || ".join(cuis),
                         "tail_cuis_len": len(cuis), "tail_names_len": len(objects)})
        frames[rel] = hardness.recompute(pd.DataFrame(rows), label=f"facts of {rel}")[COLUMNS]
    return frames


def build(out_dir: Path = HERE, *, facts_path: Path = HERE / "facts.csv",
          prompts_path: Path = HERE / "prompts.csv") -> dict:
    """Write ``out_dir/prompts.csv`` (a copy, unless it is the source) and ``out_dir/2021AA/*.csv``."""
    out_dir = Path(out_dir)
    facts = read_facts(Path(facts_path))
    frames = relation_frames(facts, read_relations(Path(prompts_path)))
    folder = out_dir / "2021AA"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.csv"):
        stale.unlink()
    if (out_dir / "prompts.csv").resolve() != Path(prompts_path).resolve():
        shutil.copyfile(prompts_path, out_dir / "prompts.csv")
    summary = {"facts": len(facts), "entities": len(entity_ids(facts)), "relations": {}}
    for rel, df in frames.items():
        hard = hardness.hard_rows(df)
        df.to_csv(folder / f"{rel}_{len(df)}.csv", index=False, lineterminator="\n")
        if len(hard):
            hard.to_csv(folder / f"{rel}_{len(hard)}_hard.csv", index=False, lineterminator="\n")
        summary["relations"][rel] = {"queries": len(df), "hard": len(hard)}
    summary["queries"] = sum(r["queries"] for r in summary["relations"].values())
    summary["hard"] = sum(r["hard"] for r in summary["relations"].values())
    return summary


def differences(built: Path, committed: Path) -> list[str]:
    """Relation files that are missing, extra or different in ``committed`` compared to ``built``."""
    a = {p.name: p.read_bytes() for p in (built / "2021AA").glob("*.csv")}
    b = {p.name: p.read_bytes() for p in (committed / "2021AA").glob("*.csv")}
    return sorted(n for n in a.keys() | b.keys() if a.get(n) != b.get(n))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare a fresh build with the committed files")
    args = parser.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp))
            diff = differences(Path(tmp), HERE)
        print("demo set is up to date" if not diff else "out of date: " + ", ".join(diff))
        return 1 if diff else 0
    s = build(HERE)
    print(f"{s['facts']} facts, {s['entities']} entities, {s['queries']} queries "
          f"({s['hard']} hard) over {len(s['relations'])} relations")
    for rel, n in s["relations"].items():
        print(f"  {rel}: {n['queries']} queries, {n['hard']} hard")
    return 0


if __name__ == "__main__":
    sys.exit(main())
