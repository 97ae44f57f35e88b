"""``python -m probekit bench``: probe a whole dataset, print per-relation, macro and micro acc@k, MRR and every other
registered metric."""

from __future__ import annotations

import sys

from .. import metrics, models
from ..errors import ProbekitError
from ..metrics.intervals import interval_lines, run_intervals
from ..types import MAX_K
from .common import (
    add_dataset_args,
    add_model_args,
    add_probe_args,
    load_dataset_from_args,
    print_json,
    probe_options,
    progress_bar,
    vocab_of,
)


def _cmd_bench(args) -> int:
    """Through the one runner (:func:`probekit.bench.runner.run_benchmark`): with ``--save`` an identical
    stored run is reopened and an unfinished one resumed, exactly as on the Benchmark page."""
    from ..bench import runner, settings
    from ..bench.results import now
    from ..probes import get_probe

    probe = get_probe(args.probe)
    args.vocab = vocab_of(args, probe)
    opts = probe_options(args, probe)
    settings.check_vocab_and_k(args.vocab, args.k)
    if args.fresh and not args.save:
        raise ProbekitError("--fresh only applies with --save (without it nothing is reused)")
    ds = load_dataset_from_args(args)
    settings.check_run_args(ds, args.vocab, args.k)
    if args.save:
        from ..bench import results

        results.store()  # a locked database fails now, before the model is loaded
    started = now()
    run = None
    model: models.LoadedModel | runner.ModelIdentity | None = None
    if args.save and not args.fresh:  # a stored run opens without loading the weights (or importing transformers)
        model = runner.ModelIdentity.of(args.model, args.device)
        if model is not None:
            run = runner.find_stored(model, ds, probe=probe, options=opts, vocab=args.vocab, k=args.k)
    if run is None or model is None:  # (a run is found only through a model identity)
        if probe.name == "retrieval":  # weights loaded only if a vector is missing from the embedding cache
            model = runner.CachedModel.lazy(args.model, args.device)
        else:
            model = models.load(args.model, device=args.device)
        with progress_bar(args.quiet) as report:
            run = runner.run_benchmark(model, ds, probe=probe, options=opts, vocab=args.vocab, k=args.k,
                                       progress=report, save=args.save, reuse=not args.fresh, counting=args.counting,
                                       notice=lambda line: print(line, file=sys.stderr))  # with --quiet too
    names = metrics.metric_names(depth=args.k)  # every registered metric a top-k of k answers can show
    summary = metrics.summary(run.rankings(), metrics=names, counting=args.counting)
    ci = run_intervals(run.rankings(), metrics=names, counting=args.counting)  # how sure each score is
    out = {"model": model.describe(), "dataset": ds.summary(), "probe": probe.name, "options": opts,
           "vocab": args.vocab, **summary, "intervals": ci}
    if args.save:
        out["run_id"] = run.run_id
    out["seconds"] = run.meta.get("seconds")
    finished = run.meta.get("finished_at")
    if args.save and finished is not None and finished < started:  # stored before this command began
        out["reused"] = True
        # on stderr (not progress: said with --quiet too); the table or JSON on stdout stays what it was
        print(f"reused run {run.run_id} (stored {finished:%Y-%m-%d %H:%M} UTC); --fresh to compute it again",
              file=sys.stderr)
    if args.format == "json":
        print_json(out)
    else:
        print(f"{ds.name} ({len(ds)} queries), {model.id}, {probe.name} {opts}"
              + (f"  [{run.run_id}]" if args.save else ""))
        print(f"{'relation':<50}" + "".join(f"{name:>9}" for name in names))
        for rel, row in summary["relations"].items():
            print(f"{rel:<50}" + "".join(_pct(row[name]) for name in names))
        for avg in ("macro", "micro"):
            print(f"{avg:<50}" + "".join(_pct(summary[avg][name]) for name in names))
        for line in interval_lines(ci, names):
            print(line)
        depth = summary["depth"]
        print(f"{metrics.counting_label(args.counting)}; {summary['n_items']} items"
              + (f"; {depth} answer(s) per query: a metric needing more is not defined (-)" if depth else ""))
    return 0


def _pct(value) -> str:
    return f"{'-':>9}" if value != value else f"{100 * value:>9.2f}"  # NaN: not defined for this method


def register(sub) -> None:
    p = sub.add_parser("bench", help="probe a whole dataset and print per-relation, macro and micro acc@k and MRR")
    add_model_args(p)
    add_dataset_args(p, default="medlama")
    add_probe_args(p)
    p.add_argument("--k", type=int, default=10, help=f"answers kept per query, the top k (1 to {MAX_K:,})")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--save", action="store_true",
                   help="store the run in the database; an identical stored run is reopened, an unfinished one resumed")
    p.add_argument("--fresh", action="store_true", help="with --save: compute a new run even if one is stored")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--counting", default="query", choices=["query", "triple"],
                   help="acc@k counting, recorded with a saved run: query = a query is a hit when any gold is in the "
                        "top k (MedLAMA); triple = each (S, R, O) triple counts once (LAMA, mLAMA)")
    p.set_defaults(func=_cmd_bench)
