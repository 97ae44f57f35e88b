"""Expert processes rating into one database at once, for the store's multi-process tests.

Each rater is its own Python process: it joins the session as its expert, reports "ready", waits until every
rater is ready (so all start together), rates ``n`` items in turn and prints one JSON line: its expert id, the
event ids it was given (acknowledged ratings) and how many ratings were refused (each refusal also on stderr)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from conftest import ROOT

RATER = textwrap.dedent("""
    import json, sys
    from probekit import annotations as ann
    from probekit.store import db
    sid, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    who = ann.join(sid, name)
    items = ann.items_frame(sid).item_id.tolist()
    acked, refused = [], 0
    print("ready", flush=True)
    sys.stdin.readline()  # all start together
    for i in range(n):
        try:
            acked.append(ann.rate(sid, items[i % len(items)], who, 1 + (i + len(name)) % 5))
        except Exception as e:
            refused += 1
            print("refused", type(e).__name__, str(e)[:200], file=sys.stderr, flush=True)
    db.close_all()
    print(json.dumps({"who": who, "acked": acked, "refused": refused}), flush=True)
""")


def run_raters(sid: str, *, processes: int, ratings: int, env: dict, timeout: float = 600) -> list[dict]:
    """Start ``processes`` raters ("expert 0", "expert 1", …) on session ``sid``, let them go together, and return
    each one's report; a rater that exits with an error fails the calling test with its stderr."""
    env = {**env, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", RATER, sid, f"expert {j}", str(ratings)], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for j in range(processes)]
    try:
        for p in procs:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [(p.communicate(timeout=timeout), p.returncode) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    reports = []
    for (out, err), rc in results:
        assert rc == 0, f"a rater exited with {rc}: {err[-2000:]}"
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports
