"""Lookups on a hand-made corpus (every expected context worked out by hand) and the LIPID builder."""

import csv
import json

import pytest

from probekit.corpus import (
    build_index,
    build_template_free,
    contexts_for,
    coverage,
    documents_for,
    from_dataset,
    from_names,
    keyword_filter,
    open_source,
    sentences_mentioning,
    write_template_free,
)
from probekit.datasets.base import Dataset
from probekit.errors import ProbekitError
from probekit.types import Query

A = ("Metformin is used for type 2 diabetes. It may cause lactic acidosis.\n\n"
     "In type 2 diabetes, metformin lowers glucose. Fever is rare.")
B = "Aspirin treats fever and pain. Metformin was not studied here."
C = "Lactic acidosis is rare. Patients with diabetes take metformin."
QUERIES = [
    Query("q1", "metformin", "may_treat", "[X] treats [Y].", golds=("type 2 diabetes", "diabetes")),
    Query("q2", "aspirin", "may_treat", "[X] treats [Y].", golds=("fever", "pain")),
    Query("q3", "Metformin", "may_cause", "[X] causes [Y].", golds=("lactic acidosis",)),
    Query("q4", "aspirin", "may_cause", "[X] causes [Y].", golds=("bleeding",)),
]


@pytest.fixture
def idx(tmp_path):
    for name, text in (("a", A), ("b", B), ("c", C)):
        (tmp_path / f"{name}.txt").write_text(text)
    ds = Dataset("hand", QUERIES, {})
    return build_index(open_source(tmp_path), from_dataset(ds))


def texts(ctxs):
    return [c.text for c in ctxs]


def test_documents_mentioning_both(idx):
    """Yao et al.: "We retrieve documents including both subject S and target object O_t"."""
    assert documents_for(idx, "Metformin", "type 2 diabetes") == [0]
    assert documents_for(idx, "metformin", "lactic acidosis") == [0, 2]
    # "diabetes" inside "type 2 diabetes" is not a mention of "diabetes" (longest match first)
    assert documents_for(idx, "metformin", "diabetes") == [2]
    [doc] = contexts_for(idx, "metformin", "Type 2 Diabetes")
    assert doc.text == A and doc.unit == "document" and (doc.file, doc.key) == ("a.txt", "a")
    assert [A[a:b] for a, b in doc.subject_spans] == ["Metformin", "metformin"]
    assert [A[a:b] for a, b in doc.target_spans] == ["type 2 diabetes", "type 2 diabetes"]


def test_paragraph_sentence_and_window_units(idx):
    assert texts(contexts_for(idx, "metformin", "type 2 diabetes", unit="paragraph")) == [
        "Metformin is used for type 2 diabetes. It may cause lactic acidosis.",
        "In type 2 diabetes, metformin lowers glucose. Fever is rare."]
    sents = contexts_for(idx, "metformin", "type 2 diabetes", unit="sentence")
    assert texts(sents) == ["Metformin is used for type 2 diabetes.", "In type 2 diabetes, metformin lowers glucose."]
    assert sents[1].start == A.index("In type") and sents[1].target_spans == ((3, 18),)
    assert sents[1].subject_spans == ((20, 29),)
    assert texts(contexts_for(idx, "metformin", "type 2 diabetes", unit="window", window=1)) == [
        "Metformin is used for type 2 diabetes. It may cause lactic acidosis.",
        "It may cause lactic acidosis.\n\nIn type 2 diabetes, metformin lowers glucose. Fever is rare."]
    # S and O_t in neighbouring sentences: a window finds it, a sentence does not
    assert contexts_for(idx, "metformin", "lactic acidosis", unit="sentence") == []
    win = contexts_for(idx, "metformin", "lactic acidosis", unit="window", window=1)
    assert [(c.key, c.text) for c in win] == [
        ("a", "Metformin is used for type 2 diabetes. It may cause lactic acidosis.\n\nIn type 2 diabetes, "
              "metformin lowers glucose."),
        ("c", C)]
    assert len(contexts_for(idx, "metformin", "type 2 diabetes", unit="sentence", limit=1)) == 1


def test_lookup_errors(idx):
    with pytest.raises(ProbekitError, match="subject 'ibuprofen' is not among the 8 names"):
        contexts_for(idx, "ibuprofen", "fever")
    with pytest.raises(ProbekitError, match="unknown context unit 'page'"):
        contexts_for(idx, "aspirin", "fever", unit="page")
    with pytest.raises(ProbekitError, match="window must be"):
        contexts_for(idx, "aspirin", "fever", unit="window", window=-1)


def test_sentences_of_a_relations_tails(idx):
    rows = sentences_mentioning(idx, relation="may_treat", role="tail")
    assert [(r["doc_id"], r["entity"], r["text"][r["start"]:r["end"]]) for r in rows] == [
        (0, "type 2 diabetes", "type 2 diabetes"), (0, "type 2 diabetes", "type 2 diabetes"), (0, "fever", "Fever"),
        (1, "fever", "fever"), (1, "pain", "pain"), (2, "diabetes", "diabetes")]
    assert rows[2]["text"] == "Fever is rare."
    assert [r["text"] for r in sentences_mentioning(idx, entity="Lactic Acidosis")] == [
        "It may cause lactic acidosis.", "Lactic acidosis is rare."]


def test_coverage_and_stats(idx):
    """Facts with at least one context: by document 5 of 6 (bleeding never occurs), by sentence 4 of 6
    (metformin / lactic acidosis never share a sentence)."""
    doc = coverage(idx, QUERIES)
    assert (doc["facts"], doc["with_context"], doc["unknown_names"]) == (6, 5, 0)
    assert doc["by_relation"] == {"may_cause": {"facts": 2, "with_context": 1},
                                  "may_treat": {"facts": 4, "with_context": 4}}
    assert doc["covered"] == [("metformin", "may_treat", "type 2 diabetes"), ("metformin", "may_treat", "diabetes"),
                              ("aspirin", "may_treat", "fever"), ("aspirin", "may_treat", "pain"),
                              ("Metformin", "may_cause", "lactic acidosis")]
    sent = coverage(idx, QUERIES, unit="sentence")
    assert sent["with_context"] == 4 and ("Metformin", "may_cause", "lactic acidosis") not in sent["covered"]
    assert coverage(idx, [("aspirin", "x", "ibuprofen")])["unknown_names"] == 1
    assert (idx.counts["facts"], idx.counts["facts_with_document"], idx.counts["facts_with_sentence"]) == (6, 5, 4)


LIPID_CORPUS = [
    "Penicillin is used to treat certain infections.",           # kept
    "We examine the effect penicillin has on infections.",       # keyword "we"
    "Aspirin and penicillin are drugs.",                         # two entities
    "The weather was fine.",                                     # no entity ("we" inside a word is no keyword)
    "Penicillin (PCN) resistance is rising.",                    # keyword "("
    "Aspirin reduces fever; aspirin is cheap.",                  # one entity, twice: no single [MASK]
    "Between doses, metformin were given there.",                # whole words: kept; substrings: "we", "here"
    "However, metformin lowers glucose.",                        # keyword "However"
]


def test_lipid_steps_by_hand(tmp_path):
    """The whole-word reading.

    Shaier et al. §3.2.3: "retrieve sentences that include exactly one of those entities"; "we remove all
    sentences that contain parentheses"; "The simple list of keywords is: "here", "we", "investigate", "study",
    "propose", "outline", "(", "our", "performed", "suggest", and "However""; "we mask the entity in each
    sentence with a masking token"."""
    f = tmp_path / "lipid.txt"
    f.write_text("\n".join(LIPID_CORPUS))
    idx = build_index(open_source(f), from_names(["Penicillin", "aspirin", "metformin", "insulin"]))
    result = build_template_free(idx, entities=["penicillin", "Aspirin", "Metformin", "ibuprofen"],
                                 keyword_reading="whole-word")
    assert result.steps == [("1. sentences in the corpus", 8), ("2a. sentences mentioning an entity of the list", 7),
                            ("2b. ... with exactly one entity of the list", 6),
                            ("3. after the keyword filter (whole-word reading)", 3),
                            ("4. masked (the entity occurs once)", 2),
                            ("5. loadable (more than the mask, within the length limit)", 2)]
    assert result.kept_by_reading == {"substring": 2, "whole-word": 3}
    assert result.unknown_entities == ["ibuprofen"]
    assert result.rows == [
        {"prompt": "[MASK] is used to treat certain infections.", "object": "Penicillin", "subject": "",
         "relation": "template_free", "source": "lipid.txt:lipid.txt:1#0"},
        {"prompt": "Between doses, [MASK] were given there.", "object": "metformin", "subject": "",
         "relation": "template_free", "source": "lipid.txt:lipid.txt:7#0"}]
    out = write_template_free(result, tmp_path / "out" / "tf.jsonl")
    assert [json.loads(line) for line in out.read_text().splitlines()] == result.rows
    out = write_template_free(result, tmp_path / "tf.csv")
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["prompt", "object", "subject", "relation", "source"] and rows == result.rows
    with pytest.raises(ProbekitError, match=r"\.jsonl or \.csv"):
        write_template_free(result, tmp_path / "tf.parquet")


def test_keyword_filter_words_not_substrings():
    keep = keyword_filter()
    assert [keep(s) for s in ("Our results", "This study shows", "We", "the weekly dose", "somewhere", "x ( y")] == [
        False, False, False, True, True, False]
