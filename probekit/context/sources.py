"""Where real contexts come from: documents that mention both the subject S and the target O_t.

The paper's experiment (Yao et al., "Context Segmentation and Retrieval": "We retrieve documents including
both subject S and target object O_t from certain resources") needs a documents provider. Any object with
``name`` and ``contexts(subject, target) -> list[str]`` is a :class:`ContextSource`; two ship here:

* :class:`CorpusScan`: the corpus files under ``config.corpora_dir()`` (one sentence a line, e.g. the
  shipped 10 x 10k lower-cased PubMed sentences), read once in a streamed pass into a word -> lines table;
  a "document" is one line, or a window of N neighbouring lines either side of an O_t line;
* :class:`IndexSource`: an adapter for the corpus mention index (:mod:`probekit.corpus`, built by
  another branch): ``contexts_for(index, subject, target, unit=..., window=...)``; imported lazily.

:func:`search_sentences` is the plain streamed scan the Context page uses for one triple.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol, runtime_checkable

from .. import config
from ..errors import ProbekitError, UnknownNameError, positive_int
from ..memo import Memo
from ..types import normalize_name
from .segment import _pattern

MAX_SCAN_BYTES = 512 * 2**20
"""CorpusScan keeps the corpus in memory; larger corpora belong in the corpus index (:class:`IndexSource`)."""
INDEX_UNITS = ("document", "paragraph", "sentence", "window")
_WORD = re.compile(r"\w+")
class _Lines(NamedTuple):
    """A corpus held in memory: its lines, the file number of each, and word -> numbers of the lines holding it."""

    lines: list[str]
    file_of: array
    words: dict[str, array]


_LOADED: Memo[tuple, _Lines] = Memo(max_entries=1)
"""The last corpus read by a CorpusScan (lines, line -> file, word -> lines), keyed by files, sizes and mtimes."""


@runtime_checkable
class ContextSource(Protocol):
    """A documents provider for dataset mode: real contexts mentioning both ``subject`` and ``target``."""

    name: str

    def contexts(self, subject: str, target: str) -> list[str]:
        """Texts holding both names (word boundaries, any case), at most the source's limit, in corpus order."""
        ...

    def describe(self) -> dict:
        """Plain settings stored with a run (what produced its contexts)."""
        ...


def corpus_files(root: str | Path | None = None) -> list[Path]:
    """The elicit corpora (one sentence a line) under ``root`` (default: ``config.corpora_dir()``)."""
    root = Path(root) if root else config.corpora_dir()
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith("."))


def short_name(path: str | Path) -> str:
    """A corpus file's short name: its first ``_`` part, plus its last when that is a number.

    >>> short_name("pubmed_sents_no_punkt_10k_3"), short_name("wiki_sents_no_punkt_10k.txt")
    ('pubmed_3', 'wiki')
    """
    parts = Path(path).name.split(".")[0].split("_")
    return parts[0] + (f"_{parts[-1]}" if len(parts) > 1 and parts[-1].isdigit() else "")


def resolve_corpora(names: Sequence[str] | None, root: str | Path | None = None) -> list[Path]:
    """Corpus files by short name (``pubmed_0``, ``wiki``), file name or path; ``None``/``all`` = every file,
    ``pubmed`` = every file whose short name starts with ``pubmed``."""
    files = corpus_files(root)
    if not names or list(names) == ["all"]:
        if not files:
            raise ProbekitError(f"no corpus file in {Path(root) if root else config.corpora_dir()} "
                                "(set PROBEKIT_CORPORA_DIR)")
        return files
    out: list[Path] = []
    for name in names:
        hits = [f for f in files if name in (f.name, short_name(f))]
        hits = hits or [f for f in files if short_name(f).split("_")[0] == name]
        if not hits and Path(name).is_file():
            hits = [Path(name)]
        if not hits:
            raise UnknownNameError("corpus", name, sorted({short_name(f) for f in files}))
        out += [f for f in hits if f not in out]
    return out


def search_sentences(subject: str, target: str, *, files: Sequence[str | Path] | None = None,
                     texts: Iterable[str] | None = None, limit: int = 20) -> list[str]:
    """Sentences (lines) that mention both ``subject`` and ``target`` (word boundaries, any case)."""
    if not normalize_name(subject) or not normalize_name(target):
        raise ProbekitError("give both a subject and a target to search for")
    s_pat, t_pat = _pattern(subject), _pattern(target)
    s_key, t_key = normalize_name(subject), normalize_name(target)
    out: list[str] = []

    def scan(lines: Iterable[str]) -> bool:
        for line in lines:
            low = line.lower()
            if s_key in low and t_key in low and s_pat.search(line) and t_pat.search(line):
                out.append(" ".join(line.split()))
                if len(out) >= limit:
                    return True
        return False

    if texts is not None and scan(texts):
        return out
    for f in files if files is not None else corpus_files():
        with open(f, encoding="utf-8", errors="replace") as fh:
            if scan(fh):
                break
    return out


class CorpusScan:
    """Real contexts from plain corpus files, one sentence a line.

    The files are read once (streamed, line by line) into memory with a table word -> line numbers, so each
    lookup touches only the lines holding every word of both names; the names are then matched exactly
    (case-insensitive, word boundaries, like segmentation). ``window`` = 0: a context is a line mentioning
    S and O_t; ``window`` = N: the N lines either side of a line mentioning O_t (same file), kept when S is
    inside. At most ``limit`` contexts per (S, O_t), in corpus order, without repeating a span.

    >>> scan = CorpusScan(texts=["aspirin treats pain", "pain", "aspirin and fever", "no aspirin here"])
    >>> scan.contexts("aspirin", "pain"), CorpusScan(texts=scan.texts, window=1).contexts("aspirin", "fever")
    (['aspirin treats pain'], ['pain aspirin and fever no aspirin here'])
    """

    def __init__(self, files: Sequence[str | Path] | None = None, *, texts: Sequence[str] | None = None,
                 window: int = 0, limit: int = 5, name: str | None = None):
        positive_int("window", window, minimum=0)  # lines around a match
        positive_int("limit", limit)
        self.files = [Path(f) for f in files] if files is not None else ([] if texts is not None else corpus_files())
        if texts is None and not self.files:
            raise ProbekitError("no corpus file to scan (set PROBEKIT_CORPORA_DIR or pick a corpus)")
        self._texts = list(texts) if texts is not None else None
        self.window, self.limit = window, limit
        self.name = name or ("texts" if texts is not None else "+".join(f.name for f in self.files))
        self._loaded: _Lines | None = None  # read on first use

    @property
    def texts(self) -> list[str]:
        return list(self._load().lines)

    def describe(self) -> dict:
        return {"source": "corpus scan", "files": [f.name for f in self.files], "window": self.window,
                "limit": self.limit, "lines": len(self._loaded.lines) if self._loaded is not None else None}

    def _load(self) -> _Lines:
        if self._loaded is not None:
            return self._loaded
        key = None
        if self._texts is None:  # the last corpus read stays in memory: a page's second run starts at once
            try:
                key = tuple((str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in self.files)
            except OSError as e:
                raise ProbekitError(f"cannot read the corpus: {e}") from None
            hit = _LOADED.get(key)
            if hit is not None:
                self._loaded = hit
                return hit
        size = sum(f.stat().st_size for f in self.files)
        if size > MAX_SCAN_BYTES:
            raise ProbekitError(f"the corpus is {size / 2**20:.0f} MB; the plain scan holds at most "
                                f"{MAX_SCAN_BYTES // 2**20} MB in memory: index it with the corpus index instead")
        lines: list[str] = []
        file_of = array("i")  # line -> file number
        words: dict[str, array] = {}

        def add(line: str, file_no: int) -> None:
            i = len(lines)
            lines.append(" ".join(line.split()))
            file_of.append(file_no)
            for w in set(_WORD.findall(line.lower())):
                words.setdefault(w, array("i")).append(i)

        if self._texts is not None:
            for line in self._texts:
                add(line, 0)
        for n, f in enumerate(self.files):
            try:
                with open(f, encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        add(line, n)
            except OSError as e:
                raise ProbekitError(f"cannot read the corpus file {f}: {e}") from None
        self._loaded = _Lines(lines, file_of, words)
        if key is not None:
            _LOADED.put(key, self._loaded)
        return self._loaded

    def lines_with(self, name: str) -> list[int]:
        """Line numbers mentioning ``name`` (case-insensitive, word boundaries), in corpus order."""
        loaded = self._load()
        words = _WORD.findall(normalize_name(name))
        if not words:
            return []
        postings = sorted((loaded.words.get(w, array("i")) for w in set(words)), key=len)
        ids = set(postings[0])
        for p in postings[1:]:
            if not ids:
                break
            ids &= set(p)
        pat = _pattern(name)
        return [i for i in sorted(ids) if pat.search(loaded.lines[i])]

    def contexts(self, subject: str, target: str) -> list[str]:
        if not normalize_name(subject) or not normalize_name(target):
            return []
        t_lines = self.lines_with(target)
        if not t_lines:
            return []
        s_lines = set(self.lines_with(subject))
        if not s_lines:
            return []
        lines, file_of, _ = self._load()
        out: list[str] = []
        seen: set[tuple[int, int]] = set()
        for i in t_lines:
            f = file_of[i]
            lo, hi = i, i
            for _ in range(self.window):  # widen within the same file
                if lo - 1 >= 0 and file_of[lo - 1] == f:
                    lo -= 1
                if hi + 1 < len(lines) and file_of[hi + 1] == f:
                    hi += 1
            if (lo, hi) in seen or not any(j in s_lines for j in range(lo, hi + 1)):
                continue
            seen.add((lo, hi))
            out.append(" ".join(lines[lo:hi + 1]))
            if len(out) >= self.limit:
                break
        return out


class IndexSource:
    """Real contexts from the corpus mention index (:mod:`probekit.corpus`): ``contexts_for(index, S, O_t,
    unit=..., window=..., limit=...)``. Names the index does not know give no context (a coverage miss)."""

    def __init__(self, index, *, unit: str = "document", window: int = 1, limit: int = 5, name: str | None = None):
        try:
            from probekit.corpus import contexts_for  # noqa: F401 - only checks the package is there
        except ImportError:
            raise ProbekitError("the corpus index (probekit.corpus) is not part of this build; use the corpus "
                                "scan (--contexts corpus)") from None
        if unit not in INDEX_UNITS:
            raise ProbekitError(f"unknown context unit {unit!r}; available: {', '.join(INDEX_UNITS)}")
        if not isinstance(window, int) or window < 0 or not isinstance(limit, int) or limit < 1:
            raise ProbekitError("window must be >= 0 and limit >= 1")
        self.index, self.unit, self.window, self.limit = index, unit, window, limit
        self.name = name or f"index:{getattr(index, 'fingerprint', '?')}"

    @classmethod
    def open(cls, fingerprint: str, **options) -> IndexSource:
        """The stored index whose fingerprint starts with ``fingerprint``."""
        try:
            from probekit.corpus import open_index
        except ImportError:
            raise ProbekitError("the corpus index (probekit.corpus) is not part of this build") from None
        return cls(open_index(fingerprint), **options)

    def describe(self) -> dict:
        return {"source": "corpus index", "index": self.name, "unit": self.unit, "window": self.window,
                "limit": self.limit}

    def contexts(self, subject: str, target: str) -> list[str]:
        from probekit.corpus import contexts_for

        try:
            found = contexts_for(self.index, subject, target, unit=self.unit, window=self.window, limit=self.limit)
        except ProbekitError:  # a name the index was not built with: no context for this triple
            return []
        return [c.text for c in found]
