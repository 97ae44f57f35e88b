"""Every loader of a user's CSV/JSONL file refuses a malformed record alike: one reader
(:func:`probekit.datasets.records.read_records`), one message per fault, naming the file and the line the record
starts on. Parametrised over the loaders that read such files, with inputs each loader otherwise accepts."""

from __future__ import annotations

import pytest

from probekit.datasets import freetext, triples
from probekit.datasets.records import read_records
from probekit.errors import DataFormatError

# loader -> (header, a good record): the faults below are built around them
LOADERS = {
    "triples": (triples.parse, "subject,relation,object", "aspirin,may_treat,pain"),
    "freetext": (freetext.parse, "prompt,object", "[MASK] treats pain.,aspirin"),
}
FAULTS = [  # (name, body after the header line, the message's rule)
    ("extra value", "{good}\n{good},more\n", r"^f\.csv, line 3: 3 fields but the header has 2|^f\.csv, line 3: 4 "
                                             r"fields but the header has 3"),
    ("quote never closed", '{good}\n"{good}\n{good}\n', r"^f\.csv, line 3: .*quote is probably never closed"),
    ("record over two lines", '{good}\n"x\ny",{rest}\n', r"^f\.csv, line 3: column '\w+' runs over several lines "
                                                        r"\(to line 4\)"),
]


@pytest.mark.parametrize("loader", sorted(LOADERS))
@pytest.mark.parametrize("name, body, rule", FAULTS, ids=[f[0] for f in FAULTS])
def test_each_loader_refuses_a_malformed_record_with_its_line(loader, name, body, rule):
    parse, header, good = LOADERS[loader]
    rest = good.split(",", 1)[1]
    text = header + "\n" + body.format(good=good, rest=rest)
    assert len(parse(header + "\n" + good + "\n", label="f.csv", fmt="csv")) == 1  # the good record loads
    with pytest.raises(DataFormatError, match=rule):
        parse(text, label="f.csv", fmt="csv")


def test_lines_count_from_the_file_not_the_records():
    """Blank lines and records holding quoted line breaks move the line numbers on: a record's line is the
    physical line it starts on."""
    text = 'a,b\n1,2\n\n"x, y",3\n4,5\n'
    assert [line for line, _ in read_records(text, label="f", fmt="csv", required=("a",), need="need a")] == [2, 4, 5]
    jsonl = '{"a": 1}\n\n{"a": 2}\n'
    assert [line for line, _ in read_records(jsonl, label="f", fmt="jsonl", required=(), need="")] == [1, 3]


@pytest.mark.parametrize("fmt, text, rule", [
    ("csv", "b,c\n1,2\n", r"^f, line 1: missing column 'a' \(need a\)$"),
    ("jsonl", "[1, 2]\n", r"^f, line 1: expected a JSON object \(need a\)$"),
    ("jsonl", "{bad\n", r"^f, line 1: not valid JSON"),
    ("tsv", "a\n", r"^f: unknown format 'tsv'; use csv or jsonl$"),
])
def test_one_message_per_fault(fmt, text, rule):
    with pytest.raises(DataFormatError, match=rule):
        list(read_records(text, label="f", fmt=fmt, required=("a",), need="need a"))
