"""Mention matching against pyahocorasick in the same process, equal mentions asserted first.

Inputs (the measured ones): the name keys of MedLAMA's heads+tails (``from_names``: folded, whitespace collapsed,
names without a word character dropped: 22,819 keys from $PROBEKIT_MEDLAMA_DIR) and ``--sentences`` documents
(default 20,000) drawn with seed 0 from the 11 shipped elicit corpora ($PROBEKIT_CORPORA_DIR; one sentence a line,
read by ``read_documents`` exactly as the indexer reads them).

- ``probekit``: :class:`probekit.corpus.match.Matcher` (build: ``Matcher(keys)``; match: ``find(sentences)``, the
  mention list as Python tuples).
- ``pyahocorasick``: a plain ``ahocorasick.Automaton`` over the same keys (build: ``add_word`` for each key and
  ``make_automaton``), matched on the whole batch at once (sentences joined by probekit's separator, folded, and
  whitespace collapsed with one ``re`` pass; ``iter``: every occurrence), with probekit's rule applied after: a mention
  neither starts nor ends inside a word (``\\w`` on both sides of its first or last edge), then leftmost-longest,
  non-overlapping; offsets mapped back to each sentence. (Sentence by sentence it was about twice as slow here: the
  per-sentence normalisation dominated; the stronger peer is the one measured.)

Asserted first: the two mention lists (sentence, start, end, entity) are identical. Then each side is timed
``--repeats`` times, interleaved; the best time of each is reported with the ratio ``pyahocorasick / probekit``
(above 1: probekit is faster).

    PROBEKIT_MEDLAMA_DIR=... PROBEKIT_CORPORA_DIR=... .venv/bin/python benchmarks/mention_match.py
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probekit import atomic  # noqa: E402
from probekit.corpus import from_names, open_source, read_documents  # noqa: E402
from probekit.corpus.match import SEP, Matcher, fold  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402

_CHANGED = re.compile(r"\s\s+|[^\S ]")  # the whitespace that collapsing changes


def _word(c: str) -> bool:
    return c.isalnum() or c == "_"  # re's \\w for str patterns


def build_pyahocorasick(keys: list[str]):
    import ahocorasick

    auto = ahocorasick.Automaton()
    for i, k in enumerate(keys):  # the value: entity, length, whether the key starts / ends with a word character
        auto.add_word(k, (i, len(k), _word(k[0]), _word(k[-1])))
    auto.make_automaton()
    return auto


def pyahocorasick_mentions(auto, texts: list[str]) -> list[tuple[int, int, int, int]]:
    """(sentence, start, end, entity) of every mention: the batch folded and its whitespace collapsed in one pass
    (``re`` finds only what collapsing changes), every occurrence from the automaton, the rule's boundaries, then
    greedy leftmost-longest."""
    joined = fold(SEP.join(texts))  # SEP is neither a word character nor whitespace: no mention spans two sentences
    pieces, last = [], 0
    cuts, shifts, removed = [], [], 0  # from collapsed position cuts[i] on, shifts[i] characters were removed
    for m in _CHANGED.finditer(joined):
        a, b = m.span()
        pieces.append(joined[last:a])
        pieces.append(" ")
        last = b
        if b - a > 1:
            cuts.append(a + 1 - removed)
            removed += b - a - 1
            shifts.append(removed)
    pieces.append(joined[last:])
    norm = "".join(pieces)
    n = len(norm)
    cands = []
    for last_char, (k, length, starts_word, ends_word) in auto.iter(norm):
        s, e = last_char + 1 - length, last_char + 1
        if starts_word and s > 0:
            c = norm[s - 1]
            if c.isalnum() or c == "_":
                continue
        if ends_word and e < n:
            c = norm[e]
            if c.isalnum() or c == "_":
                continue
        cands.append((s, -length, k))
    cands.sort()
    doc_starts, at = [], 0
    for t in texts:
        doc_starts.append(at)
        at += len(t) + 1
    out, taken = [], 0
    for s, neg, k in cands:
        if s < taken:
            continue
        e = taken = s - neg
        i, j = bisect.bisect_right(cuts, s) - 1, bisect.bisect_right(cuts, e) - 1
        s += shifts[i] if i >= 0 else 0
        e += shifts[j] if j >= 0 else 0
        d = bisect.bisect_right(doc_starts, s) - 1
        out.append((d, s - doc_starts[d], e - doc_starts[d], k))
    return out


def probekit_mentions(matcher: Matcher, texts: list[str]) -> list[tuple[int, int, int, int]]:
    return [(d, s, e, k) for d, k, s, e in matcher.find(texts)]


def timed(fn, *args):
    t0 = time.perf_counter()
    res = fn(*args)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "mention_match.json"))
    args = ap.parse_args()
    keys = from_names(load_dataset("medlama").candidates("heads+tails").names).keys
    docs = [d.text for d in read_documents(open_source("elicit"))]
    picked = sorted(random.Random(0).sample(range(len(docs)), min(args.sentences, len(docs))))
    texts = [docs[i] for i in picked]
    del docs

    matcher, auto = Matcher(keys), build_pyahocorasick(keys)  # warm both (imports, probekit's class tables)
    ours, theirs = probekit_mentions(matcher, texts), pyahocorasick_mentions(auto, texts)
    assert ours == theirs, next((a, b) for a, b in zip(ours, theirs) if a != b) if len(ours) == len(theirs) \
        else (len(ours), len(theirs))
    for d, s, e, k in ours[:: max(1, len(ours) // 2000)]:  # and they are the keys, in the sentences' own text
        assert " ".join(fold(texts[d][s:e]).split()) == keys[k]

    times: dict[str, list[float]] = {"probekit_build": [], "pyahocorasick_build": [], "probekit_match": [],
                                     "pyahocorasick_match": []}
    for _ in range(args.repeats):
        t, matcher = timed(Matcher, keys)
        times["probekit_build"].append(t)
        t, auto = timed(build_pyahocorasick, keys)
        times["pyahocorasick_build"].append(t)
        t, got = timed(probekit_mentions, matcher, texts)
        times["probekit_match"].append(t)
        assert got == ours
        t, got = timed(pyahocorasick_mentions, auto, texts)
        times["pyahocorasick_match"].append(t)
        assert got == ours
    best = {k: min(v) for k, v in times.items()}
    result = {
        "inputs": {"keys": len(keys), "keys_from": "MedLAMA heads+tails names (from_names)",
                   "sentences": len(texts), "sentences_from": "elicit corpora, random.Random(0).sample",
                   "characters": sum(map(len, texts)), "mentions": len(ours)},
        "equal_mentions": True,
        "repeats": args.repeats,
        "best_seconds": {k: round(v, 4) for k, v in best.items()},
        "build_ratio": round(best["pyahocorasick_build"] / best["probekit_build"], 2),
        "match_ratio": round(best["pyahocorasick_match"] / best["probekit_match"], 2),
        "machine": {"cpus": os.cpu_count(), "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]},
    }
    print(json.dumps(result, indent=1))
    atomic.write_text(args.out, json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
