"""Dataset loaders: MedLAMA layout, triples CSV/JSONL, BioLAMA JSONL, candidate vocabularies, the demo set."""

from __future__ import annotations

import ast
import csv
import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

from probekit import config
from probekit.datasets import available_datasets, biolama, hardness, load_dataset, load_spec, medlama, triples
from probekit.errors import DataFormatError, ProbekitError, UnknownNameError

HEADER = ["head_cui", "head_name", "rel", "tail_cuis_list", "tail_names_list", "tail_names", "tail_cuis",
          "tail_cuis_len", "tail_names_len", "avg_match", "avg_rouge_l"]

PROMPTS = """pid,default_prompt,human_prompt
may_treat,[X] may treat [Y] .,[X] might treat [Y] .
gene_associated_with_disease,[X] gene associated with disease [Y] .,The gene [X] is associated with  disease [Y] .
"""

# relation -> [(head_cui, head_name, [(tail_cui, tail_name), ...])]; repeats as in MedLAMA's tail lists
FACTS = {
    "may_treat": [
        ("C1", "Metformin", [("C2", "Type 2 diabetes"), ("C2", "Type 2 diabetes"), ("C3", "PCOS")]),
        ("C4", "Aspirin", [("C5", "Pain"), ("C6", "Fever")]),
        ("C7", "Pain relief gel", [("C5", "Pain"), ("C8", "pain")]),
    ],
    "gene_associated_with_disease": [
        ("C9", "CFTR gene", [("C10", "Cystic fibrosis")]),
        ("C11", "HTT gene", [("C12", "Huntington disease"), ("C6", "Fever")]),
    ],
}


def write_relation(path: Path, rel: str, rows) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        for cui, head, tails in rows:
            cuis, names = [c for c, _ in tails], [n for _, n in tails]
            uniq = list(dict.fromkeys(names))
            w.writerow([cui, head, rel, repr(cuis), repr(names), " || ".join(uniq), " || ".join(dict.fromkeys(cuis)),
                        len(set(cuis)), len(uniq), *hardness.scores(head, names)])


@pytest.fixture
def medlama_root(tmp_path) -> Path:
    """A tiny MedLAMA-layout folder: two relations, full files and hard files chosen by the hard rule."""
    root = tmp_path / "medlama"
    (root / "2021AA").mkdir(parents=True)
    (root / "prompts.csv").write_text(PROMPTS, encoding="utf-8")
    for rel, rows in FACTS.items():
        write_relation(root / "2021AA" / f"{rel}_{len(rows)}.csv", rel, rows)
        hard = [r for r in rows if hardness.is_hard(r[1], [n for _, n in r[2]])]
        write_relation(root / "2021AA" / f"{rel}_{len(hard)}_hard.csv", rel, hard)
    return root


# ---------------------------------------------------------------- MedLAMA layout

def test_medlama_full_set(medlama_root):
    ds = medlama.load(medlama_root)
    assert ds.name == "medlama-full" and len(ds) == 5
    assert ds.relations == ["gene_associated_with_disease", "may_treat"]
    q = ds.query("may_treat:0000")
    assert (q.subject, q.subject_id) == ("Metformin", "C1")
    assert q.golds == ("Type 2 diabetes", "PCOS") and q.gold_ids == ("C2", "C3")  # repeats dropped, order kept
    assert q.template == "[X] might treat [Y] ." and q.text() == "Metformin might treat [MASK] ."
    # templates have their whitespace collapsed; default_prompt on request
    assert ds.templates["gene_associated_with_disease"] == "The gene [X] is associated with disease [Y] ."
    assert medlama.load(medlama_root, template_column="default_prompt").query("may_treat:0001").template == \
        "[X] may treat [Y] ."
    assert ds.query("may_treat:0002").golds == ("Pain", "pain")  # case variants are distinct golds
    assert ds.version and ds.version == medlama.load(medlama_root).version


def test_medlama_hard_set_uses_its_own_files_vocabulary(medlama_root):
    """The rule: "heads+tails of the probed set's own files (...) with --prob_hard the
    reference builds it from the 19 *_hard.csv only"."""
    full = medlama.load(medlama_root)
    hard = medlama.load(medlama_root, which="hard")
    # "Pain relief gel" -> "Pain" is not hard (avg_match 0.5); the other four are
    assert hard.name == "medlama-hard" and len(hard) == 4
    assert "Pain relief gel" not in {q.subject for q in hard.queries}
    own = {q.subject for q in hard.queries} | {g for q in hard.queries for g in q.golds}
    assert set(hard.candidates("heads+tails").names) == own
    assert "Pain relief gel" not in hard.candidates().names and "pain" not in hard.candidates().names
    assert len(hard.candidates()) < len(full.candidates())
    assert set(hard.candidates("tails").names) == {g for q in hard.queries for g in q.golds}
    assert hard.version != full.version


def test_medlama_relations_filter_keeps_the_vocabulary(medlama_root):
    """The rule: "Filtering which queries run (one relation, a sample) never changes the vocabulary";
    "Filtering queries must never change the candidates unless the user picks the `relation`
    vocabulary"."""
    whole = medlama.load(medlama_root)
    ds = medlama.load(medlama_root, relations=["may_treat"])
    assert ds.relations == ["may_treat"] and len(ds) == 3 and ds.filtered and not whole.filtered
    for vocab in ("heads+tails", "tails"):
        assert ds.candidates(vocab).names == whole.candidates(vocab).names
    assert "CFTR gene" in ds.candidates().names and "Cystic fibrosis" in ds.candidates("tails").names
    assert ds.candidates("relation", "may_treat").names == whole.candidates("relation", "may_treat").names
    assert ds.version == whole.version and ds.summary()["vocab_queries"] == len(whole) == 5
    hard = medlama.load(medlama_root, which="hard", relations=["may_treat"])
    assert hard.candidates().names == medlama.load(medlama_root, which="hard").candidates().names
    with pytest.raises(UnknownNameError, match=r"unknown relation 'may_traet'; did you mean 'may_treat'"):
        medlama.load(medlama_root, relations=["may_traet"])


def test_dataset_filter_relation_ids_and_sample(medlama_root):
    """Any query filter (one relation, a sample) keeps the set's candidate vocabulary."""
    whole = medlama.load(medlama_root)
    one = whole.filter(relations="gene_associated_with_disease")
    assert [q.id for q in one.queries] == ["gene_associated_with_disease:0000", "gene_associated_with_disease:0001"]
    assert list(one.templates) == ["gene_associated_with_disease"]
    picked = whole.filter(query_ids=["may_treat:0002", "may_treat:0000"])
    assert [q.id for q in picked.queries] == ["may_treat:0000", "may_treat:0002"]  # dataset order
    s1, s2 = whole.filter(sample=3, seed=1), whole.filter(sample=3, seed=1)
    assert len(s1) == 3 and [q.id for q in s1.queries] == [q.id for q in s2.queries]
    assert {len(whole.filter(sample=3, seed=i).queries) for i in range(5)} == {3}
    assert len(whole.filter(sample=99)) == 5
    nested = one.filter(sample=1)  # a filter of a filter still ranks among the whole set
    assert nested.candidates() is whole.candidates() and nested.candidates("tails") is whole.candidates("tails")
    with pytest.raises(ProbekitError, match="no query"):
        whole.filter(relations=["may_treat"], query_ids=["gene_associated_with_disease:0000"])
    with pytest.raises(ProbekitError, match="no query 'nope'"):
        whole.filter(query_ids=["nope"])
    with pytest.raises(ProbekitError, match="sample must be a positive"):
        whole.filter(sample=0)


def test_medlama_through_the_registry(medlama_root, monkeypatch):
    ds = load_dataset("medlama", path=medlama_root, which="hard", use_cache=False)
    assert len(ds) == 4
    monkeypatch.setenv("PROBEKIT_MEDLAMA_DIR", str(medlama_root))
    a = load_spec("medlama:hard")
    assert len(a) == 4 and load_spec("medlama:hard") is a  # memoised
    assert len(load_spec("medlama")) == 5
    # the memo follows the environment: another folder gives another dataset
    other = medlama_root.parent / "other"
    shutil.copytree(medlama_root, other)
    for f in (other / "2021AA").glob("gene_*"):
        f.unlink()
    monkeypatch.setenv("PROBEKIT_MEDLAMA_DIR", str(other))
    assert len(load_spec("medlama")) == 3
    assert ("medlama:hard", "MedLAMA hard") in available_datasets()
    with pytest.raises(ProbekitError, match="unknown MedLAMA set 'easy'"):
        load_dataset("medlama", path=medlama_root, which="easy", use_cache=False)
    with pytest.raises(UnknownNameError, match="did you mean 'medlama'"):
        load_dataset("medlam")


def test_medlama_missing_folder_or_files(tmp_path):
    with pytest.raises(ProbekitError, match="PROBEKIT_MEDLAMA_DIR"):
        medlama.load(tmp_path)
    (tmp_path / "2021AA").mkdir()
    (tmp_path / "prompts.csv").write_text(PROMPTS, encoding="utf-8")
    with pytest.raises(ProbekitError, match=r"no hard relation files"):
        medlama.load(tmp_path, which="hard")


def _rewrite(path: Path, fn) -> None:
    path.write_text(fn(path.read_text(encoding="utf-8")), encoding="utf-8")


def test_medlama_missing_column(medlama_root):
    f = medlama_root / "2021AA" / "may_treat_3.csv"
    _rewrite(f, lambda t: t.replace("tail_names_list,", "names,", 1))
    with pytest.raises(DataFormatError, match=rf"{re.escape(str(f))}, line 1: missing column 'tail_names_list'"):
        medlama.load(medlama_root)


def test_medlama_bad_list_literal(medlama_root):
    f = medlama_root / "2021AA" / "may_treat_3.csv"
    _rewrite(f, lambda t: t.replace("\"['C5', 'C6']\"", "\"['C5', 'C6'\"", 1))
    with pytest.raises(DataFormatError, match=r"may_treat_3\.csv, line 3: column 'tail_cuis_list' is not a Python"):
        medlama.load(medlama_root)
    _rewrite(f, lambda t: t.replace("\"['C5', 'C6'\"", "'C5'", 1))
    with pytest.raises(DataFormatError, match=r"line 3: column 'tail_cuis_list' must be a list"):
        medlama.load(medlama_root)


@pytest.mark.parametrize("cell", ["['C0431122', 'C5438535']", "[]", "['Crohn disease']",
                                  '["Crohn\'s disease", \'ileitis\']', "['a\\'b']", "['a', 'b',]",
                                  "['a' 'b']", "['é', 'β-blocker']", "('a', 'b')", "['x', 1]"])
def test_medlama_list_cells_read_as_python_reads_them(cell):
    """The rule: a list cell is what :func:`ast.literal_eval` reads (MedLAMA writes Python's ``repr``), each item as
    text, whichever path reads it (JSON for plain single-quoted cells, literal_eval for the rest)."""
    from probekit.datasets.medlama import _parse_list

    assert _parse_list(cell, Path("f.csv"), 2, "tail_names_list") == [str(v) for v in ast.literal_eval(cell)]


def test_medlama_short_row_and_empty_golds(medlama_root):
    f = medlama_root / "2021AA" / "may_treat_3.csv"
    _rewrite(f, lambda t: t + "C99,Lonely head\n")
    with pytest.raises(DataFormatError, match=r"may_treat_3\.csv, line 5: no value for column 'rel'"):
        medlama.load(medlama_root)
    _rewrite(f, lambda t: t.replace("C99,Lonely head\n", "C99,Lonely head,may_treat,[],[],,,0,0,0,0\n"))
    with pytest.raises(DataFormatError, match=r"line 5: empty head_name or tail_names_list"):
        medlama.load(medlama_root)


def test_medlama_bad_prompts(medlama_root):
    p = medlama_root / "prompts.csv"
    _rewrite(p, lambda t: t.replace("[X] might treat [Y] .", "[X] might treat .", 1))
    with pytest.raises(DataFormatError, match=r"prompts\.csv, line 2: template .* needs both \[X\] and \[Y\]"):
        medlama.load(medlama_root)
    p.write_text(PROMPTS.splitlines()[0] + "\n" + PROMPTS.splitlines()[1] + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"no template for relation 'gene_associated_with_disease'"):
        medlama.load(medlama_root)
    p.write_text("pid,prompt\nmay_treat,[X] [Y]\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"prompts\.csv, line 1: missing column 'human_prompt'"):
        medlama.load(medlama_root)
    with pytest.raises(ProbekitError, match="unknown template column"):
        medlama.load(medlama_root, template_column="prompt")


# ---------------------------------------------------------------- triples CSV / JSONL

def test_triples_group_rows_into_queries(tiny_dataset):
    assert len(tiny_dataset) == 8 and tiny_dataset.relations == ["may_prevent", "may_treat"]
    metformin = [q for q in tiny_dataset.queries if q.subject == "metformin"]
    assert len(metformin) == 1 and metformin[0].golds == ("type 2 diabetes", "polycystic ovary syndrome")
    assert metformin[0].template == "[X] may treat [Y] ." == triples.default_template("may_treat")


def test_triples_templates_and_mask(tmp_path):
    f = tmp_path / "facts.csv"
    f.write_text("subject,relation,object,template\n"
                 "Aspirin,may_treat,Pain,[X]  can treat [MASK].\n"
                 "Aspirin,may_treat,Fever,\n"
                 "Aspirin,may_treat,Pain,\n"
                 "Warfarin,may_prevent,Stroke,\n", encoding="utf-8")
    ds = triples.load(f)
    assert ds.name == "facts" and len(ds) == 2
    q = ds.queries_for("may_treat")[0]
    assert q.golds == ("Pain", "Fever") and q.template == "[X] can treat [Y]."
    assert q.text() == "Aspirin can treat [MASK]."
    assert ds.templates == {"may_treat": "[X] can treat [Y].", "may_prevent": "[X] may prevent [Y] ."}
    assert load_dataset("triples", path=f, use_cache=False).version == ds.version
    with pytest.raises(ProbekitError, match="needs a file"):
        load_dataset("triples")


def test_triples_jsonl(tmp_path):
    f = tmp_path / "facts.jsonl"
    rows = [{"subject": "HBB gene", "relation": "assoc", "object": "Sickle cell anemia"},
            {"subject": "HBB gene", "relation": "assoc", "object": "Beta thalassemia", "template": "[X] -> [Y]"}]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    ds = triples.load(f)
    assert len(ds) == 1 and ds.queries[0].golds == ("Sickle cell anemia", "Beta thalassemia")
    assert ds.queries[0].template == "[X] -> [Y]"


@pytest.mark.parametrize("text, fmt, msg", [
    ("subject,relation\na,b\n", "csv", r"up\.csv, line 1: missing column 'object'"),
    ("subject,relation,object\na,b,c\nd,,f\n", "csv", r"up\.csv, line 3: missing column 'relation'"),
    ("subject,relation,object,template\na,b,c,[X] is\n", "csv", r"line 2: template '\[X\] is' has no \[Y\]"),
    ("subject,relation,object,template\na,r,c,[X] x [Y]\nd,r,f,[X] y [Y]\n", "csv", r"line 3: .*two different"),
    ('{"subject": "a", "relation": "b", "object": "c"}\n{"subject": "a",\n', "jsonl",
     r"up\.csv, line 2: not valid JSON"),
    ('["a", "b", "c"]\n', "jsonl", r"line 1: expected a JSON object"),
    ("", "csv", r"up\.csv: no facts found"),
])
def test_triples_malformed(text, fmt, msg):
    with pytest.raises(DataFormatError, match=msg):
        triples.parse(text, label="up.csv", fmt=fmt)


def test_triples_missing_or_binary_file(tmp_path):
    with pytest.raises(DataFormatError, match="file not found"):
        triples.load(tmp_path / "nope.csv")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(DataFormatError, match="not a UTF-8"):
        triples.load(tmp_path / "bin.csv")


# ---------------------------------------------------------------- BioLAMA JSONL

@pytest.fixture
def biolama_root(tmp_path) -> Path:
    root = tmp_path / "biolama"
    (root / "prompts").mkdir(parents=True)
    (root / "triples_processed" / "P2176").mkdir(parents=True)
    (root / "prompts" / "manual.jsonl").write_text(
        json.dumps({"relation": "P2176", "template": "[X] is a drug used to  treat [Y] ."}) + "\n", encoding="utf-8")
    facts = [
        {"uuid": "u1", "predicate_id": "P2176", "sub_uri": "Q18216", "sub_label": "aspirin", "sub_type": "drug",
         "sub_aliases": ["ASA"], "obj_uris": ["Q81938", "Q38933"], "obj_labels": ["pain", "fever"],
         "obj_types": ["d", "d"], "obj_aliases": [["ache", "pain"], ["pyrexia"]]},
        {"uuid": "u2", "predicate_id": "P2176", "sub_uri": "Q19484", "sub_label": "metformin",
         "obj_uris": ["Q3025883"], "obj_labels": ["type 2 diabetes"], "obj_aliases": [[]]},
    ]
    (root / "triples_processed" / "P2176" / "test.jsonl").write_text(
        "".join(json.dumps(f) + "\n" for f in facts), encoding="utf-8")
    return root


def test_biolama_golds_are_labels_plus_aliases(biolama_root):
    ds = biolama.load(biolama_root)
    assert len(ds) == 2 and ds.relations == ["P2176"]
    q = ds.query("u1")
    assert q.golds == ("pain", "fever", "ache", "pyrexia")  # labels first, aliases after, no repeats
    assert q.gold_ids == ("Q81938", "Q38933") and q.subject_id == "Q18216"
    assert q.template == "[X] is a drug used to treat [Y] ."
    assert ds.query("u2").golds == ("type 2 diabetes",)
    one_file = biolama.load(biolama_root / "triples_processed" / "P2176" / "test.jsonl")
    assert [q.id for q in one_file.queries] == ["u1", "u2"]


def test_biolama_through_registry(biolama_root, monkeypatch):
    monkeypatch.setenv("PROBEKIT_BIOLAMA_DIR", str(biolama_root))
    assert len(load_dataset("biolama", use_cache=False)) == 2
    assert ("biolama", "BioLAMA") in available_datasets()


def test_biolama_malformed(biolama_root, tmp_path):
    data = biolama_root / "triples_processed" / "P2176" / "test.jsonl"
    good = data.read_text(encoding="utf-8")
    data.write_text(good + "{not json\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test\.jsonl, line 3: not valid JSON"):
        biolama.load(biolama_root)
    data.write_text(good + json.dumps({"predicate_id": "P2176", "obj_labels": ["x"]}) + "\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test\.jsonl, line 3: missing column 'sub_label'"):
        biolama.load(biolama_root)
    data.write_text(good.replace('"P2176"', '"P999"', 1), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"line 1: relation 'P999' has no template"):
        biolama.load(biolama_root)
    data.write_text(good, encoding="utf-8")
    (biolama_root / "prompts" / "manual.jsonl").write_text('{"relation": "P2176"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"manual\.jsonl, line 1: missing column 'template'"):
        biolama.load(biolama_root)
    (biolama_root / "prompts" / "manual.jsonl").unlink()
    with pytest.raises(ProbekitError, match="no manual.jsonl"):
        biolama.load(biolama_root)
    with pytest.raises(ProbekitError, match="not found"):
        biolama.load(tmp_path / "nowhere")


# ---------------------------------------------------------------- candidate vocabularies

def test_candidate_vocabularies(medlama_root):
    ds = medlama.load(medlama_root)
    heads = {"Metformin", "Aspirin", "Pain relief gel", "CFTR gene", "HTT gene"}
    tails = {"Type 2 diabetes", "PCOS", "Pain", "Fever", "pain", "Cystic fibrosis", "Huntington disease"}
    both = ds.candidates("heads+tails")
    assert set(both.names) == heads | tails and len(both) == 12  # "Pain"/"pain" both kept, "Fever" once
    assert set(ds.candidates("tails").names) == tails
    rel = ds.candidates("relation", relation="gene_associated_with_disease")
    assert set(rel.names) == {"Cystic fibrosis", "Huntington disease", "Fever"}
    assert ds.candidates("tails") is ds.candidates("tails")  # built once
    assert both.index_of("pain") != both.index_of("Pain") and both.index_of(" metformin ") is not None
    with pytest.raises(ProbekitError, match="needs a relation"):
        ds.candidates("relation")
    with pytest.raises(ProbekitError, match="unknown vocabulary 'all'"):
        ds.candidates("all")


def test_tiny_dataset_vocabularies(tiny_dataset):
    assert len(tiny_dataset.candidates("tails")) == 9
    assert len(tiny_dataset.candidates("heads+tails")) == 9 + 7
    assert set(tiny_dataset.candidates("relation", relation="may_prevent").names) == {
        "myocardial infarction", "stroke", "rickets", "heart attack"}


# ---------------------------------------------------------------- the shipped demo set

def _demo_build_module():
    spec = importlib.util.spec_from_file_location("demo_build", config.ROOT / "data" / "demo" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_set_loads():
    full = load_dataset("demo", use_cache=False)
    hard = load_dataset("demo", which="hard", use_cache=False)
    assert full.name == "demo-full" and hard.name == "demo-hard"
    assert len(full.relations) >= 8 and 0 < len(hard) < len(full)
    facts = sum(len(q.golds) for q in full.queries)
    assert 120 <= facts <= 200
    assert sum(len(q.golds) > 1 for q in full.queries) >= len(full) // 2  # many queries have several golds
    assert all(re.fullmatch(r"DEMO:E\d{4}", i) for q in full.queries for i in (q.subject_id, *q.gold_ids))
    assert all(q.template.count("[X]") == 1 and q.template.count("[Y]") == 1 for q in full.queries)
    assert set(hard.candidates().names) == {n for q in hard.queries for n in (q.subject, *q.golds)}
    assert len(hard.candidates()) < len(full.candidates())
    assert all(hardness.is_hard(q.subject, list(q.golds)) for q in hard.queries)
    kept = [(q.relation, q.subject) for q in hard.queries]  # ids are positions in each file, so compare rows
    assert [(q.relation, q.subject) for q in full.queries if hardness.is_hard(q.subject, list(q.golds))] == kept
    assert load_spec("demo:hard").name == "demo-hard"


def test_demo_ids_name_one_entity_each():
    full = load_dataset("demo")
    name_of: dict[str, str] = {}
    for q in full.queries:
        for i, n in [(q.subject_id, q.subject), *zip(q.gold_ids, q.golds)]:
            assert name_of.setdefault(i, n) == n
    assert len(set(name_of.values())) == len(name_of)


def test_demo_files_are_what_build_makes(tmp_path):
    build = _demo_build_module()
    summary = build.build(tmp_path)
    assert build.differences(tmp_path, config.ROOT / "data" / "demo") == []
    full = load_dataset("demo")
    assert summary["queries"] == len(full) and summary["facts"] == sum(len(q.golds) for q in full.queries)
    assert len(medlama.load(tmp_path, which="hard")) == summary["hard"]


def test_demo_build_rejects_bad_facts(tmp_path):
    build = _demo_build_module()
    facts = tmp_path / "facts.csv"
    facts.write_text("subject,relation,object\nAspirin,may_treat,Pain\nAspirin,may_treat,Pain\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 3: repeats line 2"):
        build.build(tmp_path / "out", facts_path=facts)
    facts.write_text("subject,relation,object\nAspirin ,may_treat,Pain\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 2: need three trimmed"):
        build.build(tmp_path / "out", facts_path=facts)
    facts.write_text("subject,relation,object\nAspirin,cures,Pain\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="without a template in prompts.csv: cures"):
        build.build(tmp_path / "out", facts_path=facts)


# ---------------------------------------------------------------- the real MedLAMA data

def _heads_and_tails_from_csvs(files) -> set[str]:
    """heads + tails straight from MedLAMA's CSVs (head_name and every tail_names_list name), no probekit code."""
    names: set[str] = set()
    for path in files:
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                names.add(row["head_name"].strip())
                names.update(str(t).strip() for t in ast.literal_eval(row["tail_names_list"]))
    return names


def test_shared_medlama_vocabulary_sizes_from_the_csvs(medlama_dir):
    """The rule: "`heads+tails` of the probed set's own files (reference behaviour: the full set's 19
    `*_1000.csv` give 22,923 names; with `--prob_hard` the reference builds it from the 19 `*_hard.csv`
    only: 17,532 names)"; and "Filtering which queries run (one relation, a sample) never changes the
    vocabulary"."""
    folder = medlama_dir / "2021AA"
    full_files, hard_files = sorted(folder.glob("*_1000.csv")), sorted(folder.glob("*_hard.csv"))
    assert len(full_files) == len(hard_files) == 19
    full_names, hard_names = _heads_and_tails_from_csvs(full_files), _heads_and_tails_from_csvs(hard_files)
    assert (len(full_names), len(hard_names)) == (22_923, 17_532)
    full = load_dataset("medlama", path=medlama_dir, use_cache=False)
    hard = load_dataset("medlama", path=medlama_dir, which="hard", use_cache=False)
    assert set(full.candidates("heads+tails").names) == full_names
    assert set(hard.candidates("heads+tails").names) == hard_names
    # One relation alone ranks among the whole set's names (may_treat once searched 1,765)
    for ds in (full, hard):
        may_treat = ds.filter(relations=["may_treat"])
        assert len(may_treat.candidates("heads+tails")) == len(ds.candidates("heads+tails"))
        assert len(may_treat.candidates("tails")) == len(ds.candidates("tails"))
    assert len(load_dataset("medlama", path=medlama_dir, which="hard", relations=["may_treat"],
                            use_cache=False).candidates()) == 17_532


def test_shared_medlama_full_and_hard(medlama_dir):
    full = load_dataset("medlama", path=medlama_dir, use_cache=False)
    assert len(full) == 19_000 and len(full.relations) == 19
    assert len(full.candidates("heads+tails")) == 22_923
    assert len(full.candidates("tails")) == 8_801
    hard = load_dataset("medlama", path=medlama_dir, which="hard", use_cache=False)
    assert len(hard) == 15_329
    assert len(hard.candidates("heads+tails")) == 17_532


# ---------------------------------------------------------------- LAMA's JSON lines (probekit/datasets/lama.py)
def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def test_lama_rows_with_a_template_read_like_triples():
    """TREx as Hugging Face ships it: sub_label, obj_label, predicate_id and the relation's template on each row;
    rows of one subject and relation form one query with several golds."""
    from probekit.datasets import lama

    tpl = "[X] is a legal term in [Y] ."
    ds = lama.parse(_jsonl([
        {"sub_label": "co-prince", "obj_label": "France", "obj_uri": "Q142", "sub_uri": "Q1", "predicate_id": "P1001",
         "template": tpl, "masked_sentence": "The President of [MASK].", "uuid": "u1"},
        {"sub_label": "co-prince", "obj_label": "Andorra", "obj_uri": "Q228", "sub_uri": "Q1", "predicate_id": "P1001",
         "uuid": "u2"},  # no template: the relation's, from another row
        {"sub_label": "bishop", "obj_label": "Spain", "predicate_id": "P1001", "template": tpl}]), label="t.jsonl")
    assert [(q.subject, q.golds, q.template) for q in ds.queries] == [
        ("co-prince", ("France", "Andorra"), tpl), ("bishop", ("Spain",), tpl)]
    assert ds.queries[0].gold_ids == ("Q142", "Q228") and ds.queries[0].subject_id == "Q1"
    assert ds.templates == {"P1001": tpl} and ds.queries[0].text() == "co-prince is a legal term in [MASK] ."
    assert set(ds.candidates().names) == {"co-prince", "bishop", "France", "Andorra", "Spain"}


def test_lama_rows_without_a_template_are_template_free():
    """ConceptNet and Google-RE as LAMA ships them: no template, ``masked_sentences`` (the first with one [MASK] is
    the prompt); ``sub``/``pred`` stand in for sub_label/predicate_id. Ranked among the file's objects only."""
    from probekit.datasets import freetext, lama

    ds = lama.parse(_jsonl([
        {"sub": "alive", "obj_label": "think", "pred": "HasSubevent", "uuid": "c1",
         "masked_sentences": ["[MASK] [MASK] twice.", "One of the things you do when you are alive is [MASK]."]},
        {"sub_label": "Squad", "obj_label": "gold", "masked_sentences": "The [MASK] color was used."}]))
    assert freetext.is_template_free(ds) and ds.templates == {}
    assert [(q.relation, q.template, q.golds) for q in ds.queries] == [
        ("HasSubevent", "One of the things you do when you are alive is [Y].", ("think",)),
        ("lama", "The [Y] color was used.", ("gold",))]
    assert ds.candidates().names == ("think", "gold") and ds.meta["sources"]["HasSubevent:00000"] == ["c1"]


def test_lama_folder_takes_its_templates_from_relations_jsonl(tmp_path):
    """LAMA's data.zip layout: data/relations.jsonl, data/TREx/P19.jsonl (rows without templates)."""
    trex = tmp_path / "data" / "TREx"
    trex.mkdir(parents=True)
    (tmp_path / "data" / "relations.jsonl").write_text(_jsonl([
        {"relation": "P19", "template": "[X] was born in [Y] .", "label": "place of birth"}]))
    (trex / "P19.jsonl").write_text(_jsonl([{"sub_label": "Ada", "obj_label": "London", "predicate_id": "P19"}]))
    (trex / "P20.jsonl").write_text(_jsonl([{"sub_label": "Ada", "obj_label": "London", "predicate_id": "P20",
                                             "template": "[X] died in [Y] ."}]))
    ds = load_dataset("lama", path=trex, use_cache=False)
    assert ds.templates == {"P19": "[X] was born in [Y] .", "P20": "[X] died in [Y] ."} and ds.name == "TREx"
    one = load_dataset("lama", path=trex / "P19.jsonl", use_cache=False)
    assert [q.text() for q in one.queries] == ["Ada was born in [MASK] ."]


@pytest.mark.parametrize("rows, message", [
    ([{"sub_label": "a", "predicate_id": "r", "template": "[X] r [Y] ."}], "line 1: missing field 'obj_label'"),
    ([{"sub_label": "a", "obj_label": "b", "predicate_id": "r"}], "line 1: no template for relation 'r' and no masked"),
    ([{"sub_label": "a", "obj_label": "b", "template": "[X] r ."}], "line 1: template '[X] r .' has no [Y]"),
    ([{"sub_label": "a", "obj_label": "b", "template": "[X] r [Y] ."},
      {"sub_label": "c", "obj_label": "d", "template": "[X] s [Y] ."}], "line 2: relation 'lama' has two different"),
    ([{"sub_label": "a", "obj_label": "b", "predicate_id": "r", "template": "[X] r [Y] ."},
      {"obj_label": "d", "predicate_id": "s", "masked_sentences": ["[MASK] s."]}], "line 2: a template-free row, but"),
    ([{"obj_label": "d", "masked_sentences": ["no mask here"]}], "line 1, field 'masked_sentences': needs exactly one"),
    ([{"sub_label": ["a"], "obj_label": "b", "template": "[X] r [Y] ."}], "line 1, field 'sub_label': expected text"),
    ([{"obj_label": "b", "template": "[X] r [Y] ."}], "line 1: missing field 'sub_label' (the template's [X])"),
])
def test_lama_refuses_a_bad_row_with_its_line(rows, message):
    from probekit.datasets import lama

    with pytest.raises(DataFormatError) as e:
        lama.parse(_jsonl(rows), label="f.jsonl")
    assert str(e.value).startswith("f.jsonl, ") and message in str(e.value) and "\n" not in str(e.value)
