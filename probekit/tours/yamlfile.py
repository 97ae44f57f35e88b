"""A tour as a small YAML file, so a talk prepared on one machine is given on another.

The file holds the tour's name, its steps (title, note, share link) and the text of every document a Context
step names by its hash (documents live next to the database, so another machine would not hold them). It is
written through the one atomic writer; reading it checks everything, and a malformed file gets one line naming
the file, line and column::

    tour: grand-rounds
    steps:
      - title: What the model answers
        note: Metformin, top 10 among the dataset's entities
        link: /?model=default&dataset=demo&relation=may_treat&query=may_treat:0003
"""

from __future__ import annotations

from pathlib import Path

from .. import atomic
from ..errors import DataFormatError, ProbekitError
from .steps import STEP_KINDS, documents_of
from .tour import Tour, check_name, step_from_link

HEADER = "# probekit tour: `probekit tour import FILE`, then open /?tour={name}&present=1 in the app\n"
_STEP_KEYS = {"title", "note", "link"}


def dumps(tour: Tour) -> str:
    import yaml

    body: dict = {"tour": tour.name, "steps": [{"title": s.title, "note": s.note, "link": s.link}
                                               for s in tour.steps]}
    docs = documents_of(tour)
    if docs:
        body["documents"] = docs
    return HEADER.format(name=tour.name) + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=120)


def export_tour(tour: Tour, path: str | Path) -> Path:
    return atomic.write_text(Path(path), dumps(tour))


def _fail(where: str, message: str) -> DataFormatError:
    return DataFormatError(f"{where}: {message}")


def loads(text: str, *, where: str = "tour file") -> tuple[Tour, dict[str, str]]:
    """The tour in ``text`` and the documents it carries (hash -> text); one line per problem, naming ``where``
    and, for YAML syntax, the line and column."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        at = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark is not None else where
        raise _fail(at, f"not valid YAML ({problem})") from None
    if not isinstance(data, dict) or "tour" not in data or "steps" not in data:
        raise _fail(where, "not a tour file (it needs 'tour: NAME' and a 'steps:' list)")
    extra = set(data) - {"tour", "steps", "documents"}
    if extra:
        raise _fail(where, f"unknown key {sorted(extra)[0]!r} (a tour file has tour, steps, documents)")
    try:
        name = check_name(data["tour"])
    except ProbekitError as e:
        raise _fail(where, str(e)) from None
    raw_steps = data["steps"]
    if not isinstance(raw_steps, list) or not raw_steps:
        raise _fail(where, "'steps' must be a non-empty list of steps (title, note, link)")
    steps = []
    for i, raw in enumerate(raw_steps, start=1):
        if not isinstance(raw, dict):
            raise _fail(where, f"step {i} is not a mapping of title, note and link")
        if set(raw) - _STEP_KEYS or "link" not in raw or "title" not in raw:
            bad = sorted(set(raw) - _STEP_KEYS)
            raise _fail(where, f"step {i}: " + (f"unknown key {bad[0]!r}" if bad else "needs a title and a link")
                        + " (a step has title, note, link)")
        try:
            step = step_from_link(str(raw["link"]), title=raw["title"], note=raw.get("note") or "")
            STEP_KINDS.get_or_raise(step.page)
        except ProbekitError as e:
            raise _fail(where, f"step {i}: {e}") from None
        steps.append(step)
    docs = data.get("documents") or {}
    if not isinstance(docs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in docs.items()):
        raise _fail(where, "'documents' must map a document's hash to its text")
    return Tour(name, tuple(steps)), docs


def read_tour(path: str | Path) -> tuple[Tour, dict[str, str]]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise _fail(str(path), f"not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise _fail(str(path), f"cannot read it ({e.strerror or e})") from None
    return loads(text, where=str(path))
