"""``python -m probekit layers ...``: the command-line face of :mod:`probekit.bench.layers`."""

from __future__ import annotations

import pandas as pd

from probekit import models
from probekit.bench.layers import COUNTING, LayerRun, list_layer_runs, run_layers
from probekit.datasets import SUBSETS as SUBSET_TEXT
from probekit.datasets import VOCABS
from probekit.encode import POOLINGS
from probekit.errors import ProbekitError
from probekit.index import SIMILARITIES
from probekit.metrics.accuracy import counting_label
from probekit.metrics.compare import SUBSETS
from probekit.metrics.registry import metric_names

from .common import add_dataset_args, add_model_args, load_dataset_from_args, print_json, print_listing, progress_bar


def _print_table(result: LayerRun) -> None:
    print(f"{result.label}  [{result.run_id or 'not saved'}, {result.meta.get('seconds') or 0:.1f} s]")
    print(counting_label(COUNTING))
    for subset in SUBSETS:
        if not (result.table["subset"] == subset).any():
            continue
        avg = result.averages(subset=subset)
        print(f"\n{subset} ({SUBSET_TEXT[subset]}): per layer (%)")
        print(f"{'layer':>5}" + "".join(f"{c:>16}" for c in avg.columns if c != "n"))
        for L, row in avg.iterrows():
            print(f"{L:>5}" + "".join(f"{100 * v:>16.2f}" for c, v in row.items() if c != "n"))
        names = metric_names()
        best = {n: result.best_layers(metric=n, subset=subset).set_index("relation") for n in names}
        print(f"\n{subset}: best layer per relation, its value / the last layer's (%)")
        print(f"  {'':<45}" + "".join(f"{n:>20}" for n in names))
        for rel in best[names[0]].index:
            cells = []
            for n in names:
                row = best[n].loc[rel]
                layer = "-" if pd.isna(row["best layer"]) else f"L{row['best layer']}"
                cells.append(f"{layer:>5} {100 * row['best acc']:>6.2f}/{100 * row['last layer acc']:>6.2f}")
            print(f"  {rel[:44]:<45}" + "".join(f"{c:>20}" for c in cells))


def _cmd_layers(args) -> int:
    if args.list:
        print_listing(list_layer_runs(), args.format, empty="no stored layer sweeps (run `layers --save`)",
                      line=lambda r: f"{r['run_id']}  {r['label']}  layers {r['layers']}  [{r['n_queries']} queries]")
        return 0
    layers = None
    if args.layers:
        try:
            layers = [int(x) for x in args.layers.replace(",", " ").split()]
        except ValueError:
            raise ProbekitError(f"--layers takes integers like 1,2,3; got {args.layers!r}") from None
    ds = load_dataset_from_args(args)
    model = models.load(args.model, device=args.device)
    with progress_bar(args.quiet) as report:
        result = run_layers(model, ds, layers=layers, pooling=args.pooling, similarity=args.similarity,
                            vocab=args.vocab, batch_size=args.batch_size or 128, fast=args.fast, progress=report,
                            reuse=not args.fresh, save=args.save)
    if args.format == "json":
        print_json(result.to_dict())
    else:
        _print_table(result)
    return 0


def register(sub) -> None:

    p = sub.add_parser("layers", help="layer-wise retrieval probing: acc per relation and layer, best layer")
    add_model_args(p)
    add_dataset_args(p, default="medlama")
    p.add_argument("--pooling", default=None, choices=list(POOLINGS), help="default: the model's")
    p.add_argument("--similarity", default="cosine", choices=list(SIMILARITIES))
    p.add_argument("--vocab", default="heads+tails", choices=list(VOCABS))
    p.add_argument("--layers", default=None, help="e.g. 1,2,3 (default: 1..N; 0 = embeddings)")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--fast", action="store_true", help="int8 weights on CPU (about 3x faster encoding)")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--save", action="store_true", help="store the sweep in the database")
    p.add_argument("--fresh", action="store_true", help="recompute even if a stored sweep has these settings")
    p.add_argument("--list", action="store_true", help="list stored sweeps and exit")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_layers)
