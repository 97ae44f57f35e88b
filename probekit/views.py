"""What a page shows, as URL parameters and back (a share link holds the whole view).

A view is a plain dataclass; :func:`probe_params` / :func:`context_params` turn one into the exact set of URL
parameters that reopens it, and :func:`probe_view` / :func:`context_view` read them back. Only the parameters of
the view's own kind are written (a typed-query link holds no ``relation=``/``query=``; a dataset-query link no
``text=``), so a page that replaces its URL with these drops every stale parameter. Reading is forgiving: a value
that does not parse (``k=abc``, ``layer=-1``, an unknown pooling) is left out and named in ``ignored``, so the
page opens with its default there and can say so.

Probe options are described by :class:`probekit.probes.Option`-like objects (``name``, ``default``, ``choices``,
``value_type``, ``advanced``); this module only reads those attributes, so it imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

DATASET, TEXT = "dataset", "text"
"""Probe query sources: a query of the dataset, or a typed cloze query."""
GOLD_SEP = ";"
MAX_K = 50
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_VIEW_KEYS = ("model", "dataset", "device")
PROBE_KEYS = (*_VIEW_KEYS, "source", "relation", "query", "text", "subject", "golds", "vocab", "k", "probe",
              "every")
CONTEXT_KEYS = (*_VIEW_KEYS, "relation", "query", "target", "variant", "probe", "permutations", "seed", "doc",
                "corpus")


@dataclass(frozen=True)
class ProbeView:
    """Everything the Probe page needs to show one result again."""

    model: str | None = None
    dataset: str | None = None
    source: str = DATASET
    relation: str | None = None
    query: str | None = None
    text: str | None = None
    subject: str | None = None
    golds: tuple[str, ...] = ()
    vocab: str | None = None
    k: int | None = None
    probe: str | None = None
    options: dict = field(default_factory=dict)
    device: str | None = None
    every: bool = False
    """Every probe usable with the model ran on the query (``probe`` and ``options`` still name the one whose
    options the page shows), as :func:`probekit.probes.every.every_probe` runs them."""


@dataclass(frozen=True)
class ContextView:
    """One triple on the Context page: (relation, query, target), the variant, and the document (by the hash
    it is stored under, or a corpus it was searched in)."""

    model: str | None = None
    dataset: str | None = None
    relation: str | None = None
    query: str | None = None
    target: str | None = None
    variant: str | None = None
    probe: str | None = None
    permutations: int | None = None
    seed: int | None = None
    doc: str | None = None
    corpus: str | None = None
    device: str | None = None


def _put(out: dict, key: str, value) -> None:
    if value is None or value == "" or value == ():
        return
    out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)


def _encode_options(out: dict, options: Mapping, spec: Iterable) -> None:
    """Each option of the probe with a value; advanced ones (batch size, length limits) only when changed."""
    for o in spec:
        if o.name not in options or o.name in out:
            continue
        value = options[o.name]
        if o.advanced and value == o.default:
            continue
        _put(out, o.name, value)


def probe_params(view: ProbeView, spec: Iterable = ()) -> dict[str, str]:
    """The URL parameters of ``view``; ``spec`` is the probe's options (``probe.options``).

    >>> probe_params(ProbeView(source="text", relation="may_treat", text="A treats [MASK].", golds=("b", "c"), k=5))
    {'source': 'text', 'text': 'A treats [MASK].', 'golds': 'b;c', 'k': '5'}
    """
    out: dict[str, str] = {}
    _put(out, "model", view.model)
    _put(out, "dataset", view.dataset)
    _put(out, "device", view.device)
    _put(out, "source", view.source)
    if view.source == TEXT:
        _put(out, "text", view.text)
        if view.text and "[X]" in view.text:
            _put(out, "subject", view.subject)
        _put(out, "golds", GOLD_SEP.join(g.strip() for g in view.golds if g.strip()))
    else:
        _put(out, "relation", view.relation)
        _put(out, "query", view.query)
    _put(out, "vocab", view.vocab)
    _put(out, "k", view.k)
    _put(out, "probe", view.probe)
    if view.every:  # only when on: a link of one probe stays as it was
        _put(out, "every", True)
    _encode_options(out, view.options, spec)
    return out


def _int(params: Mapping, key: str, lo: int, hi: int, ignored: list) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        ignored.append(key)
        return None
    return value


def _option_value(o, raw: str):
    """``raw`` parsed as option ``o``'s type and checked against its choices; raises ValueError if it is not one."""
    kind = o.value_type
    text = str(raw).strip()
    value: bool | int | float | str
    if kind is bool:
        if text.lower() not in _TRUE + _FALSE:
            raise ValueError(raw)
        value = text.lower() in _TRUE
    elif kind in (int, float):
        number: float = kind(text)  # an int for int options (int is a float to the type checker)
        if number < 0:
            raise ValueError(raw)
        value = number
    else:
        value = text
    if o.choices and value not in o.choices:
        raise ValueError(raw)
    return value


def decode_options(params: Mapping, spec: Iterable, ignored: list | None = None) -> dict:
    """The options of ``spec`` present in ``params``, parsed; bad values are left out (and named in ``ignored``).

    Option names never collide with the view's own keys (``k``, ``query``…): those are read first.
    """
    ignored = ignored if ignored is not None else []
    out = {}
    for o in spec:
        if o.name in params and o.name not in PROBE_KEYS:
            try:
                out[o.name] = _option_value(o, params[o.name])
            except (TypeError, ValueError):
                ignored.append(o.name)
    return out


def probe_view(params: Mapping, *, spec: Iterable = (), ignored: list | None = None) -> ProbeView:
    """The :class:`ProbeView` in ``params`` (e.g. ``st.query_params``); ``spec`` is the named probe's options.

    An old link (before ``source=``) is a typed query when it has ``text=``.

    >>> v = probe_view({"text": "A treats [MASK].", "relation": "may_treat", "k": "x"}, ignored=(bad := []))
    >>> v.source, v.relation, v.k, bad
    ('text', None, None, ['k'])
    >>> probe_view({"every": "true"}).every, probe_view({"every": "maybe"}, ignored=(bad := [])).every, bad
    (True, False, ['every'])
    """
    ignored = ignored if ignored is not None else []
    get = params.get
    source = get("source") or (TEXT if get("text") is not None else DATASET)
    if source not in (DATASET, TEXT):
        ignored.append("source")
        source = TEXT if get("text") is not None else DATASET
    typed = source == TEXT
    golds = tuple(g.strip() for g in (get("golds") or "").split(GOLD_SEP) if g.strip()) if typed else ()
    every = str(get("every") or "false").strip().lower()
    if every not in _TRUE + _FALSE:
        ignored.append("every")
    return ProbeView(model=get("model") or None, dataset=get("dataset") or None, device=get("device") or None,
                     every=every in _TRUE, source=source, relation=None if typed else get("relation") or None,
                     query=None if typed else get("query") or None, text=get("text") if typed else None,
                     subject=get("subject") or None if typed else None, golds=golds, vocab=get("vocab") or None,
                     k=_int(params, "k", 1, MAX_K, ignored), probe=get("probe") or None,
                     options=decode_options(params, spec, ignored))


def context_params(view: ContextView) -> dict[str, str]:
    """The URL parameters of ``view`` (a corpus is named only when no stored document is).

    >>> context_params(ContextView(relation="r", query="r:1", target="T", variant="real", doc="ab12", corpus="wiki"))
    {'relation': 'r', 'query': 'r:1', 'target': 'T', 'variant': 'real', 'doc': 'ab12'}
    """
    out: dict[str, str] = {}
    for key in ("model", "dataset", "device", "relation", "query", "target", "variant", "probe"):
        _put(out, key, getattr(view, key))
    if view.variant == "knowledge-random":
        _put(out, "permutations", view.permutations)
    if view.seed:
        _put(out, "seed", view.seed)
    _put(out, "doc", view.doc)
    if not view.doc:
        _put(out, "corpus", view.corpus)
    return out


def context_view(params: Mapping, *, ignored: list | None = None) -> ContextView:
    """The :class:`ContextView` in ``params``; a document hash that is not hexadecimal is ignored."""
    ignored = ignored if ignored is not None else []
    get = params.get
    doc = get("doc") or None
    if doc is not None and not (len(doc) <= 64 and all(c in "0123456789abcdef" for c in doc)):
        ignored.append("doc")
        doc = None
    return ContextView(model=get("model") or None, dataset=get("dataset") or None, device=get("device") or None,
                       relation=get("relation") or None, query=get("query") or None, target=get("target") or None,
                       variant=get("variant") or None, probe=get("probe") or None,
                       permutations=_int(params, "permutations", 1, 10, ignored),
                       seed=_int(params, "seed", 0, 10**6, ignored), doc=doc, corpus=get("corpus") or None)
