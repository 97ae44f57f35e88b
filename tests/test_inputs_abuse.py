"""Inputs under abuse: malformed CSV never loses rows silently, a BOM is
accepted, and parsed uploads are bounded in memory."""

from __future__ import annotations

import pytest

from probekit.datasets import triples
from probekit.errors import DataFormatError

HEADER = "subject,relation,object\n"


def test_unclosed_quote_is_refused_with_file_and_line():
    """An unclosed quote used to turn three rows into one query whose gold was the rest of the file (rc 0)."""
    text = HEADER + 'aspirin,may_treat,"pain\nibuprofen,may_treat,fever\nmetformin,may_treat,diabetes\n'
    with pytest.raises(DataFormatError, match=r"^facts\.csv, line 2: .*quote is probably never closed"):
        triples.parse(text, label="facts.csv")


def test_quote_closed_lines_later_is_refused_too():
    text = HEADER + 'aspirin,may_treat,"pain\nibuprofen,may_treat,fever"\nmetformin,may_treat,diabetes\n'
    with pytest.raises(DataFormatError, match=r"line 2: column 'object' runs over several lines \(to line 3\)"):
        triples.parse(text, label="facts.csv")


def test_extra_fields_are_refused_and_quoted_commas_kept():
    with pytest.raises(DataFormatError, match=r"line 3: 4 fields but the header has 3"):
        triples.parse(HEADER + "a,r,b\nc,r,d,e\n", label="x.csv")
    ds = triples.parse(HEADER + '"aspirin, low dose",may_treat,pain\n', label="x.csv")
    assert ds.queries[0].subject == "aspirin, low dose"


def test_excel_bom_is_accepted(tmp_path):
    """Excel's "CSV UTF-8" starts with a byte-order mark, which used to become part of 'subject'."""
    path = tmp_path / "excel.csv"
    path.write_bytes(("\ufeff" + HEADER + "metformin,may_treat,diabetes\n").encode("utf-8"))
    ds = triples.load(path)
    assert [q.subject for q in ds.queries] == ["metformin"]
    assert len(triples.parse("\ufeff" + HEADER + "a,r,b\n", label="u.csv")) == 1


def test_uploads_are_bounded_by_bytes(monkeypatch):
    """Every distinct upload used to stay parsed for the life of the server (+300 MB per 1M-row file)."""
    uploads = pytest.importorskip("pages._uploads")
    monkeypatch.setattr(uploads, "UPLOADS_MAX_BYTES", 3000)
    uploads._UPLOADS.clear()
    monkeypatch.setattr(uploads.st, "session_state", {})
    for i in range(20):
        data = (HEADER + "".join(f"s{i}_{j},r,o{j}\n" for j in range(60))).encode()
        ds = uploads._parse_upload(f"u{i}.csv", data)
        assert len(ds) == 60
    assert uploads.upload_cache_bytes() <= 3000 and 1 <= len(uploads._UPLOADS) < 20
    again = uploads._parse_upload("u19.csv", (HEADER + "".join(f"s19_{j},r,o{j}\n" for j in range(60))).encode())
    assert again is ds  # the session's own upload is not parsed again
    uploads._UPLOADS.clear()


def test_an_upload_replacing_another_leaves_one_parsed_file_alive(monkeypatch):
    """Each distinct upload stayed parsed while the cache counted only the files' bytes (a parsed file is 15-30
    times its file): one session uploading five files in turn kept five parsed datasets. The session's previous
    upload and the shared one are dropped before the new file is parsed."""
    import gc
    import weakref

    uploads = pytest.importorskip("pages._uploads")
    uploads._UPLOADS.clear()
    monkeypatch.setattr(uploads.st, "session_state", {})
    alive = []
    for i in range(5):
        ds = uploads._parse_upload(f"u{i}.csv", (HEADER + "".join(f"s{i}_{j},r,o{j}\n" for j in range(60))).encode())
        alive.append(weakref.ref(ds))
        del ds
    gc.collect()
    assert [r() is not None for r in alive] == [False] * 4 + [True]
    assert len(uploads._UPLOADS) == 1 and "parsed upload(s) shared" in uploads.memory_line()
    uploads._UPLOADS.clear()


def test_broken_checkpoint_metadata_is_one_clear_line(tmp_path, tiny_encoder_dir, capsys):
    """A damaged probekit_checkpoint.json used to be reported as "a bug in probekit" (rc 1)."""
    import shutil

    from probekit.cli import main

    folder = tmp_path / "ckpt"
    shutil.copytree(tiny_encoder_dir, folder)
    (folder / "probekit_checkpoint.json").write_text("{not json")
    code = main(["probe", "--model", str(folder), "--query", "Metformin might treat [MASK].", "--dataset", "demo"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "probekit_checkpoint.json is unreadable" in err
    assert len(err.strip().splitlines()) == 1


def _refused_in_one_line(capsys, argv: list[str]) -> str:
    from probekit.cli import main

    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


def test_a_names_line_past_the_limit_is_refused_by_both_readers(tmp_path, capsys, tiny_encoder_dir):
    """A names file whose line is longer than any name (a text on one line, a binary) was accepted with rc 0, as a
    vocabulary source and as a corpus index's entity list; both refuse it with the file, line and limit."""
    from probekit.vocab.sources import MAX_NAME_LINE_CHARS as limit

    names = tmp_path / "names.txt"
    names.write_text("aspirin\n" + "x" * (limit + 1) + "\nfever\n", encoding="utf-8")
    line = _refused_in_one_line(capsys, ["vocab", "build", "v", "--source", "names", "--file", str(names), "--model",
                                         str(tiny_encoder_dir), "--quiet"])
    assert line == (f"error: {names}, line 2: a name of {limit + 1:,} characters (limit {limit:,}); "
                    "is this a names file?")
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "n1.txt").write_text("Aspirin lowers fever.")
    line = _refused_in_one_line(capsys, ["corpus", "index", "--corpus", str(docs), "--entities", str(names)])
    assert line == (f"error: names.txt, line 2: a name of {limit + 1:,} characters (limit {limit:,}); "
                    "is this a names file?")
    names.write_text("name,type\naspirin,drug\n" + "y" * limit + ",drug\n", encoding="utf-8")
    names = names.rename(tmp_path / "names.csv")
    line = _refused_in_one_line(capsys, ["corpus", "index", "--corpus", str(docs), "--entities", str(names)])
    assert line.startswith(f"error: names.csv, line 3: a row of {limit + 5:,} characters (limit {limit:,})")


@pytest.mark.parametrize("char", ["x", "é", "\U0001f600"])
def test_the_limit_counts_characters_not_bytes(tmp_path, char):
    """A line of exactly the limit is a name, in any script; one character more is refused, and the message counts
    characters whether the line was cut while reading (far past the limit) or decoded whole."""
    from probekit.corpus import from_file
    from probekit.vocab.sources import MAX_NAME_LINE_CHARS as limit
    from probekit.vocab.sources import open_source

    path = tmp_path / "names.txt"
    path.write_text("aspirin\n" + char * limit + "\n", encoding="utf-8")
    assert [e.name for e in open_source("names", path).rows()] == ["aspirin", char * limit]
    assert from_file(path).keys == ["aspirin"]  # read, then dropped as a corpus entity (past the index's own limit)
    for n in (limit + 1, 3 * limit):
        path.write_text("aspirin\n" + char * n, encoding="utf-8")  # the last line, without a newline
        with pytest.raises(DataFormatError, match=rf"line 2: a name of {n:,} characters \(limit {limit:,}\)"):
            list(open_source("names", path).rows())
        with pytest.raises(DataFormatError, match=rf"line 2: a name of {n:,} characters \(limit {limit:,}\)"):
            from_file(path)


def test_a_32_mib_line_is_refused_without_being_read_whole(tmp_path):
    """The reader holds a few kilobytes of the line and counts the rest in 1 MiB blocks: the refusal of a 32 MiB
    line allocates a fraction of the line (Python's own allocation tracer; reading the line whole would take it
    all)."""
    import tracemalloc

    from probekit.vocab.sources import open_source

    path = tmp_path / "one-line.txt"
    with open(path, "wb") as fh:
        block = b"a" * (1 << 20)
        for _ in range(32):
            fh.write(block)
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match=r"line 1: a name of 33,554,432 characters"):
            list(open_source("names", path).rows())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * (1 << 20), peak


def test_a_stopped_upload_is_not_read_again_until_read_it():
    """The sidebar's rule after a Stop ended an upload's reading: that file is not read again on any rerun (the
    sidebar says it stopped, the page says how to go on, nothing of it is held), until *Read it* is pressed."""
    from apptest_utils import APP
    from streamlit.testing.v1 import AppTest

    from pages import _uploads as uploads
    from pages._sidebar import UPLOAD_READ_KEY, UPLOAD_STOPPED_KEY

    data = (HEADER + "".join(f"drug{j},may_treat,disease{j}\n" for j in range(30))).encode()
    uploads._UPLOADS.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.session_state["pk_dataset"] = "__upload__"
    at.run()
    at.session_state[UPLOAD_STOPPED_KEY] = uploads.upload_key(data)  # what the Stop's rerun records
    at.file_uploader(key="pk_upload").upload("facts.csv", data, "text/csv").run()
    assert any(c.value.startswith("Reading **facts") and "stopped: nothing of it is kept" in c.value
               for c in at.sidebar.caption)
    assert [e.value for e in at.error] == ["Reading facts.csv was stopped: press Read it in the sidebar to read it, "
                                           "or upload another file."]
    assert uploads.parsed_uploads() == 0
    at.sidebar.button(key=UPLOAD_READ_KEY).click().run()
    assert not at.error and UPLOAD_STOPPED_KEY not in at.session_state
    assert uploads.parsed_uploads() == 1 and at.session_state["_pk_upload"][1].name == "upload:facts.csv"
    uploads._UPLOADS.clear()
