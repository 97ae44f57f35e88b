"""The mention index: built once and reused, streamed in batches, never stale, never half-written."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from probekit.corpus import (
    CorpusChangedError,
    build,
    build_index,
    find_index,
    from_file,
    from_names,
    index,
    list_indexes,
    open_index,
    open_source,
    sweep_incomplete,
)
from probekit.errors import ProbekitError

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["heart failure", "heart", "fever", "aspirin"]


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Heart failure with fever. Aspirin was given.\n\nThe heart recovered.")
    (folder / "b.txt").write_text("No mention here. Fever again!")
    return folder


def mentions(idx):
    return idx.sql("SELECT doc_id, sent, entity_id, start, \"end\" FROM mentions ORDER BY doc_id, start")


def test_build_once_then_reuse(corpus, monkeypatch):
    src, ents = open_source(corpus), from_names(NAMES)
    idx = build_index(src, ents)
    assert idx.counts["documents"] == 2 and idx.counts["sentences"] == 5 and idx.counts["mentions"] == 5
    assert find_index(src, ents).fingerprint == idx.fingerprint

    def boom(*a, **k):
        raise AssertionError("rebuilt")

    monkeypatch.setattr(build.match, "Matcher", boom)
    assert build_index(src, ents).fingerprint == idx.fingerprint  # reused, not rebuilt
    assert [e["status"] for e in list_indexes()] == ["ok"]


def test_small_batches_give_the_same_index(corpus):
    """Streaming: the corpus goes through in batches (one row group each); batch size never changes results."""
    src, ents = open_source(corpus), from_names(NAMES)
    whole = mentions(build_index(src, ents))
    tiny = mentions(build_index(src, ents, force=True, batch_chars=10))
    assert tiny == whole and len(whole) == 5


def test_changed_corpus_is_reported_never_used_stale(corpus):
    """The rule: "a corpus that changes after indexing (fingerprint mismatch -> re-index offered, never silently
    stale)"."""
    src, ents = open_source(corpus), from_names(NAMES)
    old = build_index(src, ents)
    (corpus / "b.txt").write_text("No mention here. Fever again! And aspirin.")
    with pytest.raises(CorpusChangedError, match=r"corpus 'docs' changed since it was indexed \(b.txt size 29 -> 42"):
        find_index(open_source(corpus), ents)
    with pytest.raises(CorpusChangedError, match="re-index"):
        open_index(old.fingerprint)
    assert list_indexes()[0]["status"].startswith("stale: b.txt size")
    new = build_index(open_source(corpus), ents)
    assert new.fingerprint != old.fingerprint and new.counts["mentions"] == 6
    assert sorted(e["status"][:5] for e in list_indexes()) == ["ok", "stale"]


def test_same_size_edit_with_the_old_mtime_is_still_caught(corpus):
    src, ents = open_source(corpus), from_names(NAMES)
    idx = build_index(src, ents)
    f = corpus / "b.txt"
    st = f.stat()
    f.write_text("No mention here. Pever again!")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert idx.changes() == ["b.txt content changed"]
    (corpus / "c.txt").write_text("new file")
    assert "c.txt added" in idx.changes()


def test_entities_from_uploaded_lists(tmp_path, corpus):
    (tmp_path / "names.txt").write_text("Heart failure\nFEVER\n\n")
    assert from_file(tmp_path / "names.txt").keys == ["heart failure", "fever"]
    (tmp_path / "names.csv").write_text("name,type\nAspirin,drug\nfever,symptom\n")
    ents = from_file(tmp_path / "names.csv")
    assert ents.keys == ["aspirin", "fever"] and ents.roles == {(0, "drug", "type"), (1, "symptom", "type")}
    idx = build_index(open_source(corpus), ents)
    from probekit.corpus import sentences_mentioning

    rows = sentences_mentioning(idx, relation="symptom", role="type")
    assert [(r["entity"], r["text"][r["start"]:r["end"]]) for r in rows] == [("fever", "fever"), ("fever", "Fever")]
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ProbekitError, match="no entity names"):
        from_file(tmp_path / "empty.txt")


CHILD = """
import sys, time
sys.path.insert(0, {root!r})
from probekit.corpus import build_index, from_names, open_source
from probekit.corpus import build as ix

mode, folder = sys.argv[1], sys.argv[2]
src, ents = open_source(folder), from_names(["heart failure", "fever"])

def hang(*args, **kwargs):
    print("ready", flush=True)
    time.sleep(120)

if mode == "publish":  # everything written, manifest included, only the final rename missing
    ix._publish = hang
    build_index(src, ents)
else:  # killed between two batches, Parquet files half written
    build_index(src, ents, batch_chars=50, progress=lambda done, total, stage: done and hang())
"""


@pytest.mark.parametrize("mode", ["batches", "publish"])
def test_sigkill_mid_index_leaves_nothing_that_reads_as_complete(tmp_path, mode):
    """The rule: "Indexing interrupted (SIGKILL) leaves no half-index that later reads as complete." The brief:
    the manifest is written last and the folder appears by one rename."""
    folder = tmp_path / "big"
    folder.mkdir()
    for i in range(20):
        (folder / f"{i:02d}.txt").write_text("Heart failure and fever. " * 20)
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD.format(root=str(ROOT))))
    proc = subprocess.Popen([sys.executable, str(script), mode, str(folder)], stdout=subprocess.PIPE,
                            env=os.environ.copy(), text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        partial = [p for p in index.root_dir().iterdir() if p.name.startswith(".tmp-")]
        assert len(partial) == 1 and (partial[0] / "mentions.parquet").exists()
        if mode == "publish":
            assert (partial[0] / "manifest.json").exists()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    src, ents = open_source(folder), from_names(["heart failure", "fever"])
    assert find_index(src, ents) is None
    assert [e["status"] for e in list_indexes()] == ["incomplete (interrupted build)"]
    with pytest.raises(ProbekitError, match="no corpus index"):
        open_index(index.fingerprint(src, ents))
    assert len(sweep_incomplete()) == 1 and list_indexes() == []
    started = time.time()
    idx = build_index(src, ents)
    assert idx.counts["mentions"] == 800 and time.time() - started < 60


def test_cancel_through_a_job_keeps_nothing(corpus):
    """The Corpora page runs the build as a probekit.jobs.Job: Cancel stops it between batches, removes the
    partial files, and the job reads 'cancelled'."""
    from probekit.jobs import Job

    src, ents = open_source(corpus), from_names(NAMES)
    job = None

    def progress(done, total, stage):
        job.progress(done, total, stage)
        if done:
            job.cancel()  # the user presses Cancel after the first batch

    job = Job(lambda _progress, should_cancel: build_index(src, ents, progress=progress, should_cancel=should_cancel,
                                                           batch_chars=10), label="corpus index")
    job.start()
    assert job.wait(60)
    assert job.status == "cancelled" and "nothing was kept" in job.error, (job.status, job.error)
    assert list_indexes() == [] and not any(index.root_dir().iterdir())
