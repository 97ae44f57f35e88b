"""probekit data fetch / add and probekit models fetch, against a local HTTP server on 127.0.0.1 serving a small
MedLAMA-layout archive built here (the demo set): no test reaches the internet."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import socket
import tarfile
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from probekit import cli, config
from probekit.datasets import fetch, load_dataset
from probekit.errors import ProbekitError

TOP = "medlama-test/data/medlama"


class Server:
    """Serves ``files`` (path -> bytes) with HTTP Range support; ``cut_next`` sends only that many bytes of the
    next response's body (with the full Content-Length) and closes the connection: an interrupted download."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.cut_next: int | None = None
        self.ranges: list[str | None] = []
        self.range_support = True
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                asked = self.headers.get("Range")
                server.ranges.append(asked)
                start = 0
                if asked and server.range_support:
                    start = int(asked.removeprefix("bytes=").split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                self.end_headers()
                if server.cut_next is not None:
                    part, server.cut_next = part[:server.cut_next], None
                    self.wfile.write(part)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(part)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}{path}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBEKIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("PROBEKIT_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("PROBEKIT_MEDLAMA_DIR", "PROBEKIT_BIOLAMA_DIR", "PROBEKIT_CORPORA_DIR"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _archive(root: Path, *, edit=None) -> bytes:
    """A tar.gz holding ``root``'s files under ``TOP`` (plus an unrelated file, as the real archive has)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".csv", ".md")):
            data = path.read_bytes()
            rel = path.relative_to(root).as_posix()
            if edit:
                data = edit(rel, data)
            info = tarfile.TarInfo(f"{TOP}/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        other = b"not part of the dataset\n"
        info = tarfile.TarInfo("medlama-test/README.md")
        info.size = len(other)
        tf.addfile(info, io.BytesIO(other))
    return buf.getvalue()


def _manifest(root: Path) -> dict[str, tuple[int, str]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in root.rglob("*") if p.is_file() and p.suffix in (".csv", ".md")}


@pytest.fixture
def release(server) -> fetch.Release:
    demo = config.demo_dir()
    data = _archive(demo)
    server.files["/medlama.tar.gz"] = data
    return fetch.Release("medlama", server.url("/medlama.tar.gz"), "the test page", TOP, size=len(data),
                         sha256=hashlib.sha256(data).hexdigest(), files=_manifest(demo))


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(code, err) -> str:
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_fetch_resumes_an_interrupted_download_then_loads_and_passes_the_hardness_check(
        capsys, dirs, server, release, monkeypatch):
    monkeypatch.setitem(fetch.RELEASES, "medlama", release)
    server.cut_next = 3000
    code, _, err = _run(capsys, "data", "fetch", "medlama", "--quiet")
    line = _one_error_line(code, err)
    assert "interrupted after 3000 of" in line and "run the same command again to resume" in line
    parts = list((dirs / "cache" / "downloads").glob("*.part"))
    assert len(parts) == 1 and parts[0].stat().st_size == 3000
    assert not (dirs / "data" / "medlama").exists()

    code, out, err = _run(capsys, "data", "fetch", "medlama", "--quiet")
    assert code == 0, err
    assert server.ranges == [None, "bytes=3000-"]  # the second request asked for the rest only
    root = dirs / "data" / "medlama"
    assert out.strip() == str(root)
    assert config.medlama_dir() == root
    fetch.verify_files(root, release.files)
    assert not (root.parent / "README.md").exists() and not list(root.parent.glob(".medlama.*"))
    ds = load_dataset("medlama", which="hard", use_cache=False)
    assert ds.source == str(root) and len(ds.queries) == 107
    assert "107 hard rows checked" in fetch.check_medlama(root)
    # a second fetch finds it in place and downloads nothing
    code, _, err = _run(capsys, "data", "fetch", "medlama")
    assert code == 0 and "already at" in err and len(server.ranges) == 2


def test_a_server_that_ignores_range_restarts_the_download(dirs, server, release):
    server.range_support = False
    server.cut_next = 1000
    with pytest.raises(ProbekitError, match="interrupted after 1000"):
        fetch.fetch(release, progress=False, log=lambda s: None)
    root = fetch.fetch(release, progress=False, log=lambda s: None)
    assert server.ranges == [None, "bytes=1000-"]  # asked to resume, got the whole file (200) and started again
    fetch.verify_files(root, release.files)


def test_bad_archive_checksum_is_refused_with_one_line_and_deleted(capsys, dirs, release, monkeypatch):
    monkeypatch.setitem(fetch.RELEASES, "medlama", replace(release, sha256="0" * 64))
    code, _, err = _run(capsys, "data", "fetch", "medlama", "--quiet")
    line = _one_error_line(code, err)
    assert line.startswith("error: checksum mismatch for http://127.0.0.1:") and "expected SHA-256 000" in line
    assert not list((dirs / "cache" / "downloads").iterdir())  # the next run downloads afresh
    assert not (dirs / "data" / "medlama").exists()


def test_size_other_than_the_release_is_refused(dirs, release):
    with pytest.raises(ProbekitError, match=r"the server offers \d+ bytes, the release has 12"):
        fetch.fetch(replace(release, size=12), progress=False, log=lambda s: None)


def test_a_changed_file_is_refused_and_nothing_is_put_in_place(dirs, server, release):
    def edit(rel, data):
        return data.replace(b"Metformin", b"Metformine") if rel == "2021AA/may_treat_13.csv" else data

    data = _archive(config.demo_dir(), edit=edit)
    server.files["/changed.tar.gz"] = data
    changed = replace(release, url=server.url("/changed.tar.gz"), size=len(data), sha256=None)
    with pytest.raises(ProbekitError, match=r"checksum mismatch for .*may_treat_13\.csv: not the published"):
        fetch.fetch(changed, progress=False, log=lambda s: None)
    assert not (dirs / "data" / "medlama").exists() and not list((dirs / "data").glob(".medlama.*"))


def test_a_hard_set_row_that_is_not_hard_is_refused(tmp_path):
    root = tmp_path / "medlama"
    shutil.copytree(config.demo_dir(), root)
    path = next((root / "2021AA").glob("may_treat_*_hard.csv"))
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    rows[0]["head_name"] = rows[0]["tail_names"]  # the answer is the subject's own name: not hard
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with pytest.raises(ProbekitError, match=r"may_treat_\d+_hard\.csv, line 2: not hard by MedLAMA's rule"):
        fetch.check_medlama(root)


def _biolama_archive() -> bytes:
    """BioLAMA's data.tar.gz layout: data/<subset>/{prompts/manual.jsonl, triples_processed/<PID>/test.jsonl}."""
    files = {}
    for subset, pid, subject, obj in (("ctd", "CD1", "aspirin", "pain"), ("wikidata", "P2176", "metformin",
                                                                         "type 2 diabetes")):
        files[f"data/{subset}/prompts/manual.jsonl"] = json.dumps({"relation": pid, "template": "[X] treats [Y] ."})
        files[f"data/{subset}/triples_processed/{pid}/test.jsonl"] = json.dumps(
            {"predicate_id": pid, "sub_label": subject, "obj_labels": [obj], "obj_aliases": [[]]})
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = (text + "\n").encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_biolama_fetch_registers_the_chosen_subset(dirs, server, monkeypatch):
    server.files["/data.tar.gz"] = _biolama_archive()
    release = replace(fetch.RELEASES["biolama"], url=server.url("/data.tar.gz"))
    root = fetch.fetch(release, subset="wikidata", progress=False, log=lambda s: None)
    assert root == dirs / "data" / "biolama" / "wikidata" == config.biolama_dir()
    ds = load_dataset("biolama", use_cache=False)
    assert [q.subject for q in ds.queries] == ["metformin"]
    with pytest.raises(ProbekitError, match="unknown biolama subset 'umls'; available: ctd, wikidata"):
        fetch.fetch(release, subset="umls", progress=False, log=lambda s: None)
    assert server.ranges == [None]  # refused before any download


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_offline_is_one_line_that_says_what_to_do(capsys, dirs, release, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}/medlama.tar.gz"
    monkeypatch.setitem(fetch.RELEASES, "medlama", replace(release, url=url, page="the MedLAMA page"))
    code, _, err = _run(capsys, "data", "fetch", "medlama", "--quiet")
    line = _one_error_line(code, err)
    assert line.startswith("error: no network (")
    assert line.endswith("download the MedLAMA page on a machine with internet and run "
                         "`probekit data add medlama PATH`")


def test_add_registers_a_local_copy_and_the_variable_still_wins(capsys, dirs, tmp_path, monkeypatch):
    copy = tmp_path / "elsewhere" / "medlama"
    shutil.copytree(config.demo_dir(), copy)
    code, out, err = _run(capsys, "data", "add", "medlama", str(copy))
    assert code == 0, err
    assert out.startswith(f"registered medlama: {copy.resolve()}")
    assert config.medlama_dir() == copy.resolve()
    assert load_dataset("medlama", use_cache=False).source == str(copy.resolve())
    monkeypatch.setenv("PROBEKIT_MEDLAMA_DIR", str(tmp_path / "other"))
    assert config.medlama_dir() == tmp_path / "other"


def test_add_refuses_a_folder_that_is_not_the_dataset(capsys, dirs, tmp_path):
    (tmp_path / "empty").mkdir()
    code, _, err = _run(capsys, "data", "add", "medlama", str(tmp_path / "empty"))
    assert "MedLAMA folder" in _one_error_line(code, err)
    assert config.registered_datasets() == {}


def test_add_of_a_file_says_it_is_a_file(capsys, dirs, tmp_path):
    """A downloaded archive or one CSV given where the release folder belongs is named as a file, not as a
    missing folder."""
    archive = tmp_path / "medlama.zip"
    archive.write_bytes(b"PK")
    code, _, err = _run(capsys, "data", "add", "medlama", str(archive))
    line = _one_error_line(code, err)
    assert "is a file" in line and "no such folder" not in line
    assert config.registered_datasets() == {}


def test_the_pinned_manifest_describes_the_shared_medlama_copy():
    shared = Path(os.environ.get("PROBEKIT_MEDLAMA_DIR") or config.ROOT.parent / "shared" / "data"
                  / "medlama")
    if not (shared / "2021AA").is_dir():
        pytest.skip(f"no MedLAMA copy at {shared}")
    fetch.verify_files(shared, fetch.RELEASES["medlama"].files)
    assert len(fetch.RELEASES["medlama"].files) == 39  # prompts.csv and 19 relations x (full, hard)


# ---------------------------------------------------------------- models fetch (the hub mocked)

@pytest.fixture
def online(monkeypatch):
    monkeypatch.delenv("PROBEKIT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


def test_models_fetch_wraps_snapshot_download(capsys, online, monkeypatch, tmp_path):
    import huggingface_hub

    calls = []

    def fake(repo_id, **kw):
        calls.append((repo_id, kw))
        return str(tmp_path / "snap")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    code, out, err = _run(capsys, "models", "fetch", "dmis-lab/biobert-v1.1", "--quiet")
    assert code == 0, err
    assert out.strip() == f"dmis-lab/biobert-v1.1: {tmp_path / 'snap'}"
    assert calls[0][0] == "dmis-lab/biobert-v1.1" and calls[0][1]["local_dir"] is None


def test_models_fetch_offline_is_one_line(capsys, online, monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError

    def fake(repo_id, **kw):
        raise LocalEntryNotFoundError("cannot reach the hub")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    code, _, err = _run(capsys, "models", "fetch", "dmis-lab/biobert-v1.1", "--quiet")
    line = _one_error_line(code, err)
    assert line.startswith("error: no network (LocalEntryNotFoundError): download dmis-lab/biobert-v1.1 on a "
                           "machine with internet")


def test_models_fetch_in_offline_mode_does_not_call_the_hub(capsys, monkeypatch):
    import huggingface_hub

    monkeypatch.setenv("PROBEKIT_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: pytest.fail("the hub was called"))
    code, _, err = _run(capsys, "models", "fetch", "t5-small")
    assert "no network (offline mode" in _one_error_line(code, err)


@pytest.mark.slow
def test_the_real_medlama_release_definition_fetches_the_shared_copy(capsys, dirs, server, monkeypatch):
    """The shipped release (archive folder, 39 pinned files, checks) against an archive laid out as GitHub's
    archive of the pinned commit, made from the shared copy and served by the test server via --url."""
    shared = Path(os.environ.get("PROBEKIT_MEDLAMA_DIR") or config.ROOT.parent / "shared" / "data" / "medlama")
    if not (shared / "2021AA").is_dir():
        pytest.skip(f"no MedLAMA copy at {shared}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(shared, arcname=fetch.RELEASES["medlama"].member)
    server.files["/medlama.tar.gz"] = buf.getvalue()
    code, out, err = _run(capsys, "data", "fetch", "medlama", "--quiet", "--url", server.url("/medlama.tar.gz"))
    assert code == 0, err
    assert out.strip() == str(dirs / "data" / "medlama") == str(config.medlama_dir())
    assert len(load_dataset("medlama", use_cache=False).queries) == 19000


def test_models_fetch_against_an_unreachable_hub_is_one_line(tmp_path):
    """The real client in a fresh process, its endpoint a closed local port: the offline line, no traceback."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("PROBEKIT_OFFLINE", "HF_HUB_OFFLINE")}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{_closed_port()}", HF_HOME=str(tmp_path / "hf"),
               PROBEKIT_DATA_DIR=str(tmp_path / "data"))
    res = subprocess.run([sys.executable, "-m", "probekit", "models", "fetch", "dmis-lab/biobert-v1.1", "--quiet"],
                         cwd=config.ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2, res.stderr
    assert res.stderr.startswith("error: no network (") and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "download dmis-lab/biobert-v1.1 on a machine with internet" in res.stderr
