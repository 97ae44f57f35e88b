"""What each page's step computes before a talk: a registry of step kinds, one per page that can be presented.

A step kind reads its page's share-link parameters exactly as the page does (defaults included) and returns a
:class:`Prepared` result: plain data (frames, a ranking, a context result) that the presenter draws without a
model, so moving between steps never waits on one. ``prepare`` takes ``load_model(model_id, device)``: the app
passes its one-model cache, the CLI :func:`one_model_loader`. Heavy imports happen inside each kind.

A missing ingredient (a model not on this machine, a dataset not installed, a stored run, sweep, session or
document not in this store) raises one :class:`~probekit.errors.ProbekitError` naming it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .. import config, models, views
from ..datasets import VOCABS, available_datasets, load_spec
from ..errors import ProbekitError, Registry
from ..metrics.registry import hit_depth, metric_from_params
from ..types import parse_free_query
from .tour import Step, Tour

Loader = Callable[[str, "str | None"], object]


@dataclass
class Prepared:
    """A step's result, ready to draw: ``kind`` (the page), a one-line ``summary`` (what the CLI prints) and
    ``data`` (what the presenter draws)."""

    kind: str
    summary: str
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StepKind:
    label: str
    prepare: Callable[[Mapping[str, str], Loader], Prepared]


STEP_KINDS: Registry = Registry("step page")
"""page (URL path) -> :class:`StepKind`: the pages a tour step can show."""



def _pick(value, allowed) -> str:
    """``value`` when ``allowed`` holds it, else the first allowed value (a link's stale parameter reads as the
    page's default)."""
    allowed = list(allowed)
    return str(value) if value is not None and value in allowed else str(allowed[0])

def _dataset(params: Mapping[str, str]):

    spec = params.get("dataset") or "demo"
    here = dict(available_datasets())
    if spec not in here:
        raise ProbekitError(f"dataset {spec!r} is not on this machine (available: {', '.join(here)}); install it "
                            "(probekit data) or change the step")
    return load_spec(spec)


def _model(params: Mapping[str, str], load: Loader):
    model_id = params.get("model") or config.DEFAULT_MODEL
    try:
        return load(model_id, params.get("device") or None)
    except ProbekitError as e:
        raise ProbekitError(f"model {model_id!r} is not available here: {e}") from None


# ---------------------------------------------------------------- Probe
def _probe(params: Mapping[str, str], load: Loader) -> Prepared:
    import pandas as pd

    from ..probes import get_probe, probes_for

    model, ds = _model(params, load), _dataset(params)
    names = probes_for(model)
    probe = get_probe(_pick(params.get("probe"), names))
    view = views.probe_view(params, spec=probe.options)
    vocab = view.vocab if view.vocab in VOCABS else VOCABS[0]
    k = view.k or 10
    opts = {"exclude_subject": True, **view.options} if any(o.name == "exclude_subject" for o in probe.options) \
        else dict(view.options)  # the Probe page's default: the query's own subject left out
    if view.source == views.TEXT:
        if not view.text:
            raise ProbekitError("the step's typed query is empty")
        q = parse_free_query(view.text, subject=view.subject or "", golds=view.golds)
        cands = ds.candidates(vocab if vocab != "relation" else "tails")
    else:
        if not view.query or view.query not in {q.id for q in ds.queries}:
            raise ProbekitError(f"dataset {ds.name!r} has no query {view.query!r}")
        q = ds.query(view.query)
        cands = ds.candidates(vocab, q.relation)
    ranking, _ = probe.explain(model, q, cands, k=k, **opts)
    top = pd.DataFrame({"rank": range(1, ranking.k + 1), "entity": ranking.names,
                        "score": [round(s, 4) for s in ranking.scores],
                        "gold": list(ranking.gold_flags())})
    text = q.text(model.mask_token)
    return Prepared("probe", f"{text} → {', '.join(ranking.names[:3])}",
                    {"text": text, "model": model.id, "probe": probe.name, "candidates": len(cands), "top": top,
                     "golds": list(zip(q.golds, ranking.gold_ranks)), "k": ranking.k})


# ---------------------------------------------------------------- Context (one triple's rank-change curve)
def _context(params: Mapping[str, str], load: Loader) -> Prepared:
    from .. import context as ctx
    from ..context import documents
    from ..probes import probes_for

    model, ds = _model(params, load), _dataset(params)
    view = views.context_view(params)
    if not view.query or view.query not in {q.id for q in ds.queries}:
        raise ProbekitError(f"dataset {ds.name!r} has no query {view.query!r}")
    q = ds.query(view.query)
    if not view.doc:
        raise ProbekitError("the step names no document (add it to the tour once the Context page shows a curve)")
    text = documents.load_document(view.doc)
    if text is None:
        raise ProbekitError(f"this machine does not hold the step's document {view.doc} (import the tour file, "
                            "which carries it, or paste it on the Context page again)")
    target = _pick(view.target, q.golds)
    variant = view.variant if view.variant in ctx.VARIANTS else ctx.VARIANTS[0]
    probe = view.probe if view.probe in probes_for(model) else probes_for(model)[0]
    result = ctx.run_context(model, q, target=target, pool=ds.candidates("relation", q.relation).names,
                             document=text, variant=variant, probe=probe, seed=view.seed or 0,
                             permutations=view.permutations or 3)
    return Prepared("context", f"{q.subject} → {target}: {result.ucm_text()}", {"result": result})


# ---------------------------------------------------------------- Layers (a stored sweep's heatmap)
def _layers(params: Mapping[str, str], load: Loader) -> Prepared:
    from ..bench import layers

    sweep = params.get("sweep")
    if not sweep:
        raise ProbekitError("the step names no layer sweep")
    try:
        run = layers.load_layer_run(sweep)
    except ProbekitError:
        raise ProbekitError(f"layer sweep {sweep!r} is not in this store ({config.db_path()}): run it here "
                            "(probekit layers --save) or copy the database") from None
    metric = metric_from_params(params) or "acc@1"
    which = _pick(params.get("set"), run.subsets)
    acc = run.accuracy(metric=metric, subset=which) * 100
    best = run.best_layers(metric=metric, subset=which)
    top = best.dropna(subset=["best layer"])
    summary = f"{metric} per relation and layer ({which}), {len(acc)} relations × {acc.shape[1]} layers"
    return Prepared("layers", summary, {"acc": acc, "best": top, "metric": metric, "set": which,
                                        "label": run.meta.get("label")})


# ---------------------------------------------------------------- Benchmark (runs compared, one relation drilled)
def _runs(params: Mapping[str, str]) -> tuple[dict, set]:
    from ..bench import runs
    from ..metrics import compare as rm

    ids = [r for r in dict.fromkeys((params.get("runs") or "").split(",")) if r]
    if not ids:
        raise ProbekitError("the step names no stored runs")
    listed = runs.list_runs()
    known = set(listed.run_id)
    missing = [r for r in ids if r not in known]
    if missing:
        raise ProbekitError(f"run {missing[0]!r} is not in this store ({config.db_path()}): run the benchmark "
                            "here (probekit bench --save) or copy the database")
    labels = dict(zip(listed.run_id, listed.label))
    short = rm.short_labels({r: f"{labels[r]} [{r[-6:]}]" for r in ids})
    loaded = {short[r]: runs.load_run(r) for r in ids}
    return loaded, {label for label, run in loaded.items() if run.hard_set}


def _benchmark(params: Mapping[str, str], load: Loader) -> Prepared:
    from ..bench import views
    from ..metrics import compare as rm

    loaded, hard_set = _runs(params)
    frames = {label: run.frame for label, run in loaded.items()}
    metric = metric_from_params(params) or "acc@10"
    k = hit_depth(metric)  # the drill-down's hit@k
    present = views.subsets_of(run.hard_set for run in loaded.values())
    which = _pick(params.get("set"), present)
    table = rm.full_hard_table(frames, hard_set=hard_set)
    per = rm.relation_accuracy(frames, metric=metric, which=which, hard_set=hard_set)
    first = next(iter(loaded))
    relations = sorted(loaded[first].frame.relation.unique())
    rel = _pick(params.get("relation"), relations)
    drill = rm.relation_queries(loaded[first].frame, rel, k=k)
    return Prepared("benchmark", f"{len(loaded)} run(s), {metric} ({which}); drill-down: {rel}",
                    {"table": table, "per_relation": per, "drill": drill, "relation": rel, "run": first, "k": k,
                     "metric": metric, "set": which})


# ---------------------------------------------------------------- Annotation results
def _results(params: Mapping[str, str], load: Loader) -> Prepared:
    from .. import annotations as ann

    sid = params.get("session")
    if not sid:
        raise ProbekitError("the step names no annotation session")
    if sid not in set(ann.list_sessions().session_id):
        raise ProbekitError(f"annotation session {sid!r} is not in this store ({config.db_path()}); copy the "
                            "database with the experts' ratings")
    meta = ann.get_session(sid)
    result = ann.stats(sid, threshold=5, consensus="median")
    return Prepared("results", f"{meta['name']}: {result['n_ratings']} ratings",
                    {"name": meta["name"], "n_ratings": result["n_ratings"], "table5": result["table5"],
                     "shares": result["shares"], "accuracy": result["accuracy"], "agreement": result["agreement"]})


def _compare(params: Mapping[str, str], load: Loader) -> Prepared:
    """The Compare page's link (runs, k, set): the runs' full vs hard table, without a drill-down."""
    prepared = _benchmark(params, load)
    prepared.data["drill"] = None
    prepared.summary = prepared.summary.split("; drill-down")[0]
    return prepared


STEP_KINDS["probe"] = StepKind("Probe", _probe)
STEP_KINDS["context"] = StepKind("Context curve", _context)
STEP_KINDS["layers"] = StepKind("Layers", _layers)
STEP_KINDS["benchmark"] = StepKind("Benchmark drill-down", _benchmark)
STEP_KINDS["compare"] = StepKind("Compare runs", _compare)
STEP_KINDS["results"] = StepKind("Annotation results", _results)


def prepare(step: Step, load_model: Loader) -> Prepared:
    """``step``'s result (its page's computation on its link's parameters)."""
    return STEP_KINDS.get_or_raise(step.page).prepare(step.params, load_model)


def documents_of(tour: Tour) -> dict[str, str]:
    """The text of each document the tour's Context steps name (hash -> text) that this machine holds."""
    from ..context import documents

    out = {}
    for s in tour.steps:
        doc = s.params.get("doc") if s.page == "context" else None
        if doc and (text := documents.load_document(doc)) is not None:
            out[doc] = text
    return out


def one_model_loader() -> Loader:
    """``load_model`` for a process without the app: one model in memory, the previous one released on switch."""
    held: dict = {}

    def load(model_id: str, device: str | None):
        key = (model_id, device)
        if key not in held:
            for old in held.values():
                models.release(old)
            held.clear()
            held[key] = models.load(model_id, device=device)
        return held[key]

    return load
