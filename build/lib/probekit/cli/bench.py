"""``python -m probekit bench``: probe a whole dataset, print per-relation, macro and micro acc@k."""

from __future__ import annotations

from .common import (
    _progress_printer,
    add_dataset_args,
    add_model_args,
    add_probe_args,
    load_dataset_from_args,
    print_json,
    probe_options,
)


def _cmd_bench(args) -> int:
    from .. import metrics, models
    from ..probes import get_probe

    probe = get_probe(args.probe)
    ds = load_dataset_from_args(args)
    model = models.load(args.model, device=args.device)
    opts = probe_options(args, probe)
    report = _progress_printer(args.quiet)
    rankings = []
    if args.vocab == "relation":
        for rel in ds.relations:
            rankings += probe.rank(model, ds.queries_for(rel), ds.candidates("relation", rel), k=args.k,
                                   progress=report, **opts)
    else:
        rankings = probe.rank(model, ds.queries, ds.candidates(args.vocab), k=args.k, progress=report, **opts)
    ks = tuple(k for k in (1, 5, 10) if k <= args.k)
    summary = metrics.summary(rankings, ks=ks)
    out = {"model": model.describe(), "dataset": ds.summary(), "probe": probe.name, "options": opts,
           "vocab": args.vocab, **summary}
    if getattr(args, "save", False):
        from ..bench import runs

        out["run_id"] = runs.save_run(rankings, model=model, dataset=ds, probe=probe.name, options=opts,
                                      vocab=args.vocab, k=args.k)
    if args.format == "json":
        print_json(out)
    else:
        print(f"{ds.name} ({len(ds)} queries), {model.id}, {probe.name} {opts}")
        print(f"{'relation':<50}" + "".join(f"{'acc@' + str(k):>9}" for k in ks))
        for rel, row in summary["relations"].items():
            print(f"{rel:<50}" + "".join(f"{100 * row[f'acc@{k}']:>9.2f}" for k in ks))
        for avg in ("macro", "micro"):
            print(f"{avg:<50}" + "".join(f"{100 * summary[avg][f'acc@{k}']:>9.2f}" for k in ks))
    return 0



def register(sub) -> None:
    p = sub.add_parser("bench", help="probe a whole dataset and print per-relation, macro and micro acc@k")
    add_model_args(p)
    add_dataset_args(p, default="medlama")
    add_probe_args(p)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--save", action="store_true", help="store the run in the database")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_bench)
