"""A tour: a name and an ordered list of steps, each a saved view (the page and its share link's parameters) with
a title and a one-line note. Plain values only, checked once here, so the store, the YAML file, the CLI and the
presenter all hold the same rules.

>>> s = step_from_link("/benchmark?runs=r1,r2&k=10&set=full", title="Full vs hard")
>>> s.page, s.params, s.link
('benchmark', {'runs': 'r1,r2', 'k': '10', 'set': 'full'}, '/benchmark?runs=r1%2Cr2&k=10&set=full')
>>> step_from_link("http://host:8501/?model=default&query=may_treat:0003", title="A query").page
'probe'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..errors import ProbekitError

DEFAULT_PAGE = "probe"
"""The app's default page (served at ``/``): a share link without a path opens it."""
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TITLE, MAX_NOTE, MAX_STEPS = 120, 300, 100
PRESENT_KEYS = ("tour", "present", "step")
"""URL parameters of the presenter itself: never part of a step's view."""


def check_name(name) -> str:
    """A tour name as it goes into a URL (``?tour=NAME``): letters, digits, ``_ . -``, at most 64 characters.

    >>> check_name(" grand-rounds ")
    'grand-rounds'
    >>> check_name("my talk")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    probekit.errors.ProbekitError: tour name 'my talk' must be 1 to 64 letters, digits, ... letter or digit
    """
    text = str(name if name is not None else "").strip()
    if not NAME_RE.match(text):
        raise ProbekitError(f"tour name {text!r} must be 1 to 64 letters, digits, '_', '.' or '-' (it goes into a "
                            "URL), starting with a letter or digit")
    return text


def _one_line(what: str, value, limit: int, *, required: bool) -> str:
    text = " ".join(str(value if value is not None else "").split())  # a note is one line: newlines become spaces
    if required and not text:
        raise ProbekitError(f"a step's {what} is empty; give it a few words (it is shown as the step's heading)")
    if len(text) > limit:
        raise ProbekitError(f"a step's {what} is too long ({len(text)} characters; at most {limit})")
    return text


@dataclass(frozen=True)
class Step:
    """One saved view: ``page`` (the app page's URL path, e.g. ``benchmark``) and ``params`` (its share link's
    URL parameters), shown under ``title`` with ``note``."""

    page: str
    params: dict[str, str]
    title: str
    note: str = ""

    @property
    def link(self) -> str:
        """The step's share link, relative to the app (``/benchmark?runs=…``; the default page is ``/``)."""
        path = "" if self.page == DEFAULT_PAGE else self.page
        return f"/{path}?{urlencode(self.params)}" if self.params else f"/{path}"


@dataclass(frozen=True)
class Tour:
    name: str
    steps: tuple[Step, ...] = field(default_factory=tuple)


def make_step(page: str, params: Mapping, *, title, note="") -> Step:
    """A checked :class:`Step` (the presenter's own parameters are dropped from ``params``)."""
    page = str(page or DEFAULT_PAGE).strip().strip("/") or DEFAULT_PAGE
    if not re.match(r"^[a-z][a-z0-9_-]*$", page):
        raise ProbekitError(f"a step's page {page!r} is no page of the app (a name like 'benchmark')")
    clean = {str(k): str(v) for k, v in params.items() if v is not None and str(v) != "" and k not in PRESENT_KEYS}
    return Step(page=page, params=clean, title=_one_line("title", title, MAX_TITLE, required=True),
                note=_one_line("note", note, MAX_NOTE, required=False))


def step_from_link(link: str, *, title, note="") -> Step:
    """A step from a share link: a full URL, or its path and query (``/layers?sweep=…``, ``?model=…``)."""
    text = str(link or "").strip()
    if not text:
        raise ProbekitError("a step's link is empty; copy a page's share link")
    parts = urlsplit(text)
    page = parts.path.rstrip("/").rsplit("/", 1)[-1] if parts.path else ""
    return make_step(page or DEFAULT_PAGE, dict(parse_qsl(parts.query, keep_blank_values=False)), title=title,
                     note=note)
