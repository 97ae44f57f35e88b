"""Where the test suite's time goes: a pytest JUnit XML report turned into a per-file and per-kind table.

    .venv/bin/python -m pytest -n 2 --dist loadgroup --junitxml=/tmp/suite.xml   # what `make test` runs
    .venv/bin/python benchmarks/suite_times.py /tmp/suite.xml --wall 512 --label "make test, 2 workers" \\
        --out benchmarks/results/suite-2026-11-28.json

Each test's time is pytest's own (setup + call + teardown, as JUnit reports it by default); the kinds are read off
the test's file: Chromium (``test_browser*.py`` and any test marked ``browser``: pass ``--browser-ids`` from
``pytest --collect-only -q -m browser``), page AppTests (``test_page_*.py``), doctests (modules of ``probekit/``),
and the rest. ``--wall`` records the run's wall-clock seconds beside the summed test seconds, since with two
workers the sum is about twice the wall time.
"""

from __future__ import annotations

import argparse
import json
import platform
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def test_rows(report: Path) -> list[dict]:
    """One row per test case: its node id (file::name), file and seconds."""
    rows = []
    for case in ET.parse(report).iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        if cls.startswith("tests."):
            file = cls.replace(".", "/") + ".py"
        else:  # a doctest of probekit/: classname is the module, name the object
            file = cls.rsplit(".", 1)[0].replace(".", "/") + ".py" if "." in cls else cls
        rows.append({"id": f"{file}::{name}", "file": file, "seconds": float(case.get("time") or 0.0)})
    return rows


def kind_of(row: dict, browser_ids: set[str]) -> str:
    file = row["file"]
    if row["id"] in browser_ids or Path(file).name.startswith("test_browser"):
        return "chromium"
    if Path(file).name.startswith("test_page_"):
        return "page apptest"
    if file.startswith("probekit/"):
        return "doctest"
    return "other"


def summarise(rows: list[dict], *, browser_ids: set[str], wall: float | None, label: str) -> dict:
    by_file: dict[str, list[float]] = defaultdict(list)
    by_kind: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_file[r["file"]].append(r["seconds"])
        by_kind[kind_of(r, browser_ids)].append(r["seconds"])
    total = sum(r["seconds"] for r in rows)
    return {
        "label": label,
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "wall_s": wall,
        "tests": len(rows),
        "test_seconds_summed": round(total, 1),
        "by_kind": {k: {"tests": len(v), "seconds": round(sum(v), 1)}
                    for k, v in sorted(by_kind.items(), key=lambda kv: -sum(kv[1]))},
        "by_file": [{"file": f, "tests": len(v), "seconds": round(sum(v), 1)}
                    for f, v in sorted(by_file.items(), key=lambda kv: -sum(kv[1]))],
        "slowest": sorted(rows, key=lambda r: -r["seconds"])[:50],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", type=Path, help="pytest --junitxml output")
    ap.add_argument("--wall", type=float, default=None, help="the run's wall-clock seconds")
    ap.add_argument("--label", default="", help="what was run, and how")
    ap.add_argument("--browser-ids", type=Path, default=None, help="node ids of the browser-marked tests, one a line")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON here (else print it)")
    args = ap.parse_args(argv)
    ids = set(args.browser_ids.read_text().split()) if args.browser_ids else set()
    result = summarise(test_rows(args.report), browser_ids=ids, wall=args.wall, label=args.label)
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    else:
        print(text)
    for kind, v in result["by_kind"].items():
        print(f"{kind:>13}: {v['tests']:5d} tests {v['seconds']:8.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
