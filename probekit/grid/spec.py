"""Probing grids: the cross product of models, datasets, probes (with options), layers and seeds.

A grid is declared in a YAML or JSON file (or a dict from the Grid page)::

    name: minilm-layers
    models: [default]                       # model ids as in the sidebar, or served models (below)
    datasets: [demo, medlama:hard]          # dataset specs as in the sidebar (name[:set])
    relations: [may_treat]                  # optional: only these relations (the vocabulary stays the set's)
    relation_groups: [[may_treat], [may_prevent, may_diagnose]]   # optional axis: one cell per group
    probes:
      - name: retrieval
        options: {pooling: [cls, mean]}     # a list is a grid axis, a scalar a fixed value
    layers: [2, 4, 6]                       # optional: shorthand for the probes' `layer` option
    vocab: heads+tails
    k: 10

A model an inference engine serves (the likelihood probe scores through it) is an id
``openai:http://host:8000/v1#NAME``, or an entry naming its endpoint with what only that model needs::

    models:
      - endpoint: http://10.0.0.5:8000/v1   # its OpenAI-compatible server
        name: llama-3.1-8b                  # the name it serves the model as
        tokenizer: meta-llama/Llama-3.1-8B  # optional: its tokenizer (default PROBEKIT_OPENAI_TOKENIZER, else name)
        api_key_env: LLAMA_KEY              # optional: the variable holding its key (default PROBEKIT_OPENAI_API_KEY)

Each point is a :class:`Cell`, identified by a hash of its settings (:attr:`Cell.key`), so a grid
that stopped (a crash, a killed driver) resumes by skipping the cells already stored.

>>> spec = GridSpec.from_dict({"models": ["default"], "datasets": ["demo"],
...                            "probes": [{"name": "retrieval", "options": {"pooling": ["cls", "mean"]}}],
...                            "layers": [1, 2]})
>>> [(c.options["pooling"], c.options["layer"]) for c in spec.cells()]
[('cls', 1), ('mean', 1), ('cls', 2), ('mean', 2)]
>>> len({c.key for c in spec.cells()})
4
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..datasets import LOADERS
from ..datasets.base import check_vocab
from ..errors import ProbekitError, UnknownNameError, decode_utf8
from ..model_registry import short_model_id
from ..types import MAX_K
from .models import entry_of, model_entry

MAX_CELLS = 5000
FIELDS = ("name", "models", "datasets", "relations", "relation_groups", "probes", "layers", "seeds", "vocab", "k")


@dataclass(frozen=True)
class Cell:
    """One job of a grid: everything that decides its results (the model by id: its revision is
    checked by the run's own settings when it is stored)."""

    model: str
    dataset: str
    probe: str
    options: dict = field(default_factory=dict)
    relations: tuple[str, ...] = ()
    vocab: str = "heads+tails"
    k: int = 10
    seed: int | None = None
    served: dict = field(default_factory=dict)
    """A served model's own tokenizer and key variable (:data:`~probekit.grid.models.SERVED_OPTIONS`); empty for
    every other model."""

    def settings(self) -> dict:
        return {"model": self.model, "dataset": self.dataset, "probe": self.probe,
                "options": dict(sorted(self.options.items())), "relations": list(self.relations),
                "vocab": self.vocab, "k": self.k, "seed": self.seed,
                # only when given, so the key of every other cell stays what it was
                **({"served": dict(sorted(self.served.items()))} if self.served else {})}

    @property
    def key(self) -> str:
        """A stable hash of :meth:`settings`: the same cell in any grid has the same key."""
        text = json.dumps(self.settings(), sort_keys=True, default=str)
        return "c" + hashlib.sha1(text.encode()).hexdigest()[:16]

    @property
    def share_key(self) -> str:
        """What decides the cell's encodings but its layer and relations: cells with the same share key
        encode the same names (and queries) and differ only in which layer they read or which queries they keep.

        >>> a = Cell("m", "d", "retrieval", {"layer": 2, "pooling": "cls"}, relations=("r1",))
        >>> b = Cell("m", "d", "retrieval", {"layer": 4, "pooling": "cls"}, relations=("r2",))
        >>> a.share_key == b.share_key, a.key == b.key
        (True, False)
        """
        s = self.settings()
        s["options"] = {k: v for k, v in s["options"].items() if k != "layer"}
        s.pop("relations")
        return "s" + hashlib.sha1(json.dumps(s, sort_keys=True, default=str).encode()).hexdigest()[:16]

    @property
    def layer(self) -> int | None:
        value = self.options.get("layer")
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    @property
    def label(self) -> str:
        opts = ", ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{short_model_id(self.model)} · {self.dataset} · {self.probe}" + (f" ({opts})" if opts else "")

    @classmethod
    def from_settings(cls, s: dict) -> Cell:
        return cls(model=s["model"], dataset=s["dataset"], probe=s["probe"], options=dict(s.get("options") or {}),
                   relations=tuple(s.get("relations") or ()), vocab=s.get("vocab", "heads+tails"),
                   k=int(s.get("k", 10)), seed=s.get("seed"), served=dict(s.get("served") or {}))


def _option_of(name: str) -> Callable[[Cell], object]:
    return lambda c: c.options.get(name)


def distinguishing_labels(cells) -> list[str]:
    """A short label per cell naming only what sets it apart from the others (model, dataset, probe, relations,
    seed or an option), so a chart of a grid's cells never reads the same cut label twice.

    >>> a = Cell("default", "demo", "retrieval", {"pooling": "cls", "exclude_subject": True})
    >>> b = Cell("default", "demo", "retrieval", {"pooling": "mean", "exclude_subject": True})
    >>> distinguishing_labels([a, b])
    ['pooling=cls', 'pooling=mean']
    >>> distinguishing_labels([a])
    ['default · demo · retrieval']
    """
    cells = list(cells)
    fields: list[tuple[str, Callable[[Cell], object]]] = [
        ("model", lambda c: c.model), ("dataset", lambda c: c.dataset), ("probe", lambda c: c.probe),
        ("relations", lambda c: ",".join(c.relations)), ("seed", lambda c: c.seed)]
    keys = sorted({k for c in cells for k in c.options})
    fields += [(k, _option_of(k)) for k in keys]
    varying = [(name, get) for name, get in fields if len({str(get(c)) for c in cells}) > 1]
    if not varying:
        return [f"{short_model_id(c.model)} · {c.dataset} · {c.probe}" for c in cells]
    return [" · ".join(f"{name}={get(c)}" if name not in ("model", "dataset", "probe") else
                       short_model_id(str(get(c))) if name == "model" else str(get(c))
                       for name, get in varying) for c in cells]


def sibling_layers(cells) -> dict[str, tuple[int, ...]]:
    """{share key: the layers its cells read}: what one encoding pass should compute for them all.

    >>> cells = GridSpec.from_dict({"models": ["m"], "datasets": ["d"], "probes": [{"name": "retrieval",
    ...     "options": {"pooling": ["cls", "mean"]}}], "layers": [2, 4]}).cells()
    >>> sorted(sibling_layers(cells).values())
    [(2, 4), (2, 4)]
    """
    out: dict[str, set[int]] = {}
    for cell in cells:
        if cell.layer is not None:
            out.setdefault(cell.share_key, set()).add(cell.layer)
    return {key: tuple(sorted(layers)) for key, layers in out.items()}


def _as_list(value, what: str) -> list:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [value]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ProbekitError(f"grid field {what!r} must be a value or a list, got {type(value).__name__}")


@dataclass(frozen=True)
class GridSpec:
    name: str
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    probes: tuple[tuple[str, tuple[tuple[str, tuple], ...]], ...]
    relations: tuple[str, ...] = ()
    layers: tuple[int, ...] = ()
    relation_groups: tuple[tuple[str, ...], ...] = ()
    seeds: tuple[int, ...] = ()
    vocab: str = "heads+tails"
    k: int = 10
    served: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    """(model id, its served options) for each served model given as a mapping
    (:func:`~probekit.grid.models.model_entry`)."""

    @classmethod
    def from_dict(cls, data: dict, *, check_names: bool = False) -> GridSpec:
        """A grid from its mapping. With ``check_names`` (a grid a user just wrote: the CLI's file, the Grid page)
        every dataset, probe, option value and vocabulary is checked against its registry now, with the
        registry's "did you mean", rather than cell by cell at run time (:meth:`check_names`)."""
        if not isinstance(data, dict):
            raise ProbekitError("a grid must be a mapping with models, datasets and probes")
        unknown = sorted(set(data) - set(FIELDS))
        if unknown:
            raise ProbekitError(f"unknown grid field {unknown[0]!r}; available: {', '.join(FIELDS)}")
        given = data.get("models")
        entries = [model_entry(m, i + 1) for i, m in enumerate([given] if isinstance(given, dict)
                                                              else _as_list(given, "models"))]
        models = [m for m, _ in entries if m]
        served: dict[str, dict] = {}
        for model_id, options in entries:
            if served.setdefault(model_id, options) != options:
                raise ProbekitError(f"model {model_id!r} is listed twice with a different tokenizer or api_key_env")
        datasets = [str(d).strip() for d in _as_list(data.get("datasets"), "datasets") if str(d).strip()]
        if not models:
            raise ProbekitError("the grid has no models: give `models: [default, …]`")
        if not datasets:
            raise ProbekitError("the grid has no datasets: give `datasets: [demo, medlama:hard, …]`")
        probes = []
        for i, p in enumerate(_as_list(data.get("probes") or ["retrieval"], "probes")):
            if isinstance(p, str):
                p = {"name": p}
            if not isinstance(p, dict) or not str(p.get("name") or "").strip():
                raise ProbekitError(f"probe {i + 1} of the grid needs a name, e.g. {{name: retrieval}}")
            opts = p.get("options") or {}
            if not isinstance(opts, dict):
                raise ProbekitError(f"options of probe {p['name']!r} must be a mapping of option -> value(s)")
            axes = tuple((str(k), tuple(_as_list(v, f"{p['name']}.{k}"))) for k, v in sorted(opts.items()))
            probes.append((str(p["name"]).strip(), axes))
        try:
            layers = tuple(int(x) for x in _as_list(data.get("layers"), "layers"))
            seeds = tuple(int(x) for x in _as_list(data.get("seeds"), "seeds"))
            k = int(data.get("k", 10))
        except (TypeError, ValueError) as e:
            raise ProbekitError(f"layers, seeds and k must be integers ({e})") from None
        if not 1 <= k <= MAX_K:
            raise ProbekitError(f"k must be between 1 and {MAX_K:,}, got {k}")
        groups = []
        for g in _as_list(data.get("relation_groups"), "relation_groups"):
            group = tuple(str(r) for r in _as_list(g, "relation_groups"))
            if not group:
                raise ProbekitError("an empty relation group; give e.g. relation_groups: [[may_treat], [may_prevent]]")
            groups.append(group)
        if groups and data.get("relations"):
            raise ProbekitError("give either relations (one filter for every cell) or relation_groups (an axis: one "
                                "cell per group), not both")
        spec = cls(name=str(data.get("name") or "grid"), models=tuple(models), datasets=tuple(datasets),
                   probes=tuple(probes), relations=tuple(str(r) for r in _as_list(data.get("relations"), "relations")),
                   layers=layers, seeds=seeds, vocab=str(data.get("vocab", "heads+tails")), k=k,
                   relation_groups=tuple(groups),
                   served=tuple((m, tuple(sorted(o.items()))) for m, o in served.items() if o))
        n = len(spec.cells())
        if n > MAX_CELLS:
            raise ProbekitError(f"the grid has {n:,} cells; split it (at most {MAX_CELLS:,} a grid)")
        if check_names:
            spec.check_names()
        return spec

    def check_names(self) -> None:
        """Refuse a dataset, probe, probe option (name or value) or vocabulary no cell could run, naming the close
        registered ones. A dataset may also be a facts file (``.csv``/``.jsonl``/``.json``, or a file that exists).
        Models and layers are checked when a cell loads its model (a grid names models of other machines)."""
        from ..probes import get_probe  # the probes import torch

        for spec in self.datasets:
            if spec.lower().endswith((".csv", ".jsonl", ".json")) or Path(spec).expanduser().is_file():
                continue
            name, _, which = spec.partition(":")
            LOADERS.get_or_raise(name)
            if which and which not in ("full", "hard"):
                raise ProbekitError(f"dataset {name!r}: {UnknownNameError('set', which, ['full', 'hard'])}")
        for name, axes in self.probes:
            probe = get_probe(name)
            known = {o.name: o for o in probe.options}
            for option, values in axes:
                if option not in known:
                    raise ProbekitError(f"probe {name!r}: {UnknownNameError('option', option, sorted(known))}")
                for value in values:
                    known[option].check(value, name)
        check_vocab(self.vocab)

    @classmethod
    def load(cls, path: str | Path) -> GridSpec:
        """A grid from a ``.yaml``/``.yml`` or ``.json`` file."""
        path = Path(path).expanduser()
        if not path.is_file():
            raise ProbekitError(f"{path}: grid file not found")
        text = decode_utf8(path.read_bytes(), where=str(path), note="save the grid file as UTF-8")
        if path.suffix.lower() == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:  # one line naming the file, line and column
                raise ProbekitError(f"{path}: not a valid grid file (line {e.lineno}, column {e.colno}: "
                                    f"{e.msg})") from None
            return cls.from_dict(data, check_names=True)
        return cls.from_yaml(text, label=str(path))

    @classmethod
    def from_yaml(cls, text: str, *, label: str = "the grid") -> GridSpec:
        r"""A grid from YAML text (the Grid page's box); a YAML error is one line naming its line and column
        (1-based, as an editor counts), never a traceback.

        >>> GridSpec.from_yaml("name: g\nmodels: [default\ndatasets: [demo]\n")
        Traceback (most recent call last):
        ...
        probekit.errors.ProbekitError: the grid is not valid YAML: line 3, column 9: expected ',' or ']', but got ':'
        """
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
            what = e.problem or e.context or "not YAML"
            raise ProbekitError(f"{label} is not valid YAML: {where}{what}") from None
        except yaml.YAMLError as e:
            raise ProbekitError(f"{label} is not valid YAML: {str(e).splitlines()[0]}") from None
        if data is None:
            raise ProbekitError(f"{label} is empty: declare at least models, datasets and probes")
        return cls.from_dict(data, check_names=True)

    def to_dict(self) -> dict:
        served = {m: dict(o) for m, o in self.served}
        return {"name": self.name, "models": [entry_of(m, served.get(m, {})) for m in self.models],
                "datasets": list(self.datasets),
                "relations": list(self.relations),
                # only when given, so the id of a grid declared without groups stays what it was
                **({"relation_groups": [list(g) for g in self.relation_groups]} if self.relation_groups else {}),
                "probes": [{"name": n, "options": {k: list(v) for k, v in axes}} for n, axes in self.probes],
                "layers": list(self.layers), "seeds": list(self.seeds), "vocab": self.vocab, "k": self.k}

    def cells(self) -> list[Cell]:
        """Every cell, models outermost (so a backend loads each model once), in a stable order."""
        out = []
        served = {m: dict(o) for m, o in self.served}
        seeds = self.seeds or (None,)
        for model, dataset in itertools.product(self.models, self.datasets):
            for name, probe_axes in self.probes:
                axes = dict(probe_axes)
                if self.layers:
                    axes.setdefault("layer", self.layers)
                keys = sorted(axes)
                for group in self.relation_groups or (self.relations,):
                    for values in itertools.product(*(axes[k] for k in keys)):
                        for seed in seeds:
                            out.append(Cell(model=model, dataset=dataset, probe=name, options=dict(zip(keys, values)),
                                            relations=group, vocab=self.vocab, k=self.k, seed=seed,
                                            served=dict(served.get(model, {}))))
        return out
