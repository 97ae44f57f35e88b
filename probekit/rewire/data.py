"""Rewiring data (Meng et al. 2022, §3 "Self-supervised Contrastive Rewiring"): the elicit
corpora, and the seeded span masking that turns each corpus sentence into a (query, span) pair.

The paper "replace[s] their tail tokens (e.g. the last 50% excluding the full stop) with a [MASK] token":
"Social-distancing largely reduces coronavirus infections." -> "Social-distancing largely [MASK]." with
"reduces coronavirus infections" as the positive. :func:`span_pair` cuts such a tail, through the last
word, so every query ends in the mask.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Sequence
from pathlib import Path

from .. import atomic, config
from ..errors import ProbekitError, UnknownNameError, decode_utf8

CORPUS_FILES = {**{f"pubmed_{i}": f"pubmed_sents_no_punkt_10k_{i}" for i in range(10)},
                "wiki": "wiki_sents_no_punkt_10k.txt"}
"""The elicit corpora of the MedLAMA repository, by short name (files under ``PROBEKIT_CORPORA_DIR``)."""
SPAN_RULE = "tail-to-end"
"""Recorded in every run and checkpoint: the span ends at the last word (query ends in the mask). Runs from
before this fix have no ``span_rule`` (their span left the last word after the mask)."""


# ---------------------------------------------------------------- corpora
def list_corpora() -> list[tuple[str, Path]]:
    """(short name, file) of the elicit corpora found under ``PROBEKIT_CORPORA_DIR``."""
    root = config.corpora_dir()
    return [(name, root / f) for name, f in CORPUS_FILES.items() if (root / f).is_file()]


def resolve_corpus(corpus: str | Path) -> Path:
    """A corpus short name (``pubmed_0`` … ``pubmed_9``, ``wiki``) or a text file path."""
    text = str(corpus).strip()
    if not text:
        raise ProbekitError("no corpus given: a name such as 'pubmed_0' or a text file, one sentence a line")
    found = dict(list_corpora())
    if text in found:
        return found[text]
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if text in CORPUS_FILES:
        raise ProbekitError(f"corpus {text!r} is not at {config.corpora_dir() / CORPUS_FILES[text]}; "
                            "set PROBEKIT_CORPORA_DIR to the folder of the elicit corpora")
    if os.sep in text or "." in text:
        raise ProbekitError(f"corpus file {text!r} does not exist")
    raise UnknownNameError("corpus", text, sorted(found) or sorted(CORPUS_FILES))


def read_sentences(path: str | Path, *, limit: int | None = None) -> list[str]:
    """Non-empty lines of a UTF-8 text file (whitespace collapsed), at most ``limit``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ProbekitError(f"cannot read corpus {path}: {e.strerror or e}") from None
    text = decode_utf8(raw, where=path.name, note="a corpus is one sentence a line")
    out = [" ".join(line.split()) for line in text.splitlines()]
    out = [s for s in out if len(s.split()) >= 2]
    if len(out) < 2:
        raise ProbekitError(f"{path.name} has fewer than 2 sentences of 2+ words; rewiring needs a corpus "
                            "with one sentence a line")
    return out[:limit] if limit else out


def save_corpus(name: str, data: bytes) -> Path:
    """Keep an uploaded corpus under ``data/uploads/corpora`` (named by content hash) so a background
    run and later sweeps can read it; refused when too large or not a usable text file."""
    import hashlib
    import re

    if len(data) > config.MAX_UPLOAD_MB * 2**20:
        raise ProbekitError(f"{name} is larger than {config.MAX_UPLOAD_MB} MB")
    folder = config.data_dir() / "uploads" / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name)[:60] or "corpus.txt"
    path = folder / f"{hashlib.sha1(data).hexdigest()[:10]}-{safe}"
    written: list[Path] = []

    def check(tmp: Path) -> None:
        written.append(tmp)
        read_sentences(tmp)

    try:
        atomic.write_bytes(path, data, check=check)
    except ProbekitError as e:
        raise ProbekitError(str(e).replace(written[0].name, name) if written else str(e)) from None
    return path


# ---------------------------------------------------------------- span masking
def span_pair(sentence: str, rng: random.Random, *, ratio: float = 0.5, mask_token: str = "[MASK]"):
    """Cut the tail span of one sentence into a mask: ``(query, span)``, or None under 2 words.

    With n whitespace tokens, k is uniform in 1..1+floor(ratio·n) (at most n-1, so a word stays before
    the mask), and the span is the last k tokens: the query is the first n-k tokens and one mask token,
    so it ends in the mask, as in the paper's "Social-distancing largely [MASK]." (the
    reference code's span ends at the sentence's last word).

    >>> span_pair("aspirin may prevent myocardial infarction in adults", random.Random(3))
    ('aspirin may prevent myocardial infarction [MASK]', 'in adults')
    >>> span_pair("word", random.Random(0)) is None
    True
    """
    tokens = sentence.split()
    n = len(tokens)
    if n < 2:
        return None
    k = min(rng.randint(1, 1 + math.floor(ratio * n)), n - 1)
    start = n - k  # the span is tokens[start:], through the last word
    return " ".join(tokens[:start] + [mask_token]), " ".join(tokens[start:])


def make_pairs(sentences: Sequence[str], *, seed: int = 0, ratio: float = 0.5,
               mask_token: str = "[MASK]") -> list[tuple[str, str]]:
    """One (query, span) pair per sentence of 2+ words, reproducible for a seed.

    >>> make_pairs(["a b c d", "x"], seed=1)
    [('a b c [MASK]', 'd')]
    """
    rng = random.Random(seed)
    pairs = (span_pair(s, rng, ratio=ratio, mask_token=mask_token) for s in sentences)
    return [p for p in pairs if p is not None]
