"""The dataset registry: one :class:`DatasetFormat` per name, read by every surface that lists datasets.

An entry says what each surface needs: a one-line description (``--dataset`` help, pickers), where its data lives
by default (a shipped or configured folder) or that the user names a file (with the suffixes it takes, and a
``parse`` of a file's text for uploads), its sets (MedLAMA's full and hard) and the loader. ``load_dataset``,
:func:`available_datasets`, the CLI's ``--dataset`` help and the app's upload all read :data:`FORMATS`, so a new
format is one module with a ``FORMAT`` and one :func:`register` call, nothing else (docs/extending-datasets.md).
"""

from __future__ import annotations

import csv
import hashlib
import inspect
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProbekitError, Registry, UnknownNameError
from .base import Dataset

JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
"""A file with one of these suffixes is read as JSON lines, any other as CSV."""
AUTO = "auto"
"""The upload's format choice that tells the format from the file's first record (:func:`detect`)."""


@dataclass(frozen=True)
class DatasetFormat:
    """One dataset name and what every surface needs to offer it.

    ``load(path, **options)`` reads the data at ``path`` (a folder or a file) and returns a :class:`Dataset`;
    ``location`` gives the shipped or configured folder used when no path is given (None: the user names a file,
    ``file_hint`` says which); ``present(location)`` says whether that data is here (pickers list only what is);
    ``picks`` are the (spec, label) a picker lists then (default: the name and its description). ``sets`` are the
    values of ``--set`` it takes (the first one is the default). A user file format has ``suffixes`` and ``parse(text,
    *, label, fmt, name, version, progress)``, which reads a file's text (``fmt``: ``csv`` or ``jsonl``;
    ``progress`` as :func:`~probekit.datasets.records.read_records` takes it, so the app can show and stop a long
    read): then the app's upload offers it, telling it from the others by ``marks``, the fields only its files have
    (none: the fallback); its ``example`` is a tiny file of it (written as ``suffixes[0]``), which the contract test
    loads and uploads."""

    name: str
    description: str
    load: Callable[..., Dataset]
    location: Callable[[], Path] | None = None
    present: Callable[[Path], bool] | None = None
    picks: tuple[tuple[str, str], ...] = ()
    sets: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    parse: Callable[..., Dataset] | None = None
    marks: tuple[str, ...] = ()
    file_hint: str = ""
    example: str = ""

    @property
    def needs_file(self) -> bool:
        """True when there is no default location: the user gives a file (``--data-dir FILE``, an upload)."""
        return self.location is None

    @property
    def uploadable(self) -> bool:
        return self.parse is not None and bool(self.suffixes)

    def here(self) -> list[tuple[str, str]]:
        """(spec, label) for pickers when its data is present at its location; [] otherwise (and for a file format)."""
        if self.location is None:
            return []
        where = self.location()
        if not (self.present(where) if self.present is not None else where.exists()):
            return []
        return list(self.picks) or [(self.name, self.description)]


def _check_format(name: str, fmt) -> None:
    """The rules every entry obeys, checked at registration: the surfaces rely on them."""
    if not isinstance(fmt, DatasetFormat):
        raise ProbekitError(f"dataset {name!r} must be a probekit.datasets.formats.DatasetFormat, got "
                            f"{type(fmt).__name__}")
    if fmt.name != name:
        raise ProbekitError(f"dataset {fmt.name!r} registered under another name, {name!r}")
    if not name or ":" in name or name != name.strip() or " " in name:
        raise ProbekitError(f"dataset name {name!r} must be one word without ':' (a spec is name or name:set)")
    text = fmt.description.strip()
    if not text or "\n" in text:
        raise ProbekitError(f"dataset {name!r} needs a one-line description (shown in --dataset help and pickers)")
    bad = [s for s in fmt.suffixes if not s.startswith(".") or s != s.lower()]
    if bad:
        raise ProbekitError(f"dataset {name!r}: suffix {bad[0]!r} must be lower case and start with '.'")
    if fmt.parse is not None and not fmt.suffixes:
        raise ProbekitError(f"dataset {name!r} parses uploads but names no file suffixes")
    if fmt.parse is not None and "progress" not in inspect.signature(fmt.parse).parameters:
        raise ProbekitError(f"dataset {name!r}: its parse must take progress= (reading a large upload is shown "
                            "with a bar and a Stop)")
    if fmt.suffixes and not fmt.example.strip():
        raise ProbekitError(f"dataset {name!r} takes files but has no example (a tiny file of its format)")
    if fmt.needs_file and not fmt.file_hint:
        raise ProbekitError(f"dataset {name!r} has no default location, so it needs a file_hint (what file to give)")


FORMATS: Registry = Registry("dataset")
FORMATS.add_check(_check_format)


def register(fmt: DatasetFormat) -> DatasetFormat:
    """Add ``fmt`` to :data:`FORMATS` under its name (checked by the registry's rules)."""
    FORMATS[fmt.name] = fmt
    return fmt


def unregister(name: str) -> None:
    """Remove a registered format (tests and plugins that add one for a while)."""
    FORMATS.pop(name, None)


def get_format(name: str) -> DatasetFormat:
    """The format called ``name``; unknown names fail with the close ones and the list."""
    return FORMATS.get_or_raise(name)


# ---------------------------------------------------------------- what the surfaces show
def available_datasets() -> list[tuple[str, str]]:
    """(spec, label) for pickers; a spec is ``name`` or ``name:set``. Only what is present here."""
    return [pick for fmt in FORMATS.values() for pick in fmt.here()]


def set_names() -> list[str]:
    """Every ``--set`` any dataset takes, in registration order."""
    out: list[str] = []
    for fmt in FORMATS.values():
        out += [s for s in fmt.sets if s not in out]
    return out


def dataset_help() -> str:
    """The ``--dataset`` help: every registered name with its description (and sets, or the file it needs)."""
    parts = []
    for fmt in FORMATS.values():
        extra = f" (--set {'|'.join(fmt.sets)})" if fmt.sets else " (--data-dir FILE)" if fmt.needs_file else ""
        parts.append(f"{fmt.name}: {fmt.description}{extra}")
    return "; ".join(parts)


def upload_formats() -> list[DatasetFormat]:
    """The file formats the app's upload offers (those with ``parse`` and suffixes), in registration order."""
    return [f for f in FORMATS.values() if f.uploadable]


def upload_choices() -> list[tuple[str, str]]:
    """(choice, label) for the upload's format picker: :data:`AUTO` first, then each file format."""
    return [(AUTO, "Detect from the file"), *((f.name, f"{f.name}: {f.description}") for f in upload_formats())]


def upload_suffixes() -> list[str]:
    """Every suffix an upload may have, without the dot (what a file picker filters on)."""
    out: list[str] = []
    for fmt in upload_formats():
        out += [s[1:] for s in fmt.suffixes if s[1:] not in out]
    return out


def upload_help() -> str:
    """One line per upload format (a Markdown list): its name, description and the file it wants."""
    return "\n".join(f"- {f.name}: {f.description} ({f.file_hint})" for f in upload_formats())


def text_format(filename: str) -> str:
    """``jsonl`` or ``csv``: how a user file's records are written, by its suffix."""
    return "jsonl" if filename.lower().endswith(JSONL_SUFFIXES) else "csv"


def first_fields(text: str, fmt: str) -> set[str]:
    """The field names of ``text``'s first record: the CSV header or the first JSON object's keys (none when that
    record does not read: the format's own parser then says why, with the line)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if fmt == "jsonl":
        try:
            row = json.loads(first)
        except json.JSONDecodeError:
            return set()
        return set(row) if isinstance(row, dict) else set()
    try:
        return {c.strip() for c in next(csv.reader(io.StringIO(first)), [])}
    except csv.Error:
        return set()


def detect(filename: str, text: str) -> DatasetFormat:
    """The upload format of a file: among those taking its suffix, the one whose ``marks`` its first record holds,
    else the one without marks (the fallback); one line when none fits or two do."""
    suffix = Path(filename).suffix.lower()
    fits = [f for f in upload_formats() if suffix in f.suffixes]
    if not fits:
        raise ProbekitError(f"{filename}: no dataset format takes {suffix or 'a file without a suffix'} files; "
                            f"use {', '.join('.' + s for s in upload_suffixes())}")
    fields = first_fields(text, text_format(filename))
    marked = [f for f in fits if f.marks and set(f.marks) <= fields]
    if len(marked) > 1:
        raise ProbekitError(f"{filename}: its first record fits {' and '.join(f.name for f in marked)}; pick the "
                            "format")
    if marked:
        return marked[0]
    fallback = [f for f in fits if not f.marks]
    if not fallback:
        raise ProbekitError(f"{filename}: not a {' or '.join(f.name for f in fits)} file (its first record has none of "
                            f"{', '.join(sorted({m for f in fits for m in f.marks}))}); pick the format")
    return fallback[0]


def parse_upload(filename: str, data: bytes, *, fmt: str = AUTO,
                 progress: Callable[[int, int, str], None] | None = None) -> Dataset:
    """An uploaded file's bytes as a :class:`Dataset`, read by the format ``fmt`` (a registered upload format, or
    :data:`AUTO`: :func:`detect`); every refusal is one line naming the file. ``progress(line, lines, stage)`` is
    told how far the reading is."""
    digest = hashlib.sha1(data).hexdigest()[:12]
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ProbekitError(f"{filename}: not UTF-8 text (byte {e.start}); save it as UTF-8 CSV or JSONL") from None
    if fmt == AUTO:
        chosen = detect(filename, text)
    else:
        chosen = get_format(fmt)
        if not chosen.uploadable:
            raise UnknownNameError("upload format", fmt, [f.name for f in upload_formats()])
    assert chosen.parse is not None  # uploadable
    return chosen.parse(text, label=filename, fmt=text_format(filename), name=f"upload:{filename}", version=digest,
                        progress=progress)
