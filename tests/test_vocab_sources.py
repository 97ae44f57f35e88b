"""Vocabulary sources: the UMLS MRCONSO/MRSTY reader and plain name lists, on synthetic files."""

from __future__ import annotations

import pytest
from _umls import conso_line, write_umls

from probekit.errors import DataFormatError, ProbekitError, UnknownNameError
from probekit.vocab.sources import SOURCES, Entry, open_source


def rows(source):
    return list(source.rows())


def test_preferred_name_per_cui_keeps_the_cui(tmp_path):
    """One name per concept: MRCONSO's own preferred name (TS=P, STT=PF, ISPREF=Y), English, not suppressible."""
    conso, _ = write_umls(tmp_path)
    got = rows(open_source("umls", conso))
    assert [(e.name, e.cui) for e in got] == [("Myocardial infarction", "C0000001"), ("Aspirin", "C0000002"),
                                              ("Headache", "C0000003"), ("Metformin", "C0000004")]


def test_preferred_falls_back_by_ts_then_stt_then_ispref(tmp_path):
    """With SAB=MSH the PT row is gone: the best kept row on (TS=P, STT=PF, ISPREF=Y) wins, file order on ties."""
    conso, _ = write_umls(tmp_path)
    got = {e.cui: e.name for e in rows(open_source("umls", conso, sab="MSH"))}
    assert got == {"C0000001": "Infarction, Myocardial", "C0000002": "Aspirin", "C0000003": "Cephalalgia",
                   "C0000004": "Metformin"}


def test_all_strings_distinct_per_concept_and_filters(tmp_path):
    conso, _ = write_umls(tmp_path)
    got = rows(open_source("umls", conso, names="all"))
    assert [(e.name, e.cui) for e in got if e.cui == "C0000001"] == [
        ("heart attack", "C0000001"), ("Myocardial infarction", "C0000001"), ("Infarction, Myocardial", "C0000001")]
    assert "ASA - obsolete" not in {e.name for e in got}  # SUPPRESS=O dropped by default
    kept = rows(open_source("umls", conso, names="all", suppress="N,O"))
    assert "ASA - obsolete" in {e.name for e in kept}
    assert {e.name for e in rows(open_source("umls", conso, names="all", tty="PT"))} == {
        "Myocardial infarction", "Headache"}
    assert {e.name for e in rows(open_source("umls", conso, lat="SPA"))} == {"Cefalea"}
    assert {e.name for e in rows(open_source("umls", conso, lat="ENG,FRE", names="all", sab="MSHFRE"))} == {
        "Infarctus du myocarde"}


def test_semantic_types_and_groups_by_merge_join(tmp_path):
    conso, sty = write_umls(tmp_path)
    got = rows(open_source("umls", conso, mrsty=sty, tui="T121"))
    assert [(e.name, e.types) for e in got] == [("Aspirin", "T109|T121"), ("Metformin", "T121")]
    groups = tmp_path / "SemGroups.txt"
    groups.write_text("CHEM|Chemicals & Drugs|T109|Organic Chemical\nCHEM|Chemicals & Drugs|T121|Pharmacologic "
                      "Substance\nDISO|Disorders|T047|Disease or Syndrome\nDISO|Disorders|T184|Sign or Symptom\n")
    diso = rows(open_source("umls", conso, mrsty=sty, groups="DISO", semgroups_file=groups))
    assert [e.cui for e in diso] == ["C0000001", "C0000003"]
    with pytest.raises(UnknownNameError, match="unknown semantic group 'DSIO'; did you mean 'DISO'"):
        rows(open_source("umls", conso, mrsty=sty, groups="DSIO", semgroups_file=groups))
    with pytest.raises(ProbekitError, match="needs MRSTY"):
        open_source("umls", conso, tui="T121")


def test_streaming_holds_one_concept_at_a_time(tmp_path):
    """The reader is a generator: the first concept comes out before a later bad line is read."""
    conso, _ = write_umls(tmp_path)
    with conso.open("a", encoding="utf-8") as fh:
        fh.write("C0000009|ENG|P|broken\n")
    it = open_source("umls", conso).rows()
    assert next(it) == Entry("Myocardial infarction", "C0000001", "")
    with pytest.raises(DataFormatError, match=r"MRCONSO.RRF, line 13: 4 fields"):
        list(it)


def test_bad_input_is_one_line_naming_file_and_line(tmp_path):
    conso, _ = write_umls(tmp_path)
    raw = conso.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "MRCONSO.RRF").write_bytes(b"".join(raw[:3]) + b"C0000001|ENG|\xff\xfe|x" + b"|" * 15 + b"\n")
    with pytest.raises(DataFormatError, match=r"MRCONSO.RRF, line 4: not UTF-8"):
        rows(open_source("umls", bad / "MRCONSO.RRF"))
    (bad / "MRCONSO.RRF").write_text(conso_line(0, ("C0000002", "ENG", "P", "PF", "Y", "MSH", "MH", "b", "N"))
                                     + conso_line(1, ("C0000001", "ENG", "P", "PF", "Y", "MSH", "MH", "a", "N")))
    with pytest.raises(DataFormatError, match=r"line 2: CUI C0000001 after C0000002: the file is not sorted"):
        rows(open_source("umls", bad / "MRCONSO.RRF"))
    with pytest.raises(DataFormatError, match=r"MRCONSO.RRF, line 1: no name is left after the filters"):
        rows(open_source("umls", conso, sab="NOPE"))


def test_name_lists_txt_and_csv(tmp_path):
    txt = tmp_path / "names.txt"
    txt.write_text("\ufeffaspirin\n\n  heart   attack \nAspirin\n")
    assert rows(open_source("names", txt)) == [Entry("aspirin"), Entry("heart attack"), Entry("Aspirin")]
    csv = tmp_path / "names.csv"
    csv.write_text('name,id\naspirin,C0000002\n"heart attack, acute",C0000001\n')
    assert rows(open_source("names", csv)) == [Entry("aspirin", "C0000002"), Entry("heart attack, acute", "C0000001")]
    other = tmp_path / "other.csv"
    other.write_text("term,code\nx,1\ny\n")
    with pytest.raises(DataFormatError, match=r"other.csv, line 1: no column 'name'"):
        rows(open_source("names", other))
    with pytest.raises(DataFormatError, match=r"other.csv, line 3: 1 fields, the header has 2"):
        rows(open_source("names", other, name_column="term", id_column="code"))
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(DataFormatError, match="empty.txt, line 1: no name"):
        rows(open_source("names", empty))


def test_fingerprint_follows_content_and_options(tmp_path):
    conso, _ = write_umls(tmp_path)
    a = open_source("umls", conso).fingerprint()
    assert open_source("umls", conso, sab="MSH").fingerprint() != a
    assert open_source("umls", conso, lat="ENG").fingerprint() == a  # the default, stated or not
    conso.write_text(conso.read_text().replace("Aspirin", "Aspirine"))
    assert open_source("umls", conso).fingerprint() != a


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_every_source_reads_a_file_of_its_kind(kind, tmp_path):
    """Contract: each registered source yields Entry rows from a file it accepts, and refuses an empty one."""
    conso, _ = write_umls(tmp_path)
    path = conso if kind == "umls" else tmp_path / "n.txt"
    if kind != "umls":
        path.write_text("a\nb\n")
    got = rows(open_source(kind, path))
    assert got and all(isinstance(e, Entry) and e.name for e in got)
    empty = tmp_path / "empty.RRF"
    empty.write_text("")
    with pytest.raises(DataFormatError, match="empty.RRF, line 1"):
        rows(open_source(kind, empty))


def test_unknown_source_names_the_close_one(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown vocabulary source 'umsl'; did you mean 'umls'"):
        open_source("umsl", tmp_path)
