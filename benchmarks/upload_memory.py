"""Memory of a server that receives uploads: the app in one process (Streamlit's AppTest), a triples CSV uploaded
through the sidebar again and again.

The target: the resident size after 10 uploads of the same file is within 1.2x the size after the first; and
uploads of *different* files, one replacing the other in a session, no longer grow the server by a parsed file
each time (a parsed file is 15-30x its CSV: a 1,000,000-row file of 34 MB is some 500 MB of Python objects; the
shared upload cache counted only the CSV's bytes, so several parsed files stayed alive). Each upload runs in a
fresh session (``--sessions fresh``, an expert opening a new tab) or in one session (``--sessions one``).

    .venv/bin/python benchmarks/upload_memory.py --rows 1000000 --uploads 10            # the same file
    .venv/bin/python benchmarks/upload_memory.py --rows 300000 --uploads 5 --distinct   # a new file each time

Prints one line per upload (RSS, the shared cache) and the ratio of the last to the first.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def triples(rows: int, salt: int) -> bytes:
    lines = ["subject,relation,object"] + [f"subject{i % 200_000},relation{i % 19},object{(i * 7 + salt) % 300_000}"
                                           for i in range(rows)]
    return ("\n".join(lines) + "\n").encode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--uploads", type=int, default=10)
    ap.add_argument("--distinct", action="store_true", help="a different file each time")
    ap.add_argument("--sessions", choices=("one", "fresh"), default="one")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    os.environ.update(PROBEKIT_CACHE_DIR=f"{tmp}/cache", PROBEKIT_DB=f"{tmp}/db.duckdb", PROBEKIT_OFFLINE="1")
    sys.path.insert(0, str(ROOT))
    from streamlit.testing.v1 import AppTest

    from pages import _ui as ui
    from probekit import memory

    same = triples(args.rows, 0)
    print(f"{args.rows:,} rows, {len(same) / 2**20:.1f} MB CSV; {args.uploads} uploads, "
          f"{'distinct files' if args.distinct else 'the same file'}, {args.sessions} session(s)")
    at, first = None, None
    for n in range(args.uploads):
        if at is None or args.sessions == "fresh":
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
            at.session_state["pk_dataset"] = "__upload__"
            at.run()
        data = triples(args.rows, n) if args.distinct else same
        at.file_uploader(key="pk_upload").upload(f"u{n}.csv", data, "text/csv").run()
        assert not at.error, [e.value for e in at.error]
        del data
        rss = memory.rss_bytes() / 2**20
        first = first or rss
        print(f"upload {n + 1:>2}: RSS {rss:8,.0f} MB  ({rss / first:.2f}x the first)  {ui.memory_line()}", flush=True)
    print(f"after {args.uploads} uploads: {rss / first:.2f}x the RSS after the first (target <= 1.20)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
