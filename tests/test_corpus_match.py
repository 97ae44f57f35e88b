"""Mention finding: the automaton against a naive substring scan (same mentions, same boundaries)."""

import random
import re

import pytest

from probekit import config
from probekit.corpus import match
from probekit.corpus.match import Matcher, fold, name_key

ELICIT = config.corpora_dir()


def naive_mentions(text: str, keys: list[str]) -> list[tuple[int, int, int]]:
    """(key index, start, end) by brute force: str.find for every key at every position, then a greedy
    leftmost-longest pass. Written independently of the automaton (no markers, no numpy)."""
    folded = fold(text)
    norm, pos, prev_space = [], [], False
    for i, c in enumerate(folded):  # collapse whitespace runs, remember where each kept char came from
        if c.isspace():
            if prev_space:
                continue
            norm.append(" ")
            prev_space = True
        else:
            norm.append(c)
            prev_space = False
        pos.append(i)
    norm = "".join(norm)
    pos.append(len(text))
    word = lambda c: re.match(r"\w", c) is not None
    cands = []
    for k, key in enumerate(keys):
        at = norm.find(key)
        while at >= 0:
            end = at + len(key)
            ok_start = at == 0 or not (word(norm[at - 1]) and word(norm[at]))
            ok_end = end == len(norm) or not (word(norm[end - 1]) and word(norm[end]))
            if ok_start and ok_end:
                cands.append((at, end, k))
            at = norm.find(key, at + 1)
    cands.sort(key=lambda c: (c[0], -(c[1] - c[0])))
    out, taken_to = [], 0
    for s, e, k in cands:
        if s >= taken_to:
            out.append((k, pos[s], pos[e]))
            taken_to = e
    return out


def automaton_mentions(texts, keys):
    found = Matcher(keys).find(texts)
    return [[(k, s, e) for d, k, s, e in found if d == i] for i in range(len(texts))]


def test_rule_examples():
    """The rule: "every mention of every entity name ... case-insensitive, on word boundaries, longest match
    first"; Yao et al. retrieve "documents including both subject S and target object O_t"."""
    keys = [name_key(n) for n in ["Heart", "heart failure", "Failure", "a-b", "B12", "vitamin b12"]]
    text = "HEART  Failure; hearts fail. Heart-failure a-b ab-c Vitamin\nB12 b12."
    got = automaton_mentions([text], keys)[0]
    assert [text[s:e] for _, s, e in got] == ["HEART  Failure", "Heart", "failure", "a-b", "Vitamin\nB12", "b12"]
    assert got == naive_mentions(text, keys)


def test_leftmost_longest_not_global_longest():
    # "chest pain" starts first; the longer "pain fever spike" overlaps it and starts later: leftmost wins
    keys = ["chest pain", "pain fever spike", "fever spike", "spike"]
    text = "chest pain fever spike"
    got = automaton_mentions([text], keys)[0]
    assert [text[s:e] for _, s, e in got] == ["chest pain", "fever spike"]
    assert got == naive_mentions(text, keys)


def test_offsets_survive_unicode_and_length_changing_case():
    keys = [name_key(n) for n in ["İlaç", "café au lait", "naïve t cell", "ß"]]
    text = "Das İLAÇ und CAFÉ  au lait, NAÏVE T CELL; straße ß."
    got = automaton_mentions([text], keys)[0]
    assert [text[s:e] for _, s, e in got] == ["İLAÇ", "CAFÉ  au lait", "NAÏVE T CELL", "ß"]
    assert got == naive_mentions(text, keys)


def test_documents_in_a_batch_never_share_a_mention():
    got = Matcher(["heart failure"]).find(["heart", "failure", "heart failure"])
    assert got == [(2, 0, 0, 13)]


@pytest.mark.parametrize("seed", range(6))
def test_random_texts_match_the_naive_scan(seed):
    rng = random.Random(seed)
    words = ["a", "ab", "abc", "b", "bc", "c", "x1", "é", "Ab", "İb", "_", "12"]
    seps = [" ", "  ", "\n", "\t ", "-", ", ", ".", "(", "", "/"]
    keys = sorted({name_key(" ".join(rng.choice(words) for _ in range(rng.randint(1, 3)))) for _ in range(25)}
                  | {name_key(rng.choice(words) + rng.choice(["-", "/"]) + rng.choice(words)) for _ in range(5)})
    keys = [k for k in keys if match.has_word_char(k)]
    texts = ["".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(0, 40))) for _ in range(60)]
    assert automaton_mentions(texts, keys) == [naive_mentions(t, keys) for t in texts]


@pytest.mark.parametrize("piece", [1, 40, match.CHUNK_CHARS])
def test_where_a_batch_is_cut_never_changes_a_mention(monkeypatch, piece):
    """Texts and names are rewritten and searched a piece at a time, and an ASCII, a Latin-1 and a wider piece
    each take their own path; the mentions are the naive scan's whatever the pieces."""
    rng = random.Random(piece)
    words = ["heart", "failure", "Café", "naïve", "T", "cell", "İb", "\U0001d518x", "x1", "_", "au", "lait"]
    seps = [" ", "  ", "\n", "-", "", ".", "\u00a0", "\u3000"]
    keys = sorted({name_key(k) for k in ["heart failure", "heart", "café au lait", "naïve t cell", "t cell", "cell",
                                         "\U0001d518x", "x1 heart", "ib", "au", "_"]})
    texts = ["".join(rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(0, 12))) for _ in range(120)]
    kinds = {("ascii" if t.isascii() else "latin-1" if max(t) < "\u0100" else "wide") for t in texts}
    assert kinds == {"ascii", "latin-1", "wide"}
    monkeypatch.setattr(match, "CHUNK_CHARS", piece)
    assert automaton_mentions(texts, keys) == [naive_mentions(t, keys) for t in texts]


@pytest.mark.skipif(not ELICIT.is_dir(), reason="shared elicit corpora not present")
def test_real_pubmed_lines_match_the_naive_scan():
    """The shipped corpora (lower-cased PubMed, double spaces where punctuation was) against MedLAMA-style
    names, including names that occur inside longer ones."""
    lines = (ELICIT / "pubmed_sents_no_punkt_10k_0").read_text().splitlines()[:400]
    vocab = {w for line in lines for w in line.split()}
    rng = random.Random(1)
    pairs = {" ".join(line.split()[i:i + 2]) for line in lines for i in range(0, len(line.split()) - 1, 7)}
    keys = sorted(rng.sample(sorted(vocab), 300) + rng.sample(sorted(pairs), 300) + ["cell", "cells", "of the"])
    assert automaton_mentions(lines, keys) == [naive_mentions(t, keys) for t in lines]


def test_sentences_and_paragraphs():
    text = "Dr. Smith saw the patient.  She had fever!\n\n\nNew paragraph here. Another one"
    got = [(p, text[a:b]) for p, a, b in match.sentences(text)]
    assert got == [(0, "Dr. Smith saw the patient."), (0, "She had fever!"), (1, "New paragraph here."),
                   (1, "Another one")]
    heading = "HISTORY OF PRESENT ILLNESS\n\nChest pain since May. No fever"
    assert [(p, heading[a:b]) for p, a, b in match.sentences(heading)] == [
        (0, "HISTORY OF PRESENT ILLNESS"), (1, "Chest pain since May."), (1, "No fever")]
    rng = random.Random(3)
    messy = "".join(rng.choice(["Dr. ", "e.g. ", "x", "?! ", "\n", "\n\n", "  ", "é", "İ", "3.5 mg. ", "\t", "Word"])
                    for _ in range(3000))
    covered = [0] * len(messy)
    last_end = 0
    for _, a, b in match.sentences(messy):
        assert last_end <= a < b and messy[a:b] == messy[a:b].strip()
        last_end = b
        for i in range(a, b):
            covered[i] += 1
    assert all(covered[i] == 1 for i, c in enumerate(messy) if not c.isspace())  # every character, once
    uni = "Ärzte gaben Metformin. Das Fieber fiel."
    assert [uni[a:b] for _, a, b in match.sentences(uni)] == ["Ärzte gaben Metformin.", "Das Fieber fiel."]


@pytest.mark.slow
@pytest.mark.skipif(not ELICIT.is_dir() or not (config.medlama_dir() / "2021AA").is_dir(),
                    reason="shared MedLAMA / elicit corpora not present")
def test_shipped_index_matches_the_naive_scan_with_all_medlama_names():
    """The real index (11 corpora x MedLAMA's 22,923 heads+tails) against the naive scan on 300 random lines."""
    from probekit.corpus import build_index, from_names, open_source
    from probekit.datasets import load_dataset

    ents = from_names(load_dataset("medlama").candidates("heads+tails").names)
    idx = build_index(open_source("elicit"), ents)
    assert idx.counts["documents"] == 109_997 and len(ents) == 22_819
    picked = sorted(random.Random(0).sample(range(idx.counts["documents"]), 300))
    rows = idx.sql(f"SELECT doc_id, text FROM documents WHERE doc_id IN ({','.join(map(str, picked))}) "
                   "ORDER BY doc_id")
    got = {d: [] for d, _ in rows}
    for d, e, a, b in idx.sql("SELECT doc_id, entity_id, start, \"end\" FROM mentions WHERE doc_id IN "
                              f"({','.join(map(str, picked))}) ORDER BY doc_id, start"):
        got[d].append((e, a, b))
    for d, text in rows:
        assert got[d] == naive_mentions(text, ents.keys), text
