"""``python -m probekit rewire ...``: the command-line face of :mod:`probekit.rewire`."""

from __future__ import annotations

import sys

from probekit.metrics.accuracy import DEFAULT_COUNTING, counting_label
from probekit.metrics.registry import metric_names
from probekit.rewire import (
    CPU_BATCH_SIZE,
    SUBSETS,
    RewireSettings,
    damage_notes,
    list_runs,
    run_info,
    sweep,
    sweep_curve,
    train,
)
from probekit.store.export import write_table
from probekit.types import MAX_K

from .common import add_dataset_args, load_dataset_from_args, print_json, print_listing, progress_bar


def _warn(notes: list[str]) -> None:
    """Damaged runs and checkpoints are left out of listings and sweeps: say so, on stderr."""
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)


def _cmd_rewire(args) -> int:

    if args.list:
        listed = list_runs()
        _warn(damage_notes(listed))
        print_listing(listed.drop(columns="damaged")[listed.model.notna()], args.format, empty="no rewiring runs yet")
        return 0
    settings = RewireSettings(model=args.model, corpus=args.corpus, mask_ratio=args.mask_ratio, tau=args.tau,
                              lr=args.lr, weight_decay=args.weight_decay, batch_size=args.batch_size,
                              steps=args.steps, checkpoint_every=args.checkpoint_every, layer=args.layer,
                              pooling=args.pooling, max_length=args.max_length, dropout=args.dropout,
                              seed=args.seed, max_sentences=args.max_sentences)

    with progress_bar(args.quiet) as bar:
        def report(step, total, loss):  # training reports its loss where the other work names a stage
            if bar is not None:
                bar(step, total, f"training · loss {loss:.4f}")

        info = train(settings, device=args.device, progress=report,
                     notice=lambda line: print(line, file=sys.stderr))  # with --quiet too
    if args.format == "json":
        print_json(info)
    else:
        print(f"{info['run_id']}  {info['label']}  [{info['status']}, {info['steps_done']} steps, batch "
              f"{info['batch_size']}, {info.get('steps_per_s') or 0:.3f} steps/s, {info['device']}]")
        for c in info["checkpoints"]:
            print(f"  step {c['step']:>6}  loss {c['loss']:.4f}  {c['path']}")
    return 0


def _cmd_sweep(args) -> int:

    ds = load_dataset_from_args(args)
    _warn([note for r in args.run for note in run_info(r)["damaged"]])
    with progress_bar(args.quiet) as report:
        frame = sweep(args.run, ds, similarity=args.similarity, vocab=args.vocab, k=args.k, preset=args.preset,
                      include_base=not args.no_base, device=args.device, progress=report)
    if args.out:
        write_table(frame, args.out, fmt="parquet" if args.out.endswith(".parquet") else "csv")  # atomic, safe
    names = metric_names(depth=args.k)  # every registered metric a top-k of k answers shows
    if args.format == "json":
        curves = {f"{s}:{a}:{n}": sweep_curve(frame, metric=n, relation=a, subset=s).to_dict(orient="records")
                  for s in sorted(set(frame["subset"])) for a in ("macro", "micro") for n in names}
        print_json({"dataset": ds.summary(), "runs": list(args.run), "preset": args.preset,
                    "counting": DEFAULT_COUNTING, "subsets": {s: SUBSETS[s] for s in sorted(set(frame["subset"]))},
                    "curves": curves, "rows": frame.to_dict(orient="records")})
    else:
        print(f"{ds.name}: macro {', '.join(names)} (%) by step, mean over {len(args.run)} run(s); "
              f"{counting_label(DEFAULT_COUNTING)}"
              + (f", preset {args.preset}" if args.preset else ""))
        for subset in sorted(set(frame["subset"])):
            by_metric = {n: sweep_curve(frame, metric=n, subset=subset) for n in names}
            print(f"  {subset}: {SUBSETS[subset]}")
            print(f"  {'':<6}{'step':>8}" + "".join(f"{n:>10}" for n in names))
            for i, step in enumerate(by_metric[names[0]]["step"]):
                print(f"  {'':<6}{step:>8}" + "".join(f"{100 * by_metric[n]['mean'].iloc[i]:>10.2f}" for n in names))
    return 0


def register(sub) -> None:

    d = RewireSettings()
    p = sub.add_parser("rewire", help="contrastive rewiring (Rewire-then-Probe): train, save checkpoints")
    p.add_argument("--model", default=d.model, help="model to rewire (registry id, HF id, folder, 'default')")
    p.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")
    p.add_argument("--corpus", default=d.corpus, help="pubmed_0..pubmed_9 | wiki | a text file, one sentence a line")
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=None, help=f"pairs per step (default 192 on CUDA, "
                                                                f"{CPU_BATCH_SIZE} on CPU)")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--tau", type=float, default=d.tau)
    p.add_argument("--mask-ratio", type=float, default=d.mask_ratio)
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every)
    p.add_argument("--layer", type=int, default=None, help="train on hidden_states[L] (default: last layer)")
    p.add_argument("--pooling", default=d.pooling, choices=["cls", "mean"])
    p.add_argument("--max-length", type=int, default=d.max_length)
    p.add_argument("--dropout", type=float, default=d.dropout)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--max-sentences", type=int, default=None, help="use only the first N sentences")
    p.add_argument("--list", action="store_true", help="list rewiring runs instead of training")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_rewire)

    p = sub.add_parser("sweep", help="probe every checkpoint of rewiring runs: acc@k and MRR against training step")
    p.add_argument("--run", action="append", required=True, help="rewiring run id (repeatable: mean ± std)")
    p.add_argument("--device", default=None)
    add_dataset_args(p, default="medlama")
    p.add_argument("--similarity", default="cosine", choices=["cosine", "l2", "dot"])
    p.add_argument("--preset", default=None, choices=["medlama-reference"],
                   help="a retrieval preset: its values replace pooling and --similarity (medlama-reference: [CLS], "
                        "L2 on raw vectors, as MedLAMA's probing code)")
    p.add_argument("--vocab", default="heads+tails", choices=["heads+tails", "tails", "relation"])
    p.add_argument("--k", type=int, default=10, help=f"answers kept per query, the top k (1 to {MAX_K:,})")
    p.add_argument("--no-base", action="store_true", help="leave out step 0 (the base model)")
    p.add_argument("--out", default=None, help="also write the rows to this .csv or .parquet")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_sweep)
