"""``python -m probekit templates ...``: template-based vs template-free probing (Shaier et al.).

- ``templates compare --runs ID ...``: stored runs of several models on a template-based and a template-free
  dataset: the two model rankings with Kendall's tau and Spearman's rho, Pearson's r of mean perplexity with
  accuracy, prediction frequency and flags.
- ``templates parallel --dataset demo --free FILE``: pair a template dataset with natural sentences of the
  same facts, probe both sides with one model and print acc@k per relation and the change.
"""

from __future__ import annotations

import argparse
import math

from .. import models
from ..datasets import load_dataset
from ..errors import ProbekitError, command
from ..metrics.accuracy import counting_label
from ..metrics.registry import get_metric, metric_names
from ..store.export import write_table
from ..types import MAX_K
from .common import (
    add_dataset_args,
    add_model_args,
    add_probe_args,
    load_dataset_from_args,
    print_json,
    probe_options,
    progress_bar,
)


def _pct(v) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.2f}"


def _metric(name: str) -> str:
    """A registered metric's name (argparse type: an unknown one is a usage error naming the close ones)."""
    try:
        return get_metric(name).name
    except ProbekitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _num(v, fmt=".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _cmd_compare(args) -> int:
    from ..templates.compare import COUNTING, compare_runs

    cmp = compare_runs(args.runs, metric=args.metric, average=args.average, top_n=args.top_n,
                       flag_threshold=args.flag_threshold, scorer=args.scorer, fill=args.fill,
                       frequency_k=args.frequency_k, perplexity_aggregate=args.perplexity_aggregate)
    if args.format == "json":
        print_json(cmp.to_dict())
        return 0
    acc = cmp.metric
    print(f"{cmp.average} {acc}, {counting_label(COUNTING)}")
    print(f"{'run':<28}{'kind':<16}{'model · dataset':<48}{acc:>9}{'mean ppl':>11}{'corpus ppl':>11}"
          "  top object (share of top-k)")
    for r in cmp.runs.to_dict(orient="records"):
        print(f"{r['run_id']:<28}{r['kind']:<16}{r['label'][:47]:<48}{_pct(r[acc]):>9}"
              f"{_num(r['mean perplexity'], '.2f'):>11}{_num(r['corpus perplexity'], '.2f'):>11}  "
              f"{r['top object']} ({_pct(r['top object share'])} % of prompts, top {r['frequency k']})")
    if cmp.rankings is None or cmp.correlation is None:  # (both None, or neither)
        print("\nrankings: need runs of the same models on a template-based and a template-free dataset")
    else:
        print(f"\n{'model':<48}{'template-based':>16}{'template-free':>16}{'change':>8}")
        for r in cmp.rankings.to_dict(orient="records"):
            print(f"{r['model'][:47]:<48}{r['template-based rank']:>8} ({_pct(r['template-based score']):>5})"
                  f"{r['template-free rank']:>8} ({_pct(r['template-free score']):>5}){r['rank change']:>+8d}")
        c = cmp.correlation
        print(f"Kendall's tau {_num(c['kendall_tau'])} (p {_num(c['kendall_p'])}), Spearman's rho "
              f"{_num(c['spearman_rho'])} (p {_num(c['spearman_p'])}), {c['n']} models")
        held = cmp.stability
        if held is not None:
            print(f"does the ranking hold? tau {_num(held['tau'])}, {100 * (1 - held['alpha']):g} % interval "
                  f"[{_num(held['lo'])}, {_num(held['hi'])}] over {held['n_boot']:,} prompt resamples (seed "
                  f"{held['seed']})")
            for r in held["pairs"].to_dict(orient="records"):
                print(f"  {r['model a'][:30]} vs {r['model b'][:30]}: {r['verdict']} "
                      f"(order kept in {_num(r['holds'], '.0%')} of resamples)")
    for r in cmp.perplexity_fit.to_dict(orient="records"):
        print(f"perplexity ({cmp.perplexity_aggregate}) vs {acc}, {r['kind']}: Pearson's r {_num(r['pearson_r'])} "
              f"(p {_num(r['p_value'])}), {r['models']} models")
    for flag in cmp.flags:
        print(f"flag: {flag}")
    return 0


def _cmd_parallel(args) -> int:
    from ..bench import runs
    from ..probes import get_probe
    from ..templates.parallel import pair_datasets, parallel_drop

    if args.vocab_kind == "relation":
        raise ProbekitError("a parallel set has one shared vocabulary: --pair-vocab pairs or template")
    template = load_dataset_from_args(args)
    free = load_dataset("freetext", path=args.free)
    par = pair_datasets(template, free, per_fact=args.per_fact, vocab=args.pair_vocab)
    if args.out:
        print(f"wrote {write_table(par.pairs, args.out)}")
    probe = get_probe(args.probe)
    model = models.load(args.model, device=args.device)
    opts = probe_options(args, probe)
    frames, ids = {}, {}
    with progress_bar(args.quiet) as report:
        for side, ds in (("template", par.template), ("free", par.free)):
            run = runs.run_benchmark(model, ds, probe=probe.name, options=opts, k=args.k, progress=report,
                                     save=args.save)
            frames[side], ids[side] = run.frame, run.run_id
    names = metric_names(depth=args.k)  # every registered metric a top-k of k answers shows, and acc@k itself
    names += [] if f"acc@{args.k}" in names else [f"acc@{args.k}"]
    drop = parallel_drop(frames["template"], frames["free"], metrics=names)
    if args.format == "json":
        print_json({"pairs": par.stats, "runs": ids, "model": model.id, "probe": probe.name,
                    "per_relation": drop.reset_index().to_dict(orient="records")})
        return 0
    s = par.stats
    print(f"{s['pairs']} pairs ({s['facts']} facts) from {s['sentences']} sentences; {model.id}, {probe.name}, "
          f"{len(par.free.candidates())} candidates" + (f"; runs {ids['template']} / {ids['free']}" if args.save
                                                         else ""))
    cols = [c for n in names for c in (f"template {n}", f"free {n}", f"Δ {n}")]
    print(f"{'relation':<44}{'pairs':>6}" + "".join(f"{c:>16}" for c in cols))
    for rel, row in drop.iterrows():
        print(f"{rel[:43]:<44}{int(row['pairs']):>6}" + "".join(f"{100 * row[c]:>16.2f}" for c in cols))
    return 0


def register(sub) -> None:
    p = sub.add_parser("templates", help="template-based vs template-free probing: compare runs, parallel sets")
    tsub = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    c = tsub.add_parser("compare", help="rankings, correlations, perplexity and prediction frequency of stored runs")
    c.add_argument("--runs", nargs="+", required=True, metavar="RUN_ID",
                   help=f"stored runs (`{command()} runs list`) of several models on a template-based "
                        "and a template-free dataset")
    c.add_argument("--metric", default="acc@1", type=_metric, metavar="METRIC",
                   help=f"rank models by this metric (default acc@1, as the paper): {', '.join(metric_names())}")
    c.add_argument("--average", default="macro", choices=["macro", "micro"])
    c.add_argument("--top-n", type=int, default=5, help="share of predictions taken by the top-n objects")
    c.add_argument("--flag-threshold", type=float, default=0.1,
                   help="flag objects in the top k of at least this share of prompts")
    c.add_argument("--frequency-k", type=int, default=None,
                   help="prediction frequency counts each run's top k (default the paper's 10, or fewer stored)")
    c.add_argument("--perplexity-aggregate", default="prompt-mean",
                   help="per-run perplexity the Pearson fit uses: prompt-mean, the mean of per-prompt "
                        "perplexities (paper's Table 5), or corpus, exp(ΣNLL/Σtokens) over all prompts (Salazar "
                        "et al.); both are printed")
    c.add_argument("--scorer", default=None, help="which stored perplexities (default: the run's own model)")
    c.add_argument("--fill", default="gold", choices=["gold", "mask"], help="which stored perplexities")
    c.add_argument("--format", default="table", choices=["table", "json"])
    c.set_defaults(func=_cmd_compare)

    q = tsub.add_parser("parallel", help="the same facts as template prompts and as natural sentences")
    add_model_args(q)
    add_dataset_args(q, default="demo")
    add_probe_args(q, vocab=False)
    q.set_defaults(vocab_kind=None)
    q.add_argument("--free", required=True, metavar="FILE",
                   help="template-free prompts (CSV/JSONL: prompt with [MASK], object, subject, relation)")
    q.add_argument("--per-fact", type=int, default=1, help="sentences per fact at most")
    q.add_argument("--pair-vocab", default="pairs", choices=["pairs", "template"],
                   help="shared candidates: the paired objects (default) or the template dataset's vocabulary")
    q.add_argument("--k", type=int, default=10, help=f"answers kept per query, the top k (1 to {MAX_K:,})")
    q.add_argument("--save", action="store_true", help="store both runs")
    q.add_argument("--out", default=None, help="also write the pairs table (.csv, .parquet or .jsonl)")
    q.add_argument("--format", default="table", choices=["table", "json"])
    q.add_argument("--quiet", action="store_true", help="no progress on stderr")
    q.set_defaults(func=_cmd_parallel)
