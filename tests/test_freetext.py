"""Template-free datasets (Shaier et al.): the loader, its bad-input messages, and probing through it."""

from __future__ import annotations

import json
import re

import pytest

from probekit import metrics
from probekit.datasets import freetext, load_dataset
from probekit.errors import DataFormatError, ProbekitError
from probekit.probes import get_probe

GOOD = """prompt,object,subject,relation,source
[MASK] is used to treat infections.,penicillin,,chem,pubmed:1
"Metformin lowers glucose in [MASK], a chronic disease.",type 2 diabetes,metformin,may_treat,pubmed:2
The nutrient-sensing [MASK] pathway regulates longevity.,mtor,,gene,pubmed:3
The nutrient-sensing [MASK] pathway regulates longevity.,insulin,,gene,pubmed:4
"""


def test_csv_rows_become_queries_with_the_objects_as_candidates():
    """Shaier et al. §3: "we allow our models to predict any entity from the dataset's entity list";
    a prompt is the sentence with the entity masked ("[MASK] is used to treat infections.")."""
    ds = freetext.parse(GOOD, label="lipid.csv", name="lipid")
    assert freetext.is_template_free(ds)
    assert [q.id for q in ds.queries] == ["chem:00000", "may_treat:00000", "gene:00000"]
    q = ds.query("gene:00000")
    assert q.template == "The nutrient-sensing [Y] pathway regulates longevity."
    assert q.text("[MASK]") == "The nutrient-sensing [MASK] pathway regulates longevity."
    assert q.golds == ("mtor", "insulin")  # same prompt twice: one query, two answers
    assert ds.query("may_treat:00000").subject == "metformin"
    assert ds.meta["sources"]["gene:00000"] == ["pubmed:3", "pubmed:4"]
    objects = ["penicillin", "type 2 diabetes", "mtor", "insulin"]
    assert list(ds.candidates("heads+tails").names) == objects  # subjects are never candidates
    assert sorted(ds.candidates("tails").names) == sorted(objects)
    assert list(ds.candidates("relation", "gene").names) == ["mtor", "insulin"]


def test_excel_bom_is_dropped():
    ds = freetext.parse("\ufeffprompt,object\n[MASK] works.,aspirin\n", label="excel.csv")
    assert ds.queries[0].golds == ("aspirin",)


def test_jsonl_and_default_relation(tmp_path):
    path = tmp_path / "free.jsonl"
    rows = [{"prompt": "[MASK] inhibits cyclooxygenase.", "object": "aspirin"},
            {"prompt": "Insulin is secreted by the [MASK].", "object": "pancreas", "source": "wiki"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    ds = load_dataset("freetext", path=path)
    assert ds.name == "free" and ds.relations == ["free"] and len(ds) == 2 and ds.version


@pytest.mark.parametrize("text,fmt,msg", [
    ("prompt,subject\nx [MASK],y\n", "csv", r"bad\.csv, line 1: missing column 'object'"),
    ("prompt,object\nno mask here,aspirin\n", "csv", r"bad\.csv, line 2, column 'prompt': needs exactly one "
                                                     r"\[MASK\].*found 0"),
    ("prompt,object\n[MASK] and [MASK],aspirin\n", "csv", r"line 2, column 'prompt': .*found 2"),
    ("prompt,object\n[MASK] works.,a\n[X] treats [MASK],b\n", "csv", r"line 3, column 'prompt': \[X\] is reserved"),
    ("prompt,object\n[MASK] works.,\n", "csv", r"line 2, column 'object': empty"),
    ("prompt,object\n [MASK] . ,x\n", "csv", r"line 2, column 'prompt': nothing but the mask"),
    ("prompt,object\n[MASK] works.,a,extra\n", "csv", r"line 2: 3 fields but the header has 2"),
    ('prompt,object\n"[MASK]\nspans lines.",a\n[MASK] x,b\n', "csv", r"line 2: column 'prompt' runs over several "
                                                                  r"lines \(to line 3\)"),
    ('prompt,object\n[MASK] x,a\n"[MASK] never closed,b\n', "csv", r"line 3: malformed CSV"),
    ('prompt,object\n[MASK] x,a\n\n[MASK] y,\n', "csv", r"line 4, column 'object': empty"),
    ('{"prompt": "[MASK] x", "object": "a"}\n{"prompt": "[MASK] y"\n', "jsonl", r"bad\.csv, line 2: not valid JSON"),
    ('["[MASK] x", "a"]\n', "jsonl", r"line 1: expected a JSON object"),
    ('{"prompt": "[MASK] x", "object": ["a", "b"]}\n', "jsonl", r"line 1, column 'object': expected text"),
    ("prompt,object\n", "csv", r"bad\.csv: no prompts found"),
])
def test_malformed_input_names_file_line_and_column(text, fmt, msg):
    with pytest.raises(DataFormatError, match=msg):
        freetext.parse(text, label="bad.csv", fmt=fmt)


def test_missing_file_and_binary_file(tmp_path):
    with pytest.raises(DataFormatError, match="file not found"):
        load_dataset("freetext", path=tmp_path / "nope.csv")
    with pytest.raises(ProbekitError, match="needs a file"):
        load_dataset("freetext")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00prompt")
    with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path / 'bin.csv'}: not a UTF-8")):
        load_dataset("freetext", path=tmp_path / "bin.csv")


def test_template_free_queries_go_through_both_candidate_ranking_probes(tiny_mlm, tiny_encoder):
    """Every probe that ranks candidates takes template-free queries through the normal interface; the
    candidates are the dataset's objects."""
    ds = freetext.parse(GOOD, label="lipid.csv")
    cands = ds.candidates()
    for probe, model in (("mask_average", tiny_mlm), ("retrieval", tiny_encoder)):
        rankings = get_probe(probe).rank(model, ds.queries, cands, k=2)
        assert len(rankings) == len(ds)
        for r in rankings:
            assert r.n_candidates == 4 and len(r.names) == 2
            assert all(rank is not None and 1 <= rank <= 4 for rank in r.gold_ranks)
        assert 0.0 <= metrics.acc_at_k(rankings, k=1) <= 1.0


def test_sidebar_upload_tells_template_free_files_from_triples():
    """The sidebar's upload takes either kind: a ``prompt`` column (or JSON key) means template-free."""
    from pages import _uploads

    free = _uploads._parse("s.csv", "\ufeffprompt,object\n[MASK] works.,aspirin\n".encode())
    assert freetext.is_template_free(free) and free.name == "upload:s.csv"
    assert freetext.is_template_free(_uploads._parse("s.jsonl", b'{"prompt": "[MASK] works.", "object": "a"}\n'))
    facts = _uploads._parse("t.csv", b"subject,relation,object\naspirin,may_treat,pain\n")
    assert not freetext.is_template_free(facts) and facts.queries[0].template == "[X] may treat [Y] ."
