"""The dataset registry's contract, over every entry of :data:`probekit.datasets.FORMATS` (a new format is checked
here with no change to this file): a one-line description; a file format loads and uploads its own example (queries
whose templates have [Y]) and refuses a malformed file with one line; a folder dataset refuses a folder without its
data with one line; an unknown name gets the close ones. Then the whole path of a throwaway format: registered, it
is in the ``--dataset`` help, the pickers (when its data is here) and the app's upload, and loads by name."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from probekit.cli.common import add_dataset_args
from probekit.datasets import AUTO, FORMATS, DatasetFormat, available_datasets, load_dataset, register, unregister
from probekit.datasets import formats as F
from probekit.errors import ProbekitError, UnknownNameError
from probekit.types import MASK, OBJECT

NAMES = list(FORMATS)
FILE_FORMATS = [n for n in NAMES if FORMATS[n].suffixes]
FOLDER_FORMATS = [n for n in NAMES if FORMATS[n].location is not None]
BROKEN = {"csv": 'x,"never closed\n', "jsonl": "{not json\n"}
"""A record that no CSV or JSONL reader takes, appended to a format's example."""


def one_line(error: BaseException) -> str:
    text = str(error)
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


@pytest.mark.parametrize("name", NAMES)
def test_every_dataset_has_a_one_line_description(name):
    fmt = FORMATS[name]
    assert fmt.name == name and fmt.description.strip() and "\n" not in fmt.description
    assert fmt.needs_file or fmt.sets or fmt.picks or fmt.location is not None


@pytest.mark.parametrize("name", FILE_FORMATS)
def test_a_file_format_loads_its_example(name, tmp_path):
    fmt = FORMATS[name]
    path = tmp_path / f"example{fmt.suffixes[0]}"
    path.write_text(fmt.example, encoding="utf-8")
    for ds in (fmt.load(path), load_dataset(name, path=path, use_cache=False)):
        assert len(ds) >= 1 and all(OBJECT in q.template and MASK not in q.template for q in ds.queries)
        assert all(q.golds for q in ds.queries)
        assert len(ds.candidates().names) >= 1


@pytest.mark.parametrize("name", [n for n in FILE_FORMATS if FORMATS[n].uploadable])
def test_an_upload_of_the_example_is_told_and_read_as_its_format(name):
    fmt = FORMATS[name]
    filename = f"example{fmt.suffixes[0]}"
    data = fmt.example.encode()
    assert F.detect(filename, fmt.example) is fmt
    for choice in (AUTO, name):
        ds = F.parse_upload(filename, data, fmt=choice)
        assert ds.name == f"upload:{filename}" and all(OBJECT in q.template for q in ds.queries)
    assert name in dict(F.upload_choices()) and fmt.suffixes[0][1:] in F.upload_suffixes()


@pytest.mark.parametrize("name", FILE_FORMATS)
def test_a_malformed_file_is_one_line_naming_the_file_and_line(name, tmp_path):
    fmt = FORMATS[name]
    path = tmp_path / f"bad{fmt.suffixes[0]}"
    text = fmt.example + BROKEN[F.text_format(path.name)]
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ProbekitError) as e:
        load_dataset(name, path=path, use_cache=False)
    assert str(path) in one_line(e.value) and f"line {len(text.splitlines())}" in str(e.value)
    if fmt.uploadable:
        with pytest.raises(ProbekitError) as e:
            F.parse_upload(path.name, text.encode(), fmt=name)
        assert path.name in one_line(e.value) and "line" in str(e.value)
    with pytest.raises(ProbekitError) as e:  # no file where one is wanted
        load_dataset(name, path=tmp_path / f"missing{fmt.suffixes[0]}", use_cache=False)
    one_line(e.value)


@pytest.mark.parametrize("name", [n for n in NAMES if FORMATS[n].needs_file])
def test_a_file_format_without_a_file_says_so(name):
    with pytest.raises(ProbekitError, match=f"dataset '{name}' needs a file") as e:
        load_dataset(name)
    one_line(e.value)


@pytest.mark.parametrize("name", NAMES)
def test_a_folder_without_the_data_is_one_line(name, tmp_path):
    """An empty folder given as the data (a wrong --data-dir, a folder given for a file): one line."""
    with pytest.raises(ProbekitError) as e:
        load_dataset(name, path=tmp_path, use_cache=False)
    one_line(e.value)


@pytest.mark.parametrize("name", FOLDER_FORMATS)
def test_a_folder_dataset_lists_specs_it_loads(name):
    """What a picker lists (when the data is here) names this dataset and one of its sets."""
    fmt = FORMATS[name]
    for spec, label in fmt.here():
        base, _, which = spec.partition(":")
        assert base == name and label and (not which or which in fmt.sets)
        assert (spec, label) in available_datasets()


@pytest.mark.parametrize("name", NAMES)
def test_a_misspelt_name_gets_the_close_ones(name):
    with pytest.raises(UnknownNameError) as e:
        load_dataset(name + "z")
    assert f"unknown dataset '{name}z'; did you mean" in one_line(e.value) and repr(name) in str(e.value)
    assert "available: " in str(e.value)


def test_registration_refuses_an_entry_the_surfaces_could_not_show():
    load = FORMATS["triples"].load
    for bad, why in ((DatasetFormat("x", "", load, file_hint="f"), "description"),
                     (DatasetFormat("x", "two\nlines", load, file_hint="f"), "description"),
                     (DatasetFormat("x:y", "d", load, file_hint="f"), "':'"),
                     (DatasetFormat("x", "d", load), "file_hint"),
                     (DatasetFormat("x", "d", load, file_hint="f", suffixes=(".csv",)), "example"),
                     (DatasetFormat("x", "d", load, file_hint="f", suffixes=("csv",), example="a"), "suffix")):
        with pytest.raises(ProbekitError, match=why):
            register(bad)
    with pytest.raises(ProbekitError, match="another name"):
        FORMATS["y"] = DatasetFormat("x", "d", load, file_hint="f")
    # an upload format whose parse cannot report progress: the app could not show, nor stop, a long read
    with pytest.raises(ProbekitError, match="progress="):
        register(DatasetFormat("x", "d", load, file_hint="f", suffixes=(".csv",), example="a",
                               parse=lambda text, *, label, fmt, name, version: None))
    assert "x" not in FORMATS and "y" not in FORMATS


@pytest.mark.parametrize("name", [f.name for f in F.upload_formats()])
def test_every_upload_format_reports_its_reading(name, monkeypatch):
    """The rule: every :data:`~probekit.datasets.records.PROGRESS_EVERY` records a report (line, lines, "reading FILE"),
    lines never going back, and a last one at the end of the file; the dataset read is the same with reports."""
    from probekit.datasets import records

    monkeypatch.setattr(records, "PROGRESS_EVERY", 2)
    fmt = FORMATS[name]
    one = fmt.example.strip("\n").split("\n")
    header, rows = (one[:1], one[1:]) if fmt.suffixes[0] == ".csv" else ([], one)
    text = "\n".join(header + rows * 3) + "\n"
    label = "x" + fmt.suffixes[0]
    seen: list[tuple[int, int, str]] = []
    kind = F.text_format(label)
    got = fmt.parse(text, label=label, fmt=kind, name="x", version="v", progress=lambda *a: seen.append(a))
    lines = text.count("\n")
    assert seen[-1] == (lines, lines, f"reading {label}")
    assert len(seen) == 1 + (3 * len(rows)) // 2
    assert [s[0] for s in seen] == sorted(s[0] for s in seen) and all(s[1] == lines for s in seen)
    assert got == fmt.parse(text, label=label, fmt=kind, name="x", version="v")


# ---------------------------------------------------------------- a new format: one registration, every surface
def _parse_facts(text, *, label="<upload>", fmt="jsonl", name="facts", version="", progress=None):
    """A toy format: JSON lines of {"fact": "subject|object"}, one relation."""
    from probekit.datasets.base import Dataset
    from probekit.datasets.records import read_records
    from probekit.types import Query

    queries = []
    for line, row in read_records(text, label=label, fmt=fmt, required=("fact",), need="need fact",
                                  progress=progress):
        subject, _, obj = str(row.get("fact", "")).partition("|")
        if not obj:
            raise ProbekitError(f"{label}, line {line}: a fact is 'subject|object'")
        queries.append(Query(id=f"is:{line}", subject=subject, relation="is", template="[X] is [Y] .", golds=(obj,)))
    return Dataset(name=name, queries=queries, templates={"is": "[X] is [Y] ."}, version=version, source=label)


@pytest.fixture
def throwaway(tmp_path):
    folder = tmp_path / "facts"
    folder.mkdir()
    (folder / "all.facts").write_text(json.dumps({"fact": "aspirin|drug"}) + "\n")
    fmt = DatasetFormat(
        "toyfacts", "a throwaway format of the contract test", lambda path, **kw: _parse_facts(
            (Path(path) / "all.facts" if Path(path).is_dir() else Path(path)).read_text(), label=str(path)),
        location=lambda: folder, suffixes=(".jsonl",), parse=_parse_facts, marks=("fact",), file_hint="a .facts file",
        example=json.dumps({"fact": "metformin|drug"}) + "\n")
    register(fmt)
    try:
        yield fmt
    finally:
        unregister("toyfacts")


def test_a_new_format_is_one_registration(throwaway):
    parser = argparse.ArgumentParser(prog="probekit bench")
    add_dataset_args(parser)  # what every command taking --dataset calls
    help_text = " ".join(parser.format_help().split())
    assert "toyfacts: a throwaway format of the contract test" in help_text
    assert ("toyfacts", throwaway.description) in available_datasets()  # its folder is here
    assert load_dataset("toyfacts", use_cache=False).queries[0].golds == ("drug",)
    # the app's upload (pages/_ui.py draws exactly these): the format picker, the file types, the parse
    assert ("toyfacts", f"toyfacts: {throwaway.description}") in F.upload_choices()
    assert "jsonl" in F.upload_suffixes() and "toyfacts" in F.upload_help()
    ds = F.parse_upload("mine.jsonl", b'{"fact": "insulin|hormone"}\n')  # told from the other JSONL formats
    assert ds.queries[0].golds == ("hormone",) and ds.name == "upload:mine.jsonl"
    unregister("toyfacts")
    assert "toyfacts" not in F.dataset_help() and "toyfacts" not in dict(F.upload_choices())
    with pytest.raises(UnknownNameError, match="unknown dataset 'toyfacts'"):
        load_dataset("toyfacts")


def test_the_sidebar_upload_reads_through_the_registry(throwaway, monkeypatch):
    """The page's own upload path (pages/_uploads.py) parses a new format with no change there."""
    uploads = pytest.importorskip("pages._uploads")
    monkeypatch.setattr(uploads.st, "session_state", {})
    ds = uploads._parse_upload("mine.jsonl", b'{"fact": "insulin|hormone"}\n')
    assert ds.queries[0].subject == "insulin"
    uploads._UPLOADS.clear()


def test_detection_refuses_an_upload_no_format_takes():
    with pytest.raises(ProbekitError, match="no dataset format takes .xlsx files") as e:
        F.parse_upload("facts.xlsx", b"a,b\n")
    one_line(e.value)
    with pytest.raises(UnknownNameError, match="unknown upload format 'medlama'"):
        F.parse_upload("facts.csv", b"subject,relation,object\na,r,b\n", fmt="medlama")
