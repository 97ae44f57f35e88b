"""Segmentation (Yao et al.): pool entities in a document and segments around the target O_t.

Rules (what the tests pin down):

* **Matching.** Pool names are found case-insensitively at word boundaries (a name's inner spaces match
  any run of whitespace). Every occurrence counts. Overlaps are settled *longest match first*
  ("nasal obstruction" wins over "obstruction"); equal lengths: the leftmost wins. Pool names that are
  the same after :func:`~probekit.types.normalize_name` count as one entity (first spelling kept).
* **Anchor.** O_t's first occurrence (``occurrence`` picks another). O_t missing: :class:`ProbekitError`.
* **Boundaries.** With mentions m_0 … m_{K-1} in document order and the anchor m_a, the document is cut
  into K segments, one mention each, together covering every character: S1 = [end of m_{a-1}, start of
  m_{a+1}) (document start / end where there is no neighbour); a left segment i < a = [end of m_{i-1},
  end of m_i); a right segment i > a = [start of m_i, start of m_{i+1}). So each segment runs from its
  entity away from O_t to just before the next pool entity, and the text between two neighbouring
  entities belongs to the one nearer O_t.
* **Order.** S2 is on the ``first_side`` (default ``left``: the entity just before O_t), S3 on the other
  side, and so on alternately; once one side has no entity left, the rest come from the other side.
  A document with no pool entity besides O_t gives S1 = the whole document and no further step.
* **Repeats.** An entity occurring twice gives two segments (two steps whose O_a is the same entity);
  a further occurrence of O_t is an ordinary segment whose O_a has role ``target`` (never in UCM).
* **Roles.** O_t = ``target``; O_cor (``cor``) = the other true objects of (S, R); O_incor (``incor``) = the
  rest of the pool. **Negative target**: re-centre on the first O_incor in segment order; it becomes the
  target and the original O_t an ordinary O_cor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import ProbekitError
from ..types import normalize_name

SIDES = ("left", "right")
MAX_DOCUMENT_CHARS = 200_000


# ---------------------------------------------------------------- matching
@dataclass(frozen=True)
class Mention:
    """One occurrence of a pool entity: ``name`` is the pool spelling, ``text`` the document's."""

    start: int
    end: int
    name: str
    text: str


def unique_names(names: Iterable[str]) -> list[str]:
    """Pool names deduplicated by :func:`normalize_name` (first spelling and order kept).

    >>> unique_names(["Pain", "pain ", "fever", "", "Fever"])
    ['Pain', 'fever']
    """
    seen: dict[str, str] = {}
    for n in names:
        n = " ".join(str(n).split())
        key = normalize_name(n)
        if key and key not in seen:
            seen[key] = n
    return list(seen.values())


def _pattern(name: str) -> re.Pattern:
    words = normalize_name(name).split()
    return re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, words)) + r"(?!\w)", re.IGNORECASE)


def match_entities(document: str, names: Iterable[str]) -> list[Mention]:
    """Every occurrence of the pool ``names`` in ``document``, in document order, without overlaps.

    Case-insensitive, at word boundaries, longest match first (ties: leftmost first).

    >>> [(m.start, m.text) for m in match_entities("Nasal obstruction, then obstruction.",
    ...                                            ["obstruction", "nasal obstruction"])]
    [(0, 'Nasal obstruction'), (24, 'obstruction')]
    """
    folded = " ".join(document.lower().split())
    found: list[tuple[int, int, int, str]] = []
    for order, name in enumerate(unique_names(names)):
        if normalize_name(name) not in folded:  # cheap filter before the regex
            continue
        for m in _pattern(name).finditer(document):
            found.append((m.start(), m.end(), order, name))
    found.sort(key=lambda t: (-(t[1] - t[0]), t[0], t[2]))
    taken = bytearray(len(document))
    kept: list[Mention] = []
    for start, end, _, name in found:
        if any(taken[start:end]):
            continue
        taken[start:end] = b"\x01" * (end - start)
        kept.append(Mention(start, end, name, document[start:end]))
    return sorted(kept, key=lambda m: m.start)


# ---------------------------------------------------------------- segmentation
@dataclass(frozen=True)
class Segment:
    """S_order: a span of the document holding exactly one pool entity (``mention``)."""

    order: int
    start: int
    end: int
    mention: Mention
    side: str  # anchor | left | right
    text: str

    @property
    def entity(self) -> str:
        return self.mention.name


@dataclass(frozen=True)
class Segmentation:
    """A document cut around the target: ``segments`` in the order they are added (S1 first)."""

    document: str
    target: str
    anchor: Mention
    segments: tuple[Segment, ...]
    mentions: tuple[Mention, ...]
    first_side: str = "left"

    def __len__(self) -> int:
        return len(self.segments)

    def document_order(self, n: int) -> list[Segment]:
        """S1..Sn sorted by their position in the document."""
        return sorted(self.segments[:n], key=lambda s: s.start)

    def to_dict(self) -> dict:
        return {"target": self.target, "first_side": self.first_side,
                "segments": [{"order": s.order, "start": s.start, "end": s.end, "side": s.side,
                              "entity": s.entity, "text": s.text} for s in self.segments]}


def segment(document: str, mentions: Sequence[Mention], anchor: int, *, first_side: str = "left") -> Segmentation:
    """Cut ``document`` around ``mentions[anchor]`` (mentions in document order, not overlapping).

    >>> doc = "a X b T c Y d"
    >>> ms = [Mention(2, 3, "X", "X"), Mention(6, 7, "T", "T"), Mention(10, 11, "Y", "Y")]
    >>> [(s.order, s.side, s.text) for s in segment(doc, ms, 1).segments]
    [(1, 'anchor', ' b T c '), (2, 'left', 'a X'), (3, 'right', 'Y d')]
    """
    if first_side not in SIDES:
        raise ProbekitError(f"unknown side {first_side!r}; available: {', '.join(SIDES)}")
    ms = list(mentions)
    if not 0 <= anchor < len(ms):
        raise ProbekitError(f"anchor {anchor} out of range: {len(ms)} mentions")
    for a, b in zip(ms, ms[1:]):
        if b.start < a.end:
            raise ProbekitError("mentions must be in document order and must not overlap")
    k, n = len(ms), len(document)
    spans = {anchor: (ms[anchor - 1].end if anchor > 0 else 0, ms[anchor + 1].start if anchor + 1 < k else n)}
    for i in range(anchor):
        spans[i] = (ms[i - 1].end if i > 0 else 0, ms[i].end)
    for i in range(anchor + 1, k):
        spans[i] = (ms[i].start, ms[i + 1].start if i + 1 < k else n)
    order, sides = [anchor], ["anchor"]
    left, right, turn = anchor - 1, anchor + 1, first_side
    while left >= 0 or right < k:
        side = turn if (left >= 0 if turn == "left" else right < k) else ("right" if turn == "left" else "left")
        if side == "left":
            order.append(left)
            left -= 1
        else:
            order.append(right)
            right += 1
        sides.append(side)
        turn = "right" if side == "left" else "left"
    segs = tuple(Segment(j + 1, spans[i][0], spans[i][1], ms[i], side, document[spans[i][0]:spans[i][1]])
                 for j, (i, side) in enumerate(zip(order, sides)))
    return Segmentation(document, ms[anchor].name, ms[anchor], segs, tuple(ms), first_side)


def check_document(document: str) -> str:
    """Refuse empty or huge documents with a clear message."""
    if not isinstance(document, str) or not document.strip():
        raise ProbekitError("the document is empty: paste or upload a text that mentions the target")
    if len(document) > MAX_DOCUMENT_CHARS:
        raise ProbekitError(f"the document is too long ({len(document):,} characters; at most "
                            f"{MAX_DOCUMENT_CHARS:,}): keep the part around the target")
    return document


def segment_document(document: str, target: str, pool: Iterable[str], *, first_side: str = "left",
                     occurrence: int = 0) -> Segmentation:
    """Match the pool (plus ``target``) in ``document`` and cut it around O_t's ``occurrence``-th mention."""
    check_document(document)
    if not normalize_name(target):
        raise ProbekitError("no target entity O_t given")
    mentions = match_entities(document, [target, *pool])
    tkey = normalize_name(target)
    hits = [i for i, m in enumerate(mentions) if normalize_name(m.name) == tkey]
    if not hits:
        inside = [m.text for m in mentions if tkey in normalize_name(m.text)]
        extra = f" (it only occurs inside the longer entity {inside[0]!r})" if inside else ""
        raise ProbekitError(f"the target {target!r} does not occur in the document{extra}; matching is "
                            "case-insensitive at word boundaries")
    if not 0 <= occurrence < len(hits):
        raise ProbekitError(f"the target occurs {len(hits)} time(s); occurrence {occurrence} does not exist")
    return segment(document, mentions, hits[occurrence], first_side=first_side)


def role_of(name: str, target: str, golds: Iterable[str]) -> str:
    """``target`` (O_t), ``cor`` (another true object) or ``incor`` (any other pool entity)."""
    key = normalize_name(name)
    if key == normalize_name(target):
        return "target"
    return "cor" if key in {normalize_name(g) for g in golds} else "incor"


def negative_target(seg: Segmentation, golds: Iterable[str]) -> Segmentation:
    """Re-centre on the first O_incor in segment order (the original O_t becomes an ordinary O_cor)."""
    golds = [*golds, seg.target]
    for s in seg.segments:
        if role_of(s.entity, seg.target, golds) == "incor":
            anchor = seg.mentions.index(s.mention)
            return segment(seg.document, seg.mentions, anchor, first_side=seg.first_side)
    raise ProbekitError("negative-target needs an incorrect pool entity (O_incor) in the document; "
                        "every pool entity found is a true object")


def document_pieces(seg: Segmentation, golds: Iterable[str]) -> list[dict]:
    """The document as consecutive pieces for highlighting: ``{"text", "role", "segment"}`` where role is
    ``target`` / ``cor`` / ``incor`` for a pool entity and None for other text; ``segment`` = its S-number.

    >>> s = segment("a X b T", [Mention(2, 3, "X", "X"), Mention(6, 7, "T", "T")], 1)
    >>> [(p["text"], p["role"], p["segment"]) for p in document_pieces(s, ["T"])]
    [('a ', None, 2), ('X', 'incor', 2), (' b ', None, 1), ('T', 'target', 1)]
    """
    golds = list(golds)
    out = []
    for s in sorted(seg.segments, key=lambda x: x.start):
        m = s.mention
        for text, role in ((seg.document[s.start:m.start], None),
                           (seg.document[m.start:m.end], role_of(m.name, seg.target, golds)),
                           (seg.document[m.end:s.end], None)):
            if text:
                out.append({"text": text, "role": role, "segment": s.order})
    return out

