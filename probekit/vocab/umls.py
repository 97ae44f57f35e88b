"""UMLS Metathesaurus names (``MRCONSO.RRF``, optionally ``MRSTY.RRF``) from the user's own licensed copy.

``MRCONSO.RRF`` rows are ``|``-separated with 18 fields and a trailing empty one:
CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|. ``MRSTY.RRF`` rows have 6:
CUI|TUI|STN|STY|ATUI|CVF|. UMLS ships both sorted by CUI, which is what lets this reader stream: it holds the
rows of one concept at a time and walks ``MRSTY`` alongside ``MRCONSO`` (a merge join), so memory does not grow
with the file. A file that is not sorted by CUI is refused at the first line out of order.

Filters (each optional): languages ``lat`` (default ``ENG``), source vocabularies ``sab``, term types ``tty``,
suppressibility ``suppress`` (the SUPPRESS values kept; default ``N``, i.e. suppressible and obsolete strings are
dropped), semantic types ``tui`` and semantic groups ``groups`` (read from a SemGroups file in NLM's published
``GROUP|Group name|TUI|Type name`` layout, given as ``semgroups_file``; probekit ships no copy).

``names="preferred"`` keeps one name per concept: the concept's preferred name in MRCONSO's own definition, the
row with TS=P, STT=PF and ISPREF=Y; when the filters removed that row, the kept row scoring best on
(TS=P, STT=PF, ISPREF=Y) in that order, the first in file order among equals. ``names="all"`` keeps every
distinct string (exact spelling) of each concept. Every row keeps its CUI, so hits can be judged by concept.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import DataFormatError, ProbekitError, UnknownNameError
from .entries import Entry, Source, text_lines

MRCONSO_FIELDS = ("CUI", "LAT", "TS", "LUI", "STT", "SUI", "ISPREF", "AUI", "SAUI", "SCUI", "SDUI", "SAB", "TTY",
                  "CODE", "STR", "SRL", "SUPPRESS", "CVF")
MRSTY_FIELDS = ("CUI", "TUI", "STN", "STY", "ATUI", "CVF")
NAME_MODES = ("preferred", "all")
_C = {f: i for i, f in enumerate(MRCONSO_FIELDS)}
LIST_OPTIONS = ("lat", "sab", "tty", "suppress", "tui", "groups")


def _split(text: str, path: Path, number: int, n_fields: int) -> list[str]:
    """The fields of one RRF row (``n_fields`` and the trailing empty one), or one error naming the line."""
    parts = text.split("|")
    if len(parts) != n_fields + 1 or parts[-1] != "":
        raise DataFormatError(f"{path}, line {number}: {len(parts) - 1 if parts[-1] == '' else len(parts)} fields, "
                              f"an RRF row of this file has {n_fields} followed by '|'")
    return parts


def _as_set(value) -> frozenset[str] | None:
    if value in (None, "", ()):
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return frozenset(str(v).strip() for v in items if str(v).strip())


def read_semgroups(path: Path) -> dict[str, set[str]]:
    """group abbreviation (``DISO``) -> its TUIs, from NLM's ``SemGroups.txt`` layout (GROUP|name|TUI|type)."""
    out: dict[str, set[str]] = {}
    for number, text in text_lines(path):
        if not text.strip():
            continue
        parts = text.split("|")
        if len(parts) != 4 or not parts[2].startswith("T"):
            raise DataFormatError(f"{path}, line {number}: a SemGroups row is GROUP|Group name|TUI|Type name")
        out.setdefault(parts[0].strip(), set()).add(parts[2].strip())
    return out


class UmlsReader:
    kind = "umls"

    def check_options(self, options: dict) -> dict:
        """The options as stored (lists sorted, so the fingerprint does not depend on their order)."""
        known = {"lat", "sab", "tty", "suppress", "tui", "groups", "semgroups_file", "names", "mrsty"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise ProbekitError(f"unknown umls option {unknown[0]!r}; available: {', '.join(sorted(known))}")
        out: dict = {"names": options.get("names") or "preferred",
                     "lat": sorted(_as_set(options.get("lat")) or {"ENG"}),
                     "suppress": sorted(_as_set(options.get("suppress")) or {"N"})}
        if out["names"] not in NAME_MODES:
            raise ProbekitError(f"unknown names mode {out['names']!r}; available: {', '.join(NAME_MODES)}")
        for key in ("sab", "tty", "tui", "groups"):
            value = _as_set(options.get(key))
            if value:
                out[key] = sorted(value)
        for key in ("mrsty", "semgroups_file"):
            if options.get(key):
                p = Path(options[key]).expanduser()
                if not p.is_file():
                    raise ProbekitError(f"{key} file {p} not found")
                out[key] = str(p)
        if ("tui" in out or "groups" in out) and "mrsty" not in out:
            raise ProbekitError("filtering by semantic type or group needs MRSTY.RRF (give mrsty / --mrsty)")
        if "groups" in out and "semgroups_file" not in out:
            raise ProbekitError("semantic groups need NLM's SemGroups.txt (give semgroups_file / --semgroups-file), "
                                "or filter by TUIs instead")
        return out

    def read(self, source: Source) -> Iterator[Entry]:
        o = source.options
        path = source.paths[0]
        tuis = set(o.get("tui", ()))
        if o.get("groups"):
            table = read_semgroups(Path(o["semgroups_file"]))
            missing = [g for g in o["groups"] if g not in table]
            if missing:
                raise UnknownNameError("semantic group", missing[0], sorted(table))
            for g in o["groups"]:
                tuis |= table[g]
        types = _TypeWalker(Path(o["mrsty"])) if o.get("mrsty") else None
        found = False
        for cui, rows in _concepts(path, o):
            cui_types = types.of(cui) if types is not None else ()
            if tuis and not tuis.intersection(cui_types):
                continue
            tag = "|".join(cui_types)
            if o["names"] == "preferred":
                best = max(rows, key=lambda r: (r[_C["TS"]] == "P", r[_C["STT"]] == "PF", r[_C["ISPREF"]] == "Y"))
                found = True
                yield Entry(best[_C["STR"]], cui, tag)
            else:
                for name in dict.fromkeys(r[_C["STR"]] for r in rows):
                    found = True
                    yield Entry(name, cui, tag)
        if not found:
            raise DataFormatError(f"{path}, line 1: no name is left after the filters "
                                  f"({', '.join(f'{k}={v}' for k, v in o.items() if k in LIST_OPTIONS)})")


def _concepts(path: Path, o: dict) -> Iterator[tuple[str, list[list[str]]]]:
    """(CUI, its rows passing the row filters), one concept at a time, in file order."""
    lat, sup = set(o["lat"]), set(o["suppress"])
    sab, tty = set(o.get("sab", ())), set(o.get("tty", ()))
    cur, last = "", ""
    rows: list[list[str]] = []
    for number, text in text_lines(path):
        if not text:
            continue
        parts = _split(text, path, number, len(MRCONSO_FIELDS))
        cui = parts[0]
        if cui != cur:
            if cui < last:
                raise DataFormatError(f"{path}, line {number}: CUI {cui} after {last}: the file is not sorted by "
                                      "CUI (UMLS ships it sorted; sort it with `sort -t'|' -k1,1`)")
            if rows:
                yield cur, rows
            cur, rows, last = cui, [], cui
        if (parts[_C["LAT"]] in lat and parts[_C["SUPPRESS"]] in sup and (not sab or parts[_C["SAB"]] in sab)
                and (not tty or parts[_C["TTY"]] in tty) and parts[_C["STR"]].strip()):
            rows.append(parts)
    if rows:
        yield cur, rows


class _TypeWalker:
    """The semantic types (TUIs) of each CUI, asked in increasing CUI order: a merge join over MRSTY.RRF."""

    def __init__(self, path: Path):
        self.path = path
        self._lines = text_lines(path)
        self._pending: tuple[str, str] | None = None
        self._last = ""
        self._done = False

    def _next(self) -> tuple[str, str] | None:
        for number, text in self._lines:
            if not text:
                continue
            parts = _split(text, self.path, number, len(MRSTY_FIELDS))
            if parts[0] < self._last:
                raise DataFormatError(f"{self.path}, line {number}: CUI {parts[0]} after {self._last}: the file is "
                                      "not sorted by CUI")
            self._last = parts[0]
            return parts[0], parts[1]
        self._done = True
        return None

    def of(self, cui: str) -> tuple[str, ...]:
        found: list[str] = []
        while not self._done:
            row = self._pending or self._next()
            self._pending = None
            if row is None:
                break
            if row[0] < cui:
                continue
            if row[0] > cui:
                self._pending = row
                break
            found.append(row[1])
        return tuple(dict.fromkeys(found))
