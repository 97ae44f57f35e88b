"""An expert typing while the server's disk is full: the Annotate page says "not saved — disk full", the browser
keeps the presses and sends them again, and once space is freed every press is applied exactly once. Headless
Chromium on the real Annotate page (``streamlit run serve.py``), the server's database on a small tmpfs of its
own (a mount namespace, as in tests/test_disk_full.py), filled and freed by the test through ``/proc/PID/root``.

The case that went wrong: the page showed only "sending 14 keys…", and after space was freed one U was lost. DuckDB
reports a full disk on commit as a ``TransactionException`` (retried as a write conflict, then "busy", and the
press was stored as handled when a later try succeeded), and a connection whose commit failed answered ``max()``
wrongly, so the re-sent U's number was found "stored" and the U skipped. The rule checked: the listener and the
page say "not saved — disk full" while presses wait; after freeing, the stored events are exactly the keys typed,
in order (rates, undos, the skip), each once, and every stored rating is the one typed last for its answer.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("playwright", reason="playwright is not installed")
from test_annotations import rankings  # noqa: E402
from test_browser import ROOT, Budget, _free_port, launch, no_console_errors  # noqa: E402, F401
from test_browser_keys import wait_listening, wait_text  # noqa: E402
from test_disk_full import fill, on_small_disk  # noqa: E402

from probekit import annotations as ann  # noqa: E402
from probekit import store  # noqa: E402

pytestmark = pytest.mark.browser
K = 5
BEFORE = ["5", "4"]
ON_FULL_DISK = ["u", "3", "2", "1", "u", "4", "5", "Enter", "1", "2", "u", "3", "s", "4"]  # 14 keys


def expected() -> tuple[list[tuple[str, int | None]], list[int | None]]:
    """The events the keys must produce (kind, score) and each answer's final score, in display order (None:
    skipped or not rated)."""
    events: list[tuple[str, int | None]] = []
    scores: dict[int, int | None] = {}
    answer = 0
    done: list[int] = []
    for key in BEFORE + ON_FULL_DISK:
        if key == "u":
            last = done.pop()
            events.append(("undo", None))
            scores.pop(last)
            answer = last
        elif key == "Enter":
            answer = K
        else:
            events.append(("skip", None) if key == "s" else ("rate", int(key)))
            scores[answer] = None if key == "s" else int(key)
            done.append(answer)
            answer += 1
    return events, [scores.get(i) for i in range(2 * K)]


@contextmanager
def holding(folder: Path, budget: Budget):
    """The database's lock file, taken as every probekit store takes it (an exclusive ``flock``): once held, the
    server has closed the database (checkpointed: its write-ahead log gone), and it cannot open it again until
    this block ends."""
    fd = os.open(folder / "probekit.duckdb.lock", os.O_RDWR)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if budget.ms() <= 1000:
                    raise AssertionError("the server never closed its database") from None
                time.sleep(0.1)  # the server closes it after a second unused: the state waited on
        yield
    finally:
        os.close(fd)


def start(disk: Path, env: dict, log_path: Path, budget: Budget) -> tuple[subprocess.Popen, str]:
    """``streamlit run serve.py`` in a mount namespace with a 32 MB tmpfs at ``disk``, once healthy."""
    port = _free_port()
    with open(log_path, "w") as log:
        proc = on_small_disk(disk, 32, [sys.executable, "-m", "streamlit", "run", str(ROOT / "serve.py"),
                                        "--server.port", str(port), "--server.address", "127.0.0.1",
                                        "--server.headless", "true", "--server.fileWatcherType", "none",
                                        "--browser.gatherUsageStats", "false"],
                             env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            pytest.fail(f"streamlit exited: {log_path.read_text()[-2000:]}")
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return proc, url
        except OSError:
            if budget.ms() <= 1000:
                proc.kill()
                pytest.fail(f"streamlit did not start: {log_path.read_text()[-2000:]}")
            time.sleep(0.3)  # polling the health endpoint, not timing the app


@pytest.mark.heavy
@pytest.mark.timeout(420)
def test_presses_on_a_full_disk_say_not_saved_and_are_applied_once_when_space_returns(tmp_path, monkeypatch):
    from playwright.sync_api import sync_playwright

    budget = Budget(360)
    sid = ann.from_rankings(rankings(2, k=K), name="full disk", k=K)
    token = ann.issue_token(sid, "Ada")
    who = ann.verify_token(token, session_id=sid).annotator
    order = [a["item_id"] for q in range(2) for a in ann.query_view(sid, who, q)["answers"]]
    store.close_all()  # the server owns the database file from now on
    source = Path(os.environ["PROBEKIT_DB"])
    disk = tmp_path / "disk"
    env = {**os.environ, "PROBEKIT_DB": str(disk / "probekit.duckdb"), "PROBEKIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PROBEKIT_ORGANISER_TOKEN", None)
    proc, url = start(disk, env, tmp_path / "server.log", budget)
    there = Path(f"/proc/{proc.pid}/root") / disk.relative_to("/")  # the server's tmpfs, from this process
    after = tmp_path / "after.duckdb"
    try:
        shutil.copyfile(source, there / "probekit.duckdb")  # before any page opens it
        for name in ("organiser-token",):
            if (source.parent / name).exists():
                shutil.copyfile(source.parent / name, there / name)
        with sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            page.set_default_timeout(budget.ms())
            page.goto(f"{url}/annotate?session={sid}&token={token}")
            wait_text(page, f"0/{2 * K} answers", budget)
            wait_listening(page, budget)
            for key in BEFORE:
                page.keyboard.press(key)
            wait_text(page, f"{len(BEFORE)}/{2 * K} answers", budget)
            wait_listening(page, budget, idle=True)
            with holding(there, budget):  # the disk fills up while the server has the database closed
                filler = fill(there)
            for key in ON_FULL_DISK:
                page.keyboard.press(key)
                page.wait_for_timeout(60)  # pacing the typing
            status = page.get_by_text("14 keys not saved — disk full")  # the listener's line (a shadow root)
            status.first.wait_for(timeout=budget.ms())
            wait_text(page, "Not saved — disk full", budget)  # the page's own message
            assert page.evaluate("window.__probekitKeys.queue.length") == len(ON_FULL_DISK)  # all kept
            filler.unlink()  # space again: the presses kept are sent again and stored
            wait_listening(page, budget, idle=True)
            wait_text(page, f"9/{2 * K} answers · 1/2 queries", budget)
            assert "Not saved" not in page.inner_text("body")
            assert page.evaluate("window.__probekitKeys.seq") == len(BEFORE) + len(ON_FULL_DISK)
            browser.close()
        with holding(there, budget):  # a consistent copy: the server has the file closed meanwhile
            shutil.copyfile(there / "probekit.duckdb", after)
            if (there / "probekit.duckdb.wal").exists():
                shutil.copyfile(there / "probekit.duckdb.wal", f"{after}.wal")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    monkeypatch.setenv("PROBEKIT_DB", str(after))
    store.close_all()
    events, final = expected()
    frame = ann.events_frame(sid)
    got = [(k, None if pd.isna(s) else int(s)) for k, s in zip(frame.kind, frame.score)]
    assert got == events  # each press once, in the order typed: no U lost, nothing doubled
    answers = ann.query_view(sid, who, 0)["answers"] + ann.query_view(sid, who, 1)["answers"]
    by_item = {a["item_id"]: a["score"] for a in answers}
    assert [by_item[i] for i in order] == final  # every stored rating is the one typed last
