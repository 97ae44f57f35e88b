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
boundaries, and the automaton's own leftmost-longest semantics become ours. ``ends`` (from :func:`rewrite`) maps
positions of the rewritten text back to the original, so offsets are always in the caller's text.

Speed (``benchmarks/mention_match.py``: MedLAMA's 22,819 name keys over 20,000 shipped sentences, against a plain
pyahocorasick automaton with the same rule applied after): texts are handled in cache-sized pieces, Latin-1 text
is rewritten one byte a character with table lookups, and the automaton reads ASCII pieces straight from the
rewrite's array.
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


CHUNK_CHARS = 1 << 17
"""Texts are rewritten and searched in pieces of about this many characters, so that the rewrite's arrays stay in
the processor's cache (one pass over a whole 2.8M-character batch took about twice as long as the same text in
pieces)."""


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per code point: its class (0 other, 1 a word character as ``re``'s ``\\w``, 2 whitespace as
    ``str.isspace``); the same for the 256 Latin-1 code points; and, for those, a marker/character pair as one
    little-endian ``uint16`` (the rewritten character: whitespace becomes a space, a stray marker a separator) —
    the rewrite of Latin-1 text is then a lookup and a mask."""
    chars = "".join(map(chr, range(0x110000)))
    word = re.sub(r"[^\x00]", "\x01", re.sub(r"\W", "\x00", chars))
    space = re.sub(r"[^\x00]", "\x02", re.sub(r"\S", "\x00", chars))
    cls = (np.frombuffer(word.encode("latin-1"), dtype=np.uint8) | np.frombuffer(space.encode("latin-1"),
                                                                                 dtype=np.uint8))
    normal = np.arange(256, dtype="<u2")  # little-endian: the marker is the pair's first byte on any machine
    normal[cls[:256] == 2] = ord(" ")
    normal[ord(MARK)] = ord(SEP)
    return cls, cls[:256].copy(), (normal << 8) | ord(MARK)


def has_word_char(key: str) -> bool:
    return re.search(r"\w", key) is not None


def _rewrite(text: str) -> tuple[np.ndarray, np.ndarray, bool]:
    """The code points of :func:`rewrite`'s text (one byte each when they are all Latin-1, else four), its
    ``ends``, and whether the text is ASCII (then the code points are also its UTF-8 bytes)."""
    cls_all, cls_latin, pairs_latin = _tables()
    folded = fold(text)
    try:  # one byte a character: the common case (English text is Latin-1)
        cp: np.ndarray = np.frombuffer(folded.encode("latin-1"), dtype=np.uint8)
        cls = cls_latin.take(cp)
        pairs = pairs_latin.take(cp).view(np.uint8)  # (marker, character) for every character
    except UnicodeEncodeError:
        cp = np.frombuffer(folded.encode("utf-32-le", "surrogatepass"), dtype="<u4")
        cls = cls_all.take(cp)
        wide = cp.astype("<u8")
        wide[cls == 2] = ord(" ")
        wide[wide == ord(MARK)] = ord(SEP)
        pairs = ((wide << 32) | ord(MARK)).view("<u4")
    n = len(cp)
    if not n:
        return cp, np.zeros(0, dtype=np.int32), True
    word = cls == 1
    space = cls == 2
    bound = np.empty(n, dtype=bool)  # a marker before character i: a word boundary there
    bound[0] = word[0]
    np.not_equal(word[1:], word[:-1], out=bound[1:])
    keep = np.empty(n, dtype=bool)  # character i itself, unless it is whitespace after whitespace
    keep[0] = True
    np.logical_and(space[1:], space[:-1], out=keep[1:])
    np.logical_not(keep[1:], out=keep[1:])  # (so a boundary never falls before a dropped character)
    ends = np.cumsum(bound.view(np.uint8) + keep.view(np.uint8), dtype=np.int32 if n < 1 << 30 else np.int64)
    emit = np.empty((n, 2), dtype=bool)
    emit[:, 0] = bound
    emit[:, 1] = keep
    out = np.compress(emit.reshape(-1), pairs)
    if word[-1]:
        out = np.append(out, np.array([ord(MARK)], dtype=out.dtype))
    return out, ends, folded.isascii()


def _decode(codes: np.ndarray) -> str:
    return codes.tobytes().decode("latin-1" if codes.itemsize == 1 else "utf-32-le", "surrogatepass")


def rewrite(text: str) -> tuple[str, np.ndarray]:
    """``text`` folded, whitespace runs collapsed, a marker at every word boundary; and where it came from.

    ``ends[i]`` is the length of the rewrite of ``text[:i + 1]``, so the offset in ``text`` of a rewritten position
    ``p`` is :func:`original` ``(ends, p)``: a marker belongs to the character after it, the end to ``len(text)``;
    a match ``[s, e)`` of the rewrite is ``text[original(ends, s):original(ends, e)]``.

    >>> r, ends = rewrite("Heart  failure.")
    >>> r.replace(MARK, "|"), original(ends, [0, 7, 8, 17]).tolist()
    ('|heart| |failure|.', [0, 5, 7, 14])
    """
    codes, ends, _ = _rewrite(text)
    return _decode(codes), ends


def original(ends: np.ndarray, positions) -> np.ndarray:
    """Offsets in the original text of positions in its rewrite (``ends`` from :func:`rewrite`)."""
    return np.searchsorted(ends, positions, side="right")


def _pieces(lengths: list[int], size: int) -> list[tuple[int, int]]:
    """(first, last + 1) of consecutive runs of items with about ``size`` characters in all (at least one item)."""
    out, first, total = [], 0, 0
    for i, n in enumerate(lengths):
        total += n + 1
        if total >= size:
            out.append((first, i + 1))
            first, total = i + 1, 0
    if first < len(lengths):
        out.append((first, len(lengths)))
    return out


def patterns(keys: Sequence[str]) -> list[str]:
    """Name keys rewritten like the text (markers at their word boundaries), a piece of keys at a time.

    >>> [p.replace(MARK, "|") for p in patterns(["heart failure", "a-b"])]
    ['|heart| |failure|', '|a|-|b|']
    """
    out: list[str] = []
    for a, b in _pieces(list(map(len, keys)), CHUNK_CHARS):
        out += rewrite(SEP.join(keys[a:b]))[0].split(SEP)
    return out


class Matcher:
    """Every mention of a fixed list of name keys in a batch of texts, with one automaton.

    The automaton (Rust's ``aho-corasick`` through ``ahocorasick_rs``, leftmost-longest) runs over the UTF-8 bytes
    of the rewritten text: for ASCII text those are the rewrite's own array, with nothing decoded or re-encoded
    and no byte-to-character table built per search (what its ``str`` interface does).

    >>> m = Matcher(["heart", "heart failure", "failure"])
    >>> m.find(["Heart failure, then heart-failure; hearts fail.", "no failure"])
    [(0, 1, 0, 13), (0, 0, 20, 25), (0, 2, 26, 33), (1, 2, 3, 10)]
    """

    def __init__(self, keys: Sequence[str]):
        import ahocorasick_rs

        if not keys:
            raise ValueError("no names to match")
        self.keys = list(keys)
        self._ac = ahocorasick_rs.BytesAhoCorasick([p.encode("utf-8", "surrogatepass") for p in patterns(self.keys)],
                                                   matchkind=ahocorasick_rs.MatchKind.LeftmostLongest)

    def _search(self, text: str) -> np.ndarray:
        """(mentions, 3): key, start, end (offsets in ``text``) of every mention in one piece of text."""
        codes, ends, ascii_only = _rewrite(text)
        if ascii_only:
            found = self._ac.find_matches_as_indexes(codes.data)
            to_char = None
        else:
            data = _decode(codes).encode("utf-8", "surrogatepass")
            found = self._ac.find_matches_as_indexes(data)
            lead = (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80
            to_char = np.concatenate(([0], np.cumsum(lead, dtype=np.int32)))  # byte offset -> character offset
        if not found:
            return np.zeros((0, 3), dtype=np.int64)
        hits = np.asarray(found, dtype=np.int64)
        if to_char is not None:
            hits[:, 1:] = to_char[hits[:, 1:]]
        hits[:, 1:] = original(ends, hits[:, 1:])
        return hits

    def find_arrays(self, texts: Sequence[str]) -> tuple[np.ndarray, ...]:
        """(text index, key index, start, end) arrays of every mention, in text then offset order.

        The texts are searched a piece of about :data:`CHUNK_CHARS` characters at a time (whole texts, joined by
        a separator that no mention crosses), so the result is the same for any piece size."""
        lengths = list(map(len, texts))
        doc_start = np.cumsum([0] + [n + 1 for n in lengths[:-1]], dtype=np.int64)  # offsets in all texts joined
        found = []
        for a, b in _pieces(lengths, CHUNK_CHARS):
            hits = self._search(SEP.join(texts[a:b]))
            hits[:, 1:] += doc_start[a]
            found.append(hits)
        hits = np.concatenate(found) if found else np.zeros((0, 3), dtype=np.int64)
        doc = np.searchsorted(doc_start, hits[:, 1], side="right") - 1
        return doc, hits[:, 0], hits[:, 1] - doc_start[doc], hits[:, 2] - doc_start[doc]

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
