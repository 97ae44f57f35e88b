"""Finding entity mentions in text: one Aho-Corasick automaton over every name, and sentence boundaries.

The rule (the same as the Context page's single-document matcher, made exact and fast):

* **case-insensitive**: text and names are lower-cased (``str.lower``; U+0130 is folded to ``i`` first so
  that offsets never shift);
* **whitespace-insensitive**: any run of whitespace in the text matches the single space between two words
  of a name (``heart  failure`` and ``heart\\nfailure`` both mention ``heart failure``);
* **word boundaries**: a mention never starts or ends inside a word (``\\w`` characters on both sides of its
  first or last edge), so ``heart`` is not found in ``hearts``;
* **leftmost-longest, non-overlapping**: scanning left to right, the earliest starting mention wins, and
  of those starting there the longest (``heart failure`` over ``heart``).

How the automaton enforces the word boundaries: the text is rewritten (vectorised with numpy) with a marker
character inserted at every word boundary and whitespace runs collapsed to one space, and every name is
rewritten the same way; a name then matches the rewritten text exactly where it matches the original on word
boundaries, and the automaton's own leftmost-longest semantics become ours. ``pos_map`` maps every position of
the rewritten text back to the original, so offsets are always in the caller's text.
"""

from __future__ import annotations

import ctypes
import functools
import re
import threading
from collections.abc import Sequence

import numpy as np

MARK = "\x01"  # word-boundary marker; never left in the text (mapped to the separator below)
SEP = "\x00"  # document separator inside a batch: neither a word character nor whitespace
_DOTTED_I = "\u0130"  # the one code point whose lower() changes the length


def fold(text: str) -> str:
    """Lower-case without changing the length.

    >>> fold("İstanbul Heart")
    'istanbul heart'
    """
    if _DOTTED_I in text:
        text = text.replace(_DOTTED_I, "i")
    return text.lower()


def name_key(name: str) -> str:
    """The key under which a name is matched: folded, whitespace collapsed (``normalize_name`` + U+0130).

    >>> name_key("  Heart\\tFailure ")
    'heart failure'
    """
    return " ".join(fold(str(name)).split())


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray]:
    """Per code point: is it a word character (``re``'s ``\\w``), is it whitespace (``str.isspace``)."""
    chars = "".join(map(chr, range(0x110000)))
    word = re.sub(r"[^\x00]", "\x01", re.sub(r"\W", "\x00", chars))
    space = re.sub(r"[^\x00]", "\x01", re.sub(r"\S", "\x00", chars))
    is_word = np.frombuffer(word.encode("latin-1"), dtype=np.uint8).astype(bool)
    is_space = np.frombuffer(space.encode("latin-1"), dtype=np.uint8).astype(bool)
    return is_word, is_space


def has_word_char(key: str) -> bool:
    return re.search(r"\w", key) is not None


def rewrite(text: str) -> tuple[str, np.ndarray]:
    """``text`` folded, whitespace runs collapsed, a marker at every word boundary; and the offset map.

    ``pos_map[p]`` is the offset in ``text`` of the rewritten position ``p`` (a marker maps to the character
    after it; ``pos_map[len(rewritten)] == len(text)``), so a match ``[s, e)`` is ``text[pos_map[s]:pos_map[e]]``.

    >>> r, m = rewrite("Heart  failure.")
    >>> r.replace(MARK, "|"), [int(m[i]) for i in (0, 7, 8, 17)]
    ('|heart| |failure|.', [0, 5, 7, 14])
    """
    is_word_t, is_space_t = _tables()
    n = len(text)
    cp = np.frombuffer(fold(text).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).copy()
    cp[cp == 1] = 0  # a stray marker character in the text becomes a separator
    space = is_space_t[cp]
    keep = ~(space & np.concatenate(([False], space[:-1])))  # drop whitespace that follows whitespace
    orig = np.flatnonzero(keep)
    chars = cp[orig]
    chars[space[orig]] = 32
    word = is_word_t[chars]
    m = len(chars)
    padded = np.concatenate(([False], word, [False]))
    bound = padded[1:] != padded[:-1]  # bound[j]: a word boundary just before char j (j == m: at the end)
    char_pos = np.arange(m, dtype=np.int64) + np.cumsum(bound[:m])
    length = m + int(bound.sum())
    out = np.full(length, 1, dtype=np.uint32)
    out[char_pos] = chars
    pos_map = np.empty(length + 1, dtype=np.int64)
    pos_map[char_pos] = orig
    pos_map[char_pos[bound[:m]] - 1] = orig[bound[:m]]
    pos_map[length] = n
    if bound[m]:
        pos_map[length - 1] = n
    return out.tobytes().decode("utf-32-le", "surrogatepass"), pos_map


def patterns(keys: Sequence[str]) -> list[str]:
    """Name keys rewritten like the text (markers at their word boundaries), in one vectorised pass.

    >>> [p.replace(MARK, "|") for p in patterns(["heart failure", "a-b"])]
    ['|heart| |failure|', '|a|-|b|']
    """
    return rewrite(SEP.join(keys))[0].split(SEP)


class Matcher:
    """Every mention of a fixed list of name keys in a batch of texts, with one automaton.

    >>> m = Matcher(["heart", "heart failure", "failure"])
    >>> m.find(["Heart failure, then heart-failure; hearts fail.", "no failure"])
    [(0, 1, 0, 13), (0, 0, 20, 25), (0, 2, 26, 33), (1, 2, 3, 10)]
    """

    def __init__(self, keys: Sequence[str]):
        import ahocorasick_rs

        if not keys:
            raise ValueError("no names to match")
        self.keys = list(keys)
        self._ac = ahocorasick_rs.AhoCorasick(patterns(self.keys),
                                              matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)

    def find_arrays(self, texts: Sequence[str]) -> tuple[np.ndarray, ...]:
        """(text index, key index, start, end) arrays of every mention, in text then offset order."""
        joined = SEP.join(texts)
        rewritten, pos_map = rewrite(joined)
        found = self._ac.find_matches_as_indexes(rewritten)
        empty = np.zeros(0, dtype=np.int64)
        if not found:
            return empty, empty, empty, empty
        hits = np.asarray(found, dtype=np.int64)  # (mentions, 3): key, start, end in the rewritten text
        start, end = pos_map[hits[:, 1]], pos_map[hits[:, 2]]
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
        doc_start = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))
        doc = np.searchsorted(doc_start, start, side="right") - 1
        return doc, hits[:, 0], start - doc_start[doc], end - doc_start[doc]

    def find(self, texts: Sequence[str]) -> list[tuple[int, int, int, int]]:
        return list(zip(*(a.tolist() for a in self.find_arrays(texts))))


# ---------------------------------------------------------------- sentences and paragraphs
_PARAGRAPH = re.compile(r"\n[^\S\n]*\n\s*")


def paragraphs(text: str) -> list[tuple[int, int]]:
    """(start, end) of each paragraph: blocks separated by a blank line, outer whitespace trimmed.

    >>> t = "One. Two.\\n\\n  Three.\\n"
    >>> [t[a:b] for a, b in paragraphs(t)]
    ['One. Two.', 'Three.']
    """
    out, pos = [], 0
    for m in [*_PARAGRAPH.finditer(text), None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        if chunk.strip():
            lead = len(chunk) - len(chunk.lstrip())
            out.append((pos + lead, pos + len(chunk.rstrip())))
        if m:
            pos = m.end()
    return out


@functools.cache
def _blingfire():
    import blingfire

    return blingfire.blingfire.TextToSentencesWithOffsets


_BUFFERS = threading.local()


def _buffers(size: int):
    """Output buffers for the native splitter, reused across calls (allocating them dominated small documents)."""
    have = getattr(_BUFFERS, "bufs", None)
    if have is None or have[0] < size:
        size = max(size, 2 * (have[0] if have else 0), 1 << 16)
        have = (size, ctypes.create_string_buffer(size), (ctypes.c_int32 * size)(), (ctypes.c_int32 * size)())
        _BUFFERS.bufs = have
    return have


def _split_bytes(data: bytes) -> list[tuple[int, int]] | None:
    """Byte (start, end) of each sentence from BlingFire's native splitter (the same call as its
    ``text_to_sentences_and_offsets``, without its per-byte Python loop); None if it gave up."""
    fn = _blingfire()
    size, out, starts, ends = _buffers(len(data) * 2 + 16)
    n = fn(ctypes.c_char_p(data), ctypes.c_int(len(data)), ctypes.byref(out), ctypes.byref(starts),
           ctypes.byref(ends), ctypes.c_int(size))
    if n <= 0 or n > size:
        return None
    count = ctypes.string_at(out, n).count(b"\n") + 1
    s = np.frombuffer(starts, dtype=np.int32, count=count)
    e = np.frombuffer(ends, dtype=np.int32, count=count) + 1  # BlingFire's ends are inclusive
    return list(zip(s.tolist(), e.tolist()))


def sentences(text: str) -> list[tuple[int, int, int]]:
    """(paragraph, start, end) of each sentence: BlingFire's sentences, cut at paragraph breaks.

    >>> t = "Dr. Smith gave metformin. The fever fell!\\n\\nNew paragraph"
    >>> [(p, t[a:b]) for p, a, b in sentences(t)]
    [(0, 'Dr. Smith gave metformin.'), (0, 'The fever fell!'), (1, 'New paragraph')]
    """
    paras = paragraphs(text)
    data = text.encode("utf-8", "surrogatepass")
    spans = _split_bytes(data) if paras else None
    if not spans:
        return [(p, a, b) for p, (a, b) in enumerate(paras)]
    if len(data) != len(text):  # map byte offsets to characters
        lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
        chars_before = np.concatenate(([0], np.cumsum(lead)))
        spans = [(int(chars_before[s]), int(chars_before[e])) for s, e in spans]
    out: list[tuple[int, int, int]] = []
    p = 0
    for s, e in spans:
        while p < len(paras) and paras[p][1] <= s:
            p += 1
        q = p
        while q < len(paras) and paras[q][0] < e:  # a sentence running over a paragraph break is cut there
            a, b = max(s, paras[q][0]), min(e, paras[q][1])
            piece = text[a:b]
            if piece.strip():
                a += len(piece) - len(piece.lstrip())
                b -= len(piece) - len(piece.rstrip())
                out.append((q, a, b))
            q += 1
    return out or [(p, a, b) for p, (a, b) in enumerate(paras)]
