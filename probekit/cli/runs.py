"""``python -m probekit runs ...``: the command-line face of :mod:`probekit.bench.runs`."""

from __future__ import annotations

import sys

import pandas as pd

from probekit.bench.paired import compare_runs
from probekit.bench.results import UNFINISHED, mark_stale
from probekit.bench.runs import delete_run, hard_block, list_runs, load_run
from probekit.datasets import SUBSETS
from probekit.errors import ProbekitError, command
from probekit.exports import FORMATS, export_run, import_run
from probekit.exports.comparison import (
    COMPARISON_FORMATS,
    export_comparison,
    get_comparison_format,
    stored_comparison,
)
from probekit.metrics.accuracy import COUNTINGS, counting_label
from probekit.metrics.intervals import interval_lines, run_intervals
from probekit.metrics.paired import CORRECTIONS
from probekit.metrics.registry import metric_names

from .common import add_actions, print_json, print_listing


def _pct(value, width: int) -> str:
    """A percentage, or "-" where the number is not defined (NaN: e.g. acc@10 of a one-answer method)."""
    return f"{'-':>{width}}" if value is None or pd.isna(value) else f"{100 * value:>{width}.2f}"


def _print_summary(meta: dict, summary: dict) -> None:
    """Per relation, macro and micro value of each metric the summary holds: the run's queries, then its hard block
    under its own label (``hard-in-full`` for a full-set run: hard queries among the full set's names)."""
    names = list(summary.get("metrics") or summary["macro"])
    label, hard = hard_block(summary, hard_set=meta.get("dataset_set") == "hard")
    first = "hard" if label == "hard" else "full"
    print(f"{meta['run_id']}  {meta['label']}  [{meta['status']}, {meta['n_queries']} queries, "
          f"{meta['device']}, {meta['seconds'] or 0:.1f} s]")
    if label == "hard":  # a hard-set run: one block, the whole run
        hard = None
    hard = hard or {}
    def short(name: str) -> str:  # a column head: full@10, hard-in-full MRR
        return name.replace("acc@", "@") if name.startswith("acc@") else f" {name}"

    width = max(9, max(len(first + short(n)) for n in names) + 1)
    hwidth = max(9, max(len(label + short(n)) for n in names) + 1)
    head = f"{'':<44}" + "".join(f"{first + short(n):>{width}}" for n in names)
    if label != "hard":
        head += "".join(f"{label + short(n):>{hwidth}}" for n in names)
    print(head)
    for rel, row in summary["relations"].items():
        hrow = (hard.get("relations") or {}).get(rel, {})
        line = f"{rel[:43]:<44}" + "".join(_pct(row.get(n), width) for n in names)
        if label != "hard":
            line += "".join(_pct(hrow.get(n), hwidth) if hrow else f"{'-':>{hwidth}}" for n in names)
        print(line)
    for avg in ("macro", "micro"):
        line = f"{avg:<44}" + "".join(_pct(summary[avg].get(n), width) for n in names)
        if label != "hard":
            line += "".join(_pct(hard[avg].get(n), hwidth) if hard else f"{'-':>{hwidth}}" for n in names)
        print(line)
    if label != "hard":
        print(f"{label}: {SUBSETS[label]}")
    print(counting_label(summary.get("counting", "query")) + f"; {summary.get('n_items', '?')} items")
    if summary.get("depth"):
        print(f"one answer per query at most {summary['depth']}: a metric needing more is not defined (-)")
    if meta.get("search"):
        print(meta["search"])


def _cmd_list(args) -> int:

    def line(r: dict) -> str:
        shown = "  ".join(f"{name} {_pct(r.get(f'macro {name}'), 0).strip()}" for name in metric_names())
        acc = "" if not r.get("n_done") else f"macro {shown}  (counting: {r.get('counting') or 'query'})"
        which = "hard set" if r.get("dataset_set") == "hard" else "full set"  # which experiment its numbers are
        return f"{r['run_id']}  {r['status']:<9} {r['label']}  [{which}, {r['n_done']}/{r['n_queries']}]  {acc}"

    listed = list_runs()
    print_listing(listed, args.format, empty=f"no stored runs (run `{command()} bench --save`)", line=line)
    unfinished = int(listed["status"].isin(UNFINISHED).sum()) if not listed.empty else 0
    if unfinished and args.format != "json":
        print(f"{unfinished} unfinished run(s): `{command()} bench --save` with the same settings (or "
              "Start on the Benchmark page) resumes one where it stopped", file=sys.stderr)
    return 0


def _cmd_show(args) -> int:

    mark_stale()  # a run whose process is gone shows as interrupted
    run = load_run(args.run)
    summary = run.summary(counting=args.counting)
    ci = run_intervals(run.rankings(), counting=args.counting or run.counting)  # how sure each score is
    if args.format == "json":
        print_json({"run": run.meta, **summary, "intervals": ci})
    else:
        _print_summary(run.meta, summary)
        for line in interval_lines(ci, list(ci["micro"])):
            print(line)
    return 0


def _print_comparison(a: str, b: str, cmp) -> None:
    print(f"A = {a}\nB = {b}")
    print(cmp.sentence("micro"))
    print(cmp.sentence("macro"))
    print(f"\n{'relation':<44}{'n':>6}{'A':>8}{'B':>8}{'A − B':>8}{'interval':>18}{'p':>8}{'p adj.':>8}")
    for r in cmp.table.to_dict(orient="records"):
        ci = f"[{100 * r['lo']:.1f}, {100 * r['hi']:.1f}]"
        adj = "" if r["p adjusted"] != r["p adjusted"] else f"{r['p adjusted']:.3f}"
        print(f"{r['relation'][:43]:<44}{r['n']:>6}{100 * r['A']:>8.2f}{100 * r['B']:>8.2f}{100 * r['diff']:>+8.2f}"
              f"{ci:>18}{r['p']:>8.3f}{adj:>8}")
    print(f"p adj.: {CORRECTIONS[cmp.correction]} over the relations; {cmp.n_boot:,} resamples, seed {cmp.seed}")


def _cmd_compare(args) -> int:
    """Run A against run B on their shared queries: a paired test and a bootstrap interval per relation and overall
    (:func:`probekit.metrics.paired.compare_paired`); with ``--out`` written in a standard format
    (:mod:`probekit.exports.comparison`), with ``--from`` a written one shown again."""
    screen = ("table", "json")
    if args.source:
        if args.run_a or args.run_b or args.out:
            raise ProbekitError("--from shows a stored comparison again: give no run ids and no --out")
        if args.format not in (None, *screen):
            raise ProbekitError(f"--format {args.format} with --from: the screen's formats are table, json")
        doc, cmp = stored_comparison(args.source)
        if args.format == "json":
            print_json(doc)
            return 0
        a_line, b_line = (f"{d['run_id']}  {d.get('label') or ''}" for d in (doc["a"], doc["b"]))
        _print_comparison(a_line, b_line, cmp)
        print(f"(stored comparison, {doc.get('exported_with', 'probekit')}; `runs import` its A/ and B/ to "
              "recompute it)")
        return 0
    if not (args.run_a and args.run_b):
        raise ProbekitError("give runs A and B (see `runs list`), or --from PATH (a comparison export)")
    settings = {"metric": args.metric, "which": args.set, "confidence": args.confidence,
                "resamples": args.resamples, "seed": args.seed, "correction": args.correction}
    if args.out:
        for path in export_comparison(args.run_a, args.run_b, args.out, fmt=args.format, **settings):
            print(f"wrote {path}")
        return 0
    if args.format not in (None, *screen):
        get_comparison_format(args.format)  # a file format (or a typo): one line naming the right ones
        raise ProbekitError(f"--format {args.format} writes files: give --out PATH (the screen's formats are "
                            "table, json)")
    a, b = load_run(args.run_a), load_run(args.run_b)
    cmp = compare_runs(str(a.run_id), str(b.run_id), **settings)
    if args.format == "json":
        print_json({"a": a.run_id, "b": b.run_id, **cmp.to_dict()})
        return 0
    _print_comparison(f"{a.run_id}  {a.meta['label']}", f"{b.run_id}  {b.meta['label']}", cmp)
    return 0


def _cmd_export(args) -> int:
    if not args.out:
        raise ProbekitError("`runs export` needs --out PATH (a .csv or .parquet file, or with --format "
                            f"{', '.join(n for n in FORMATS if n not in ('csv', 'parquet'))} a file or folder)")
    for path in export_run(args.run, args.out, fmt=args.format):
        print(f"wrote {path}")
    return 0


def _cmd_import(args) -> int:
    run_id, new = import_run(args.path, fmt=args.format)
    print(f"imported {args.path} as run {run_id}" if new else f"already imported as run {run_id}: nothing added")
    return 0


def _cmd_delete(args) -> int:
    delete_run(args.run)
    print(f"deleted {args.run}")
    return 0


def register(sub) -> None:

    p = sub.add_parser("runs", help="stored benchmark runs: list, show, compare, export, import, delete",
                       description="Stored benchmark runs; `runs ACTION --help` lists an action's flags.")
    actions = add_actions(p)
    run_help = "run id (see `runs list`)"
    a = actions.add_parser("list", help="every stored run, finished or not, with its macro acc@1/acc@10/MRR")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.set_defaults(func=_cmd_list)
    a = actions.add_parser("show", help="one run: per relation, macro and micro acc@k and MRR (and its hard block)")
    a.add_argument("run", help=run_help)
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.add_argument("--counting", default=None, choices=list(COUNTINGS),
                   help="acc@k counting; default: the run's own. "
                   + "; ".join(f"{k}: {v}" for k, v in COUNTINGS.items()))
    a.set_defaults(func=_cmd_show)
    a = actions.add_parser("compare", help="is a difference real? run A against run B on their shared queries: "
                                           "paired test (McNemar / sign-flip) and bootstrap interval per relation")
    a.add_argument("run_a", nargs="?", help="run A (see `runs list`)")
    a.add_argument("run_b", nargs="?", help="run B, the baseline the difference is taken against")
    a.add_argument("--metric", default="acc@10", choices=metric_names(), help="the metric compared")
    a.add_argument("--set", default=None, choices=list(SUBSETS),
                   help="queries: default the runs' own full (or hard) set")
    a.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    a.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples and sign flips (default 2000)")
    a.add_argument("--seed", type=int, default=0, help="resampling seed (the same seed, the same numbers)")
    a.add_argument("--correction", default="holm", choices=list(CORRECTIONS),
                   help="; ".join(f"{k}: {v}" for k, v in CORRECTIONS.items()))
    a.add_argument("--format", default=None, metavar="FORMAT",
                   help="on the screen: table (default) or json; with --out, the file format: "
                   + "; ".join(f"{f.name}: {f.description}" for f in COMPARISON_FORMATS.values())
                   + ". Default with --out: json for a .json path")
    a.add_argument("--out", default=None, metavar="PATH",
                   help="write the comparison and (eee, lm-eval) both runs' own exports there; see docs/exports.md")
    a.add_argument("--from", dest="source", default=None, metavar="PATH",
                   help="show a written comparison again (its folder, comparison.json or an eee record of it)")
    a.set_defaults(func=_cmd_compare)
    a = actions.add_parser("export", help="one run's results as a file: a table (csv, parquet) or a standard "
                                          "format (eee, lm-eval, hf-eval-results); see docs/exports.md")
    a.add_argument("run", help=run_help)
    a.add_argument("--out", default=None, help="output file or folder (as the format takes); required")
    a.add_argument("--format", default=None, metavar="FORMAT",
                   help="; ".join(f"{f.name}: {f.description}" for f in FORMATS.values())
                   + ". Default: from --out's suffix")
    a.set_defaults(func=_cmd_export)
    a = actions.add_parser("import", help="read probekit's own eee or lm-eval export back as a stored run "
                                          "(marked imported; importing it again adds nothing)")
    a.add_argument("path", help="the export: its record / results file, or the folder holding it")
    a.add_argument("--format", default=None, metavar="FORMAT", help="eee or lm-eval; default: told from the files")
    a.set_defaults(func=_cmd_import)
    a = actions.add_parser("delete", help="delete one run and its results")
    a.add_argument("run", help=run_help)
    a.set_defaults(func=_cmd_delete)
