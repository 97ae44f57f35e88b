"""Corpus sources, read as a stream of documents in bounded memory.

Four kinds:

* ``lines``: every non-empty line of every file is a document (the shipped elicit corpora: one sentence a line);
* ``txt``: a folder of ``.txt`` files, one document each;
* ``jsonl``: one ``{"id": ..., "text": ...}`` object a line (``id`` optional: the line number);
* ``csv``: a CSV with a named text column (e.g. MIMIC-III ``NOTEEVENTS.csv``'s ``TEXT``; ``ROW_ID`` is the id).

Every file is read as bytes, so bad input is reported precisely: a binary file (a NUL byte) or text that is
not UTF-8 gives the file and the byte offset; a CSV without the column names the columns it has; a corpus with
no text at all says so. The raw bytes are hashed as they stream by, so the index records what it was built from.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .. import atomic, config
from ..errors import DataFormatError, ProbekitError

KINDS = ("lines", "txt", "jsonl", "csv")
BLOCK = 1 << 20
MAX_DOCUMENT_BYTES = 32 << 20
"""A single document larger than this is refused (it could not be held in memory in bounded space)."""
_SAMPLE = 1 << 16


@dataclass(frozen=True)
class Document:
    """One document: ``key`` is its id within the corpus (line number, file name, JSON id, CSV row id)."""

    file: str
    key: str
    text: str


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus is and how to read it; ``spec()`` identifies it independently of its content."""

    kind: str
    root: Path
    files: tuple[Path, ...]
    name: str
    text_column: str | None = None
    id_column: str | None = None

    def rel(self, path: Path) -> str:
        return path.name if self.root.is_file() else str(path.relative_to(self.root))

    def spec(self) -> dict:
        return {"kind": self.kind, "root": str(self.root), "name": self.name, "text_column": self.text_column,
                "id_column": self.id_column}

    def total_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.files)

    def file_records(self) -> list[dict]:
        """Per file: relative path, size, mtime and a hash of a sample of its bytes (the quick fingerprint)."""
        return [_file_record(self, p) for p in self.files]


def _file_record(source: CorpusSource, path: Path) -> dict:
    st = path.stat()
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        h.update(fh.read(_SAMPLE))
        if st.st_size > 2 * _SAMPLE:
            for frac in (0.25, 0.5, 0.75):
                fh.seek(int(st.st_size * frac))
                h.update(fh.read(4096))
            fh.seek(st.st_size - _SAMPLE)
            h.update(fh.read(_SAMPLE))
    return {"path": source.rel(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sample": h.hexdigest()}


def _detect_kind(path: Path) -> str:
    if path.is_dir():
        return "lines" if path.resolve() == config.corpora_dir().resolve() else "txt"
    suffix = path.suffix.lower()
    return {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}.get(suffix, "lines")


def open_source(path: str | Path | None = None, *, kind: str | None = None, text_column: str | None = None,
                id_column: str | None = None, name: str | None = None) -> CorpusSource:
    """Resolve a corpus: ``None`` or ``"elicit"`` is the shipped elicit corpora (``config.corpora_dir()``).

    ``kind`` is detected when not given: the elicit folder is ``lines``, another folder ``txt``, ``.jsonl``
    ``jsonl``, ``.csv`` ``csv``, any other file ``lines``.
    """
    if path in (None, "", "elicit"):
        root = config.corpora_dir()
        if not root.is_dir():
            raise ProbekitError(f"the elicit corpora are not at {root}; set PROBEKIT_CORPORA_DIR")
        kind = kind or "lines"
        name = name or "elicit"
    else:
        root = Path(path).expanduser()
        if not root.exists():
            raise ProbekitError(f"no corpus at {root}")
    root = root.resolve()
    kind = kind or _detect_kind(root)
    if kind not in KINDS:
        raise ProbekitError(f"unknown corpus kind {kind!r}; available: {', '.join(KINDS)}")
    if root.is_dir():
        pattern = "*.txt" if kind == "txt" else "*"
        files = tuple(sorted(p for p in root.glob(pattern) if p.is_file() and not p.name.startswith(".")))
    else:
        files = (root,)
    if not files:
        what = ".txt files" if kind == "txt" else "files"
        raise ProbekitError(f"empty corpus: no {what} in {root}")
    if kind == "csv":
        text_column = text_column or "text"
    return CorpusSource(kind=kind, root=root, files=files, name=name or root.name, text_column=text_column,
                        id_column=id_column)


# ---------------------------------------------------------------- reading
@dataclass
class ReadState:
    """What a read has seen so far: bytes consumed (for progress) and each file's full content hash."""

    bytes_done: int = 0
    hashes: dict = field(default_factory=dict)
    documents: int = 0


def _check_block(name: str, data: bytes, offset: int) -> str:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise DataFormatError(f"{name}: binary file (NUL byte at byte offset {offset + nul}); "
                              "a corpus must be UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = data[e.start:e.start + 1].hex()
        raise DataFormatError(f"{name}: not UTF-8 at byte offset {offset + e.start} (byte 0x{bad}); "
                              "convert the file to UTF-8") from None


def _binary_lines(path: Path, name: str, state: ReadState) -> Iterator[tuple[int, str]]:
    """(line number, decoded line) of a file, read in blocks; the line keeps no newline."""
    h = hashlib.blake2b(digest_size=16)
    offset, line_no, rest = 0, 0, b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(BLOCK)
            h.update(block)
            state.bytes_done += len(block)
            data = rest + block
            if not block:
                cut = len(data)
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    if len(data) > MAX_DOCUMENT_BYTES:
                        raise ProbekitError(f"{name}: a line longer than {MAX_DOCUMENT_BYTES >> 20} MB at byte "
                                            f"offset {offset}")
                    rest = data
                    continue
            chunk, rest = data[:cut], data[cut:]
            if offset == 0 and chunk.startswith(b"\xef\xbb\xbf"):
                chunk, offset = chunk[3:], 3
            text = _check_block(name, chunk, offset)
            offset += len(chunk)
            lines = text.split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            for line in lines:
                line_no += 1
                yield line_no, line
            if not block:
                break
    state.hashes[name] = h.hexdigest()


def _read_lines(source: CorpusSource, path: Path, state: ReadState) -> Iterator[Document]:
    name = source.rel(path)
    for line_no, line in _binary_lines(path, name, state):
        text = line.strip()
        if text:
            yield Document(name, str(line_no), text)


def _read_txt(source: CorpusSource, path: Path, state: ReadState) -> Iterator[Document]:
    name = source.rel(path)
    size = path.stat().st_size
    if size > MAX_DOCUMENT_BYTES:
        raise ProbekitError(f"{name}: {size >> 20} MB is too large for one document (limit "
                            f"{MAX_DOCUMENT_BYTES >> 20} MB); split it, or index it as kind 'lines'")
    data = path.read_bytes()
    state.bytes_done += len(data)
    state.hashes[name] = hashlib.blake2b(data, digest_size=16).hexdigest()
    offset = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    text = _check_block(name, data[offset:], offset)
    if text.strip():
        yield Document(name, path.stem, text)


def _read_jsonl(source: CorpusSource, path: Path, state: ReadState) -> Iterator[Document]:
    name = source.rel(path)
    key_field = source.id_column or "id"
    text_field = source.text_column or "text"
    for line_no, line in _binary_lines(path, name, state):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{name}, line {line_no}: not JSON ({e.msg})") from None
        if not isinstance(obj, dict) or text_field not in obj:
            raise DataFormatError(f"{name}, line {line_no}: expected an object with a {text_field!r} field")
        text = obj[text_field]
        if not isinstance(text, str):
            raise DataFormatError(f"{name}, line {line_no}: {text_field!r} must be a string")
        if text.strip():
            yield Document(name, str(obj.get(key_field, line_no)), text)


def _pick_column(header: list[str], wanted: str, name: str) -> int:
    """Index of column ``wanted``: its exact name, else its only case-insensitive match; DataFormatError if none."""
    if wanted in header:
        return header.index(wanted)
    folded = [h.lower() for h in header]
    if folded.count(wanted.lower()) == 1:
        return folded.index(wanted.lower())
    raise DataFormatError(f"{name}: no column {wanted!r} (columns: {', '.join(header) or 'none'}); "
                          "name the text column")


def _read_csv(source: CorpusSource, path: Path, state: ReadState) -> Iterator[Document]:
    """Rows of a CSV corpus. A quoted field may span lines (clinical notes do), but the reader is strict, as the
    triples and free-text readers are: a quote left open to the end of the file, a closing quote followed by
    more text, or a record with more fields than the header is refused with its file and the line where the
    record starts, never merged into its neighbours silently."""
    name = source.rel(path)
    csv.field_size_limit(MAX_DOCUMENT_BYTES)
    lines = (line + "\n" for _, line in _binary_lines(path, name, state))
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as e:
        raise DataFormatError(f"{name}, line 1: not a valid CSV header ({e})") from None
    text_i = _pick_column(header, source.text_column or "text", name)
    id_i = _pick_column(header, source.id_column, name) if source.id_column else None
    if id_i is None:
        id_i = next((i for i, h in enumerate(header) if h.lower() in ("row_id", "id")), None)
    start = reader.line_num + 1  # the physical line where the next record starts
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise DataFormatError(f"{name}, line {start}: malformed CSV ({e}); an opening quote is probably never "
                                  "closed") from None
        if row and len(row) > len(header):
            raise DataFormatError(f"{name}, line {start}: {len(row)} fields but the header has {len(header)}; "
                                  "quote values that contain commas")
        if row and len(row) <= text_i:
            raise DataFormatError(f"{name}, line {start}: {len(row)} fields, the text column is "
                                  f"number {text_i + 1}")
        if row and row[text_i].strip():
            key = row[id_i] if id_i is not None and id_i < len(row) else str(start)
            yield Document(name, key, row[text_i])
        start = reader.line_num + 1


_READERS = {"lines": _read_lines, "txt": _read_txt, "jsonl": _read_jsonl, "csv": _read_csv}


def read_documents(source: CorpusSource, state: ReadState | None = None) -> Iterator[Document]:
    """Stream the documents of ``source``; raises when the corpus turns out to hold no text at all."""
    state = state if state is not None else ReadState()
    reader = _READERS[source.kind]
    for path in source.files:
        try:
            for doc in reader(source, path, state):
                state.documents += 1
                yield doc
        except OSError as e:
            raise ProbekitError(f"cannot read {path}: {e.strerror or e}") from None
    if state.documents == 0:
        raise ProbekitError(f"empty corpus: {source.name} ({len(source.files)} file(s)) holds no text")


def iter_batches(docs: Iterator[Document], *, max_chars: int = 2_000_000, max_docs: int = 50_000):
    """Group documents into batches of bounded size (characters and count)."""
    batch: list[Document] = []
    size = 0
    for doc in docs:
        batch.append(doc)
        size += len(doc.text)
        if size >= max_chars or len(batch) >= max_docs:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def describe(source: CorpusSource) -> str:
    total = sum(os.path.getsize(p) for p in source.files)
    return f"{source.name} ({source.kind}, {len(source.files)} file(s), {total / 1e6:.1f} MB)"


def save_upload(name: str, data: bytes, *, folder: str = "corpora") -> Path:
    """Keep an uploaded corpus (or name list) under ``data/uploads/<folder>``, named by content hash, so an
    index can be built from it and its fingerprint stays stable; refused when larger than the upload limit."""
    import re

    if len(data) > config.MAX_UPLOAD_MB * 2**20:
        raise ProbekitError(f"{name} is larger than {config.MAX_UPLOAD_MB} MB; give a server path instead")
    if not data.strip():
        raise ProbekitError(f"empty corpus: {name} holds no text")
    target = config.data_dir() / "uploads" / folder
    target.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(name).name)[:60] or "upload.txt"
    path = target / f"{hashlib.sha1(data).hexdigest()[:10]}-{safe}"
    if not path.exists():
        atomic.write_bytes(path, data)
    return path
