"""What every vocabulary source yields and shares: :class:`Entry` rows, the :class:`Source` handle, the content
fingerprint and a UTF-8 line reader that names the line it cannot decode."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataFormatError, ProbekitError


@dataclass(frozen=True)
class Entry:
    """One vocabulary row: the name that is encoded and the concept it names (``""`` when the source has none)."""

    name: str
    cui: str = ""
    types: str = ""
    """The concept's semantic types (TUIs joined by ``|``) when the source gives them."""


@dataclass
class Source:
    """A readable vocabulary source: ``kind`` (a :data:`SOURCES` name), its files and reading options."""

    kind: str
    paths: tuple[Path, ...]
    options: dict = field(default_factory=dict)
    reader: Any = field(default=None, repr=False, compare=False)
    """The registered reader of ``kind`` (:data:`probekit.vocab.sources.SOURCES`): ``read(source)`` yields rows."""

    def rows(self) -> Iterator[Entry]:
        """Every row in file order (streamed); raises one :class:`DataFormatError` for bad input."""
        return self.reader.read(self)

    def fingerprint(self) -> str:
        """A hash of the files' bytes (read in blocks) and of the options: what the vocabulary was built from."""
        return fingerprint(self.paths, {"kind": self.kind, **self.options})

    def describe(self) -> dict:
        return {"kind": self.kind, "paths": [str(p) for p in self.paths], "options": dict(self.options)}


def fingerprint(paths, options: dict) -> str:
    """sha1 of ``options`` (as sorted JSON) and of each file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha1(json.dumps(options, sort_keys=True, default=str).encode())
    for p in paths:
        try:
            with open(p, "rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
        except OSError as e:
            raise ProbekitError(f"cannot read vocabulary file {p}: {e.strerror or e}") from None
        h.update(b"\0")
    return h.hexdigest()[:16]


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text without its newline) of a UTF-8 file, streamed; a non-UTF-8 line is one error naming it."""
    try:
        fh = open(path, "rb")
    except OSError as e:
        raise ProbekitError(f"cannot read vocabulary file {path}: {e.strerror or e}") from None
    with fh:
        for number, raw in enumerate(fh, start=1):
            yield number, decode_line(raw, number, where=str(path))


def decode_line(raw: bytes, number: int, *, where: str) -> str:
    """Line ``number`` of a UTF-8 file as text, without its newline (and the first line without a byte-order
    mark); not UTF-8 is one error naming the file, line and byte."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{where}, line {number}: not UTF-8 (byte {e.start + 1} of the line)") from None
    if number == 1:
        text = text.removeprefix("\ufeff")
    return text.rstrip("\r\n")
