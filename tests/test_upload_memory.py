"""The app's memory under uploads, measured as an operator sees it (the process' resident size): a server that
takes uploads of different files, one replacing another and one per new session, grows by at most twice one parsed
file, and a parsed file is freed when the last session holding it ends.

The rule measured: growth of the resident size over the app's size before any upload <= 2x the parsed frame
(the resident memory parsing the same file takes in a fresh process). One 1M-row upload used to take a
server from 635 to 1,537 MB and each later upload in a fresh tab some 525 MB more, held after every tab closed.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from apptest_utils import APP

pytestmark = pytest.mark.heavy

ROWS = 100_000


def _triples(salt: int) -> bytes:
    """A triples CSV of :data:`ROWS` rows."""
    lines = ["subject,relation,object"] + [f"subject{i % 40_000},relation{i % 19},object{(i * 7 + salt) % 60_000}"
                                           for i in range(ROWS)]
    return ("\n".join(lines) + "\n").encode()


def _parsed_bytes(path) -> int:
    """The resident memory one parsed file takes, as an operator sees it: a fresh process's growth from parsing
    it (modules imported and the file read first)."""
    import subprocess
    import sys

    code = ("import gc, sys; from pathlib import Path; from probekit import memory; "
            "from probekit.datasets import formats; data = Path(sys.argv[1]).read_bytes(); "
            "formats.parse_upload('warm.csv', data[:data.index(b'\\n', 20000) + 1]); gc.collect(); memory.release(); "
            "before = memory.rss_bytes(); ds = formats.parse_upload('u.csv', data); gc.collect(); "
            "print(memory.rss_bytes() - before)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         cwd=str(Path(APP).parent))
    return int(out.stdout.strip().splitlines()[-1])


def _session():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["pk_dataset"] = "__upload__"
    at.run()
    return at


@pytest.mark.timeout(900)
def test_three_uploads_grow_the_server_by_at_most_twice_a_parsed_file(tmp_path):
    from pages import _uploads as uploads
    from probekit import memory

    files = [_triples(salt) for salt in range(4)]
    (tmp_path / "u0.csv").write_bytes(files[0])
    parsed = _parsed_bytes(tmp_path / "u0.csv")
    uploads._UPLOADS.clear()
    at = _session()
    # the first upload of any file also loads what the pages need for a dataset (modules, widgets, the query
    # lists): a small file takes that, so the growth measured is the uploads' own
    small = _triples(99)
    small = small[:small.index(b"\n", 20_000) + 1]
    at.file_uploader(key="pk_upload").upload("warm.csv", small, "text/csv").run()
    assert not at.error, [e.value for e in at.error]
    gc.collect()
    memory.release()
    base = memory.rss_bytes()
    grown = []
    for n, data in enumerate(files[:3]):  # one session, each file replacing the previous one
        at.file_uploader(key="pk_upload").upload(f"u{n}.csv", data, "text/csv").run()
        assert not at.error, [e.value for e in at.error]
        grown.append(memory.rss_bytes() - base)
    held = weakref.ref(at.session_state["_pk_upload"][1])
    assert uploads.parsed_uploads() == 1
    del at  # the session ends (a closed tab, dropped by the server)
    gc.collect()
    assert held() is None and uploads.parsed_uploads() == 0  # freed with the last session holding it
    at = _session()  # a new tab uploads another file
    at.file_uploader(key="pk_upload").upload("u3.csv", files[3], "text/csv").run()
    assert not at.error, [e.value for e in at.error]
    grown.append(memory.rss_bytes() - base)
    mb = [f"{g / 2**20:.0f}" for g in grown]
    print(f"\nparsed file {parsed / 2**20:.0f} MB; growth after each upload {mb} MB")
    assert max(grown) <= 2 * parsed, (parsed, grown)
