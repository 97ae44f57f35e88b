"""A probe's options as widgets, generated from its :class:`~probekit.probes.Option` list: a new probe's options
appear on every page with no page change, in one vocabulary ("model's default", "last layer")."""

from __future__ import annotations

import contextlib

import streamlit as st

from probekit.bench.views import DEFAULT_TEXT, option_text
from probekit.errors import ProbekitError


# ---------------------------------------------------------------- probe options
def _option_label(name: str) -> str:
    return name.replace("_", " ").capitalize()


NONE_LABELS = DEFAULT_TEXT
"""What an option left unset (None) means, in the same words on every page (the Probe page once said
"mean / layer 6" where Benchmark said "model default / last layer")."""


def none_label(name: str) -> str:
    return option_text(name, None)


UNSET = "__unset__"
"""Stands for None among a selectbox's options: Streamlit reads a None value as "nothing picked" and shows an
empty picker ("Choose an option") on the next rerun, where the user had picked "model's default"."""


def choice_box(where, label: str, choices, *, key: str, format_func, **kwargs):
    """``where.selectbox`` over ``choices``, which may hold None (an option's default): None is kept in the widget
    as :data:`UNSET` and given back as None, so picking it never empties the picker."""
    if st.session_state.get(key, UNSET) is None:  # set by a page or a link as the option's own value
        st.session_state[key] = UNSET
    shown = [UNSET if c is None else c for c in choices]
    value = where.selectbox(label, shown, key=key, format_func=lambda v: format_func(None if v == UNSET else v),
                            **kwargs)
    return None if value == UNSET else value


def _option_widget(where, option, default, key: str):
    """One widget for one :class:`probekit.probes.Option`, chosen by its type and choices. A value already in the
    session state (set by another page, e.g. "open on the Probe page") wins over the default."""
    label, kind, help_ = _option_label(option.name), option.value_type, option.help or None
    preset = key in st.session_state
    current = None if st.session_state.get(key) == UNSET else st.session_state.get(key)
    if preset and not _valid(option, current):  # a widget never holds a value its option refuses
        del st.session_state[key]
        preset = False
    if kind is bool:
        return where.checkbox(label, key=key, help=help_, **({} if preset else {"value": bool(default)}))
    if option.choices:
        choices = list(option.choices)
        if preset and current not in choices:
            del st.session_state[key]
            preset = False
        start = {} if preset else {"index": choices.index(default) if default in choices else 0}
        return choice_box(where, label, choices, key=key, help=help_, **start,
                          format_func=lambda v: option_text(option.name, v))  # one vocabulary on every page
    if kind in (int, float):
        start = {} if preset else {"value": None if default is None else kind(default)}
        low = kind(option.minimum if option.minimum is not None else 0)
        return where.number_input(label, min_value=low, step=kind(1), key=key, persist_state="session", help=help_,
                                  placeholder=option_text(option.name, None), **start)
    start = {} if preset else {"value": "" if default is None else str(default)}
    value = where.text_input(label, key=key, help=help_, placeholder=none_label(option.name), **start)
    return value or (None if default is None else value)


def _valid(option, value) -> bool:
    try:
        option.check(value, "")
    except ProbekitError:
        return False
    return True


def option_state(probe, options: dict, *, key: str) -> dict:
    """Session-state entries that make :func:`probe_option_widgets` open with ``options`` (other pages use it
    to open the Probe page on a run's own options)."""
    spec = {o.name: o for o in probe.options}
    return {(f"{key}_{probe.name}_{name}" if spec[name].advanced else f"{key}_{name}"): value
            for name, value in options.items() if name in spec}


def probe_option_widgets(probe, *, key: str, defaults: dict | None = None, container=None,
                         nested: bool = False, columns: int = 1) -> dict:
    """Widgets for every option of ``probe``, generated from its :class:`~probekit.probes.Option`s: a selectbox
    for choices, a number input for numbers, a checkbox for flags, a text input otherwise; ``advanced`` options
    go in an expander. Widget keys are ``f"{key}_{option name}"`` (advanced ones ``f"{key}_{probe}_{option name}"``);
    ``defaults`` overrides an option's default
    on this page. Returns ``{option name: value}`` for ``probe.rank(..., **values)``.

    A new probe's options therefore appear on every page with no page change. ``nested``: the container is
    already an expander (Streamlit allows no expander in an expander), so advanced options follow under a caption.
    ``columns``: lay the options out in that many columns, row by row (a page at 1024×768 keeps its Start button
    on screen), the advanced ones in the last column.
    """
    defaults = defaults or {}
    where = container if container is not None else st
    cells = list(where.columns(columns)) if columns > 1 else [where]
    values = {}
    advanced = [o for o in probe.options if o.advanced]
    for i, o in enumerate(o for o in probe.options if not o.advanced):
        values[o.name] = _option_widget(cells[i % len(cells)], o, defaults.get(o.name, o.default), f"{key}_{o.name}")
    where = cells[-1]
    if advanced:
        if nested:
            where.caption("Advanced")
        with (contextlib.nullcontext(where) if nested else where.expander("Advanced options")) as box:
            for o in advanced:
                # advanced options (batch size, length limits) differ between probes: one widget per probe, so
                # switching probe never carries retrieval's 50-token limit over to a generative probe
                values[o.name] = _option_widget(box if nested else st, o, defaults.get(o.name, o.default),
                                                f"{key}_{probe.name}_{o.name}")
    return values


def vocab_picker(probe, *, key: str, container=None, help: str | None = None, has_relation: bool = True) -> str:
    """The Candidates radio, opening on ``probe``'s own vocabulary (:meth:`probekit.probes.Probe.vocab`: the
    likelihood probe's is each relation's answers, BEAR's multiple choice) and following the probe when the user
    switches probe; a choice the user makes stands until the probe changes. A shared link that sets the radio
    (``key`` in the session state before the first draw) is kept."""
    from probekit.datasets.base import available_vocabs

    choices = available_vocabs()  # the dataset's vocabularies and every vocabulary built with `probekit vocab build`
    where = container if container is not None else st
    seen = f"{key}__probe"  # the probe the radio's value belongs to
    if st.session_state.get(seen) != probe.name:
        if seen in st.session_state or key not in st.session_state:
            st.session_state[key] = probe.vocab(has_relation=has_relation)
        st.session_state[seen] = probe.name
    if st.session_state.get(key) not in choices:
        st.session_state[key] = probe.vocab(has_relation=has_relation)
    return where.radio("Candidates", choices, key=key, horizontal=True, help=help, persist_state="session")


def option_axes(probe, *, key: str) -> dict:
    """A grid's axes for ``probe``: one multiselect per option with choices (not the advanced ones), opening on the
    option's default; generated from its :class:`~probekit.probes.Option`s like :func:`probe_option_widgets`.
    Returns ``{option name: [values]}`` for a grid spec (an empty pick leaves the option at its default)."""
    axes = [o for o in probe.options if o.choices and not o.advanced]
    if not axes:
        return {}
    out = {}
    per_row = 3  # wide enough that a picked value reads whole
    cols = [c for start in range(0, len(axes), per_row) for c in st.columns(per_row)][:len(axes)]
    for col, o in zip(cols, axes):
        picked = col.multiselect(f"{probe.name}: {_option_label(o.name).lower()}", list(o.choices),
                                 default=[o.default], key=f"{key}_{probe.name}_{o.name}", help=o.help or None,
                                 format_func=lambda v, name=o.name: option_text(name, v))
        if picked:
            out[o.name] = picked
    return out
