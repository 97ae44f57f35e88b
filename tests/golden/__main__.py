"""Check or rewrite the golden files: ``python -m tests.golden [--update] [pytest options, e.g. -k retrieval]``.

From the repository root. Without ``--update`` it runs ``tests/test_golden.py`` as the suite does; with it,
the same test module rewrites ``tests/golden/*.json`` from fresh demo-set runs (one per registered probe) and
docs/measurements.md's demo numbers from those files, then checks them. Review the diff before committing it: a
golden file is a claim that the new numbers are right.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

UPDATE_ENV = "PROBEKIT_GOLDEN_UPDATE"  # read by tests/test_golden.py


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--update" in args:
        args.remove("--update")
        os.environ[UPDATE_ENV] = "1"
    test = Path(__file__).resolve().parent.parent / "test_golden.py"
    return int(pytest.main([str(test), "-q", "-p", "no:cacheprovider", *args]))


if __name__ == "__main__":
    sys.exit(main())
