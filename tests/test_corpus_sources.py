"""Corpus sources: every kind streams its documents; bad inputs name the file (and byte offset)."""

import json

import pytest

from probekit.corpus import open_source, read_documents, sources
from probekit.errors import DataFormatError, ProbekitError


def docs(src):
    return [(d.file, d.key, d.text) for d in read_documents(src)]


def test_lines_kind_skips_blank_lines_handles_bom_and_crlf(tmp_path):
    f = tmp_path / "c.txt"
    f.write_bytes(b"\xef\xbb\xbfFirst line \r\n\r\n  second line\nthird")
    assert docs(open_source(f, kind="lines")) == [("c.txt", "1", "First line"), ("c.txt", "3", "second line"),
                                                  ("c.txt", "4", "third")]


def test_txt_folder_one_document_per_file(tmp_path):
    (tmp_path / "b.txt").write_text("Second doc.\n\nWith a paragraph.")
    (tmp_path / "a.txt").write_text("First doc.")
    (tmp_path / "notes.md").write_text("ignored")
    assert docs(open_source(tmp_path)) == [("a.txt", "a", "First doc."),
                                           ("b.txt", "b", "Second doc.\n\nWith a paragraph.")]


def test_jsonl_ids_and_errors(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"id": "n1", "text": "Aspirin helps."}) + "\n\n" + json.dumps({"text": "No id."}) + "\n")
    assert docs(open_source(f)) == [("c.jsonl", "n1", "Aspirin helps."), ("c.jsonl", "3", "No id.")]
    f.write_text('{"id": 1, "text": "ok"}\n{"id": 2, "txt": "bad"}\n')
    with pytest.raises(DataFormatError, match=r"c.jsonl, line 2: expected an object with a 'text' field"):
        docs(open_source(f))
    f.write_text('{"id": 1, "text": "ok"}\nnot json\n')
    with pytest.raises(DataFormatError, match=r"line 2: not JSON"):
        docs(open_source(f))


def test_csv_like_mimic_noteevents(tmp_path):
    f = tmp_path / "NOTEEVENTS.csv"
    f.write_text('ROW_ID,SUBJECT_ID,CATEGORY,TEXT\n'
                 '174,22532,Discharge summary,"Admission Date: [**2151-7-16**]\n\nHistory: chest pain, ""SOB"".\n"\n'
                 '175,13702,Nursing,""\n'
                 '176,13702,Nursing,Pt stable.\n')
    got = docs(open_source(f, text_column="TEXT"))
    assert got == [("NOTEEVENTS.csv", "174", 'Admission Date: [**2151-7-16**]\n\nHistory: chest pain, "SOB".\n'),
                   ("NOTEEVENTS.csv", "176", "Pt stable.")]
    with pytest.raises(DataFormatError, match=r"NOTEEVENTS.csv: no column 'NOTE' \(columns: ROW_ID, SUBJECT_ID, "
                                              r"CATEGORY, TEXT\)"):
        docs(open_source(f, text_column="NOTE"))


def test_csv_without_the_default_text_column(tmp_path):
    f = tmp_path / "notes.csv"
    f.write_text("id,body\n1,hello\n")
    with pytest.raises(DataFormatError, match="no column 'text'"):
        docs(open_source(f))


def test_binary_file_reports_offset(tmp_path):
    f = tmp_path / "img.txt"
    f.write_bytes(b"GIF89a" + b"\x00\x01\x02")
    with pytest.raises(DataFormatError, match=r"img.txt: binary file \(NUL byte at byte offset 6\)"):
        docs(open_source(f, kind="lines"))


def test_wrong_encoding_reports_byte_offset_across_blocks(tmp_path):
    f = tmp_path / "latin.txt"
    head = b"fine line\n" * ((sources.BLOCK + 200_000) // 10)
    f.write_bytes(head + "caf\u00e9 au lait\n".encode("latin-1"))
    with pytest.raises(DataFormatError) as err:
        docs(open_source(f, kind="lines"))
    assert str(err.value) == (f"latin.txt: not UTF-8 at byte offset {len(head) + 3} (byte 0xe9); "
                              "convert the file to UTF-8")
    g = tmp_path / "folder"
    g.mkdir()
    (g / "x.txt").write_bytes(b"ok \xff")
    with pytest.raises(DataFormatError, match=r"x.txt: not UTF-8 at byte offset 3 \(byte 0xff\)"):
        docs(open_source(g))


def test_empty_corpora(tmp_path):
    with pytest.raises(ProbekitError, match="empty corpus: no .txt files"):
        open_source(tmp_path)
    (tmp_path / "a.txt").write_text("  \n\n")
    with pytest.raises(ProbekitError, match=r"empty corpus: .* holds no text"):
        docs(open_source(tmp_path))
    with pytest.raises(ProbekitError, match="no corpus at"):
        open_source(tmp_path / "missing")
    with pytest.raises(ProbekitError, match="unknown corpus kind 'pdf'"):
        open_source(tmp_path, kind="pdf")


def test_elicit_default_is_lines(monkeypatch, tmp_path):
    (tmp_path / "pubmed_sents_no_punkt_10k_0").write_text("a sentence \nanother \n")
    monkeypatch.setenv("PROBEKIT_CORPORA_DIR", str(tmp_path))
    src = open_source("elicit")
    assert (src.kind, src.name) == ("lines", "elicit")
    assert [d.text for d in read_documents(src)] == ["a sentence", "another"]


def _notes(n: int, stray: dict[int, str]) -> str:
    return "id,text\n" + "".join(f"{i},{stray.get(i, f'note {i} is fine')}\n" for i in range(1, n + 1))


def test_csv_stray_quote_is_refused_with_file_and_line_never_merged(tmp_path):
    """A 1,000-row notes file with one stray quote used to index as 999 documents, silently (a quote left open
    ran to the end of the file and swallowed the next row)."""
    f = tmp_path / "notes.csv"
    f.write_text(_notes(1000, {999: '"stray quote opens here'}))
    with pytest.raises(DataFormatError, match=r"^notes\.csv, line 1000: malformed CSV .*quote is probably never"):
        docs(open_source(f))
    # a stray opening quote closed by a later quoted field: the closing quote is followed by text
    f.write_text(_notes(1000, {10: '"stray', 20: '"quoted" word'}))
    with pytest.raises(DataFormatError, match=r"^notes\.csv, line 11: malformed CSV"):
        docs(open_source(f))
    f.write_text(_notes(1000, {}))
    assert len(docs(open_source(f))) == 1000


def test_csv_extra_fields_are_refused_and_quoted_commas_kept(tmp_path):
    f = tmp_path / "notes.csv"
    f.write_text('id,text\n1,"fever, cough"\n2,fever, cough\n')
    with pytest.raises(DataFormatError, match=r"^notes\.csv, line 3: 3 fields but the header has 2"):
        docs(open_source(f))
    f.write_text('id,text\n1,"fever, cough"\n')
    assert docs(open_source(f)) == [("notes.csv", "1", "fever, cough")]
