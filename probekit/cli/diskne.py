"""``python -m probekit diskne build|run|show``: DisKnE disease-knowledge probing by fine-tuning."""

from __future__ import annotations

import math

from ..diskne import build, data, recipes, splits
from ..errors import ProbekitError, command
from ..jobs import run_in_foreground
from .common import print_json, print_listing, progress_bar


def _pct(v: float, std: float | None = None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{100 * v:.1f}" + ("" if std is None or math.isnan(std) else f" ± {100 * std:.1f}")


def _cmd_build(args) -> int:

    if args.source == "licensed":
        if not args.out:
            raise ProbekitError("`diskne build --source licensed` needs --out FILE (the licensed set stays yours: "
                                "keep it outside the repository or under the git-ignored cache/)")
        ds = data.load_licensed(args.nli or [], args.annotations, negatives_csv=args.negatives_csv,
                                names_csv=args.names_csv)
        path = data.save_set(ds, args.out)
    else:
        ds, path = build.build(args.source, seed=args.seed, per_disease=args.per_disease,
                               max_diseases=args.max_diseases or None, data_dir=args.data_dir, out=args.out)
    summary = ds.summary()
    rows = splits.train_rows_by_filter(ds) if ds.negatives else {}
    if args.format == "json":
        print_json({"path": str(path), **summary, "mean_train_rows_by_filter": rows})
        return 0
    print(f"wrote {path}  ({summary['diseases']} diseases, {summary['positives']} positives, version "
          f"{summary['version']})")
    for cat, c in summary["categories"].items():
        print(f"  {data.category_label(cat):<24} {c['positives']:>5} positives  {c['diseases']:>4} diseases  "
              f"{c['eligible']:>4} with >= 2 positives")
    if rows:
        print("  Train_X rows per target disease (mean over targets, with the set's negatives): "
              + ", ".join(f"{k} filter {v:,.0f}" for k, v in rows.items()))
    if ds.settings.get("kind") != "licensed":
        print(f"  {build.SMOKE_NOTE}")
    return 0


def _set_path(args):

    if args.set:
        return args.set
    _, path = build.build("demo")  # deterministic and cheap: the offline default
    return path


def _print_tables(run_ids: list[str], fmt: str) -> None:
    from ..diskne import data, results, runs

    cells = runs.load_cells(run_ids)
    summary, per_disease = results.summary(cells), results.per_disease(cells)
    if fmt == "json":
        print_json({"runs": [runs.get_run(r) | {"negatives": None} for r in run_ids],
                    "summary": summary.to_dict(orient="records"), "diseases": per_disease.to_dict(orient="records")})
        return
    for r in run_ids:
        meta = runs.get_run(r)
        print(f"{r}  {meta['label']}  [{meta['status']}, {meta['n_cells']} cells, {meta['device']}, "
              f"{meta['seconds'] or 0:.0f} s]  set {meta['set_name']} {meta['set_version']}")
    if summary.empty:
        print("no finished cells yet")
        return
    print(f"\n{'model':<36}{'category':<24}{'diseases':>9}{'seeds':>6}  {'macro F1 %':>14}  {'weighted F1 %':>14}")
    for row in summary.to_dict(orient="records"):
        print(f"{row['model'][:35]:<36}{data.category_label(row['category']):<24}{row['diseases']:>9}"
              f"{row['seeds']:>6}  {_pct(row['macro'], row['macro_std']):>14}  "
              f"{_pct(row['weighted'], row['weighted_std']):>14}")
    print(f"\n{'model':<36}{'category':<24}{'disease':<36}{'F1 %':>7}{'support':>8}")
    for row in per_disease.to_dict(orient="records"):
        print(f"{row['model'][:35]:<36}{data.category_label(row['category']):<24}{row['disease'][:35]:<36}"
              f"{_pct(row['f1']):>7}{row['support']:>8}")


def _cmd_run(args) -> int:
    from ..diskne import runs

    finetune = {"recipe": args.recipe, "lr": args.lr, "batch_size": args.batch_size, "max_epochs": args.epochs,
                "patience": args.patience, "val_fraction": args.val_fraction, "max_length": args.max_length,
                "train_filter": args.train_filter, "hypothesis": args.hypothesis,
                "hypothesis_only": args.hypothesis_only, "max_train": args.max_train}
    path = _set_path(args)

    def work(progress, should_cancel):
        return runs.run_grid(args.model or ["default"], path, categories=args.category, seeds=args.seeds,
                             finetune=finetune, n_negatives=args.negatives, device=args.device,
                             diseases=args.disease, progress=progress, should_cancel=should_cancel)

    with progress_bar(args.quiet) as report:
        run_ids = run_in_foreground(work, progress=report)
    _print_tables(run_ids, args.format)
    return 0


def _cmd_show(args) -> int:
    from ..diskne import runs

    if not args.run:
        def line(r: dict) -> str:
            return (f"{r['run_id']}  {r['status']:<9} {r['label']}  set {r['set_name']}  "
                    f"[{r['cells_done']}/{r['n_cells']} cells]")

        print_listing(runs.list_runs(), args.format, empty=f"no DisKnE runs (run `{command()} diskne run`)",
                      line=line)
        return 0
    _print_tables(args.run, args.format)
    return 0


def register(sub) -> None:

    p = sub.add_parser("diskne", help="DisKnE: disease knowledge by per-disease fine-tuning (build, run, show)")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    b = actions.add_parser("build", help="build the paper's DisKnE set from its public annotation CSVs and your "
                                         "MedNLI copy (--source licensed), or a UMLS-derived smoke set (not DisKnE)")
    b.add_argument("--source", default="demo", choices=["demo", "medlama", "licensed"],
                   help="licensed: DisKnE itself (the repository's annotation CSV + your MedNLI / MEDIQA-NLI files); "
                        "demo | medlama: a UMLS-derived smoke set, not DisKnE (from data/demo or PROBEKIT_MEDLAMA_DIR)")
    b.add_argument("--data-dir", default=None, help="demo/medlama: the MedLAMA-layout folder")
    b.add_argument("--seed", type=int, default=0, help="derived sets: premises and diseases are drawn by seed")
    b.add_argument("--per-disease", type=int, default=3, help="derived sets: positives per disease")
    b.add_argument("--max-diseases", type=int, default=40, help="derived sets: diseases per category (0 = all)")
    b.add_argument("--nli", action="append", default=None, help="licensed: a MedNLI / MEDIQA-NLI JSONL (repeat)")
    b.add_argument("--annotations", default=None, help="licensed: a DisKnE annotation CSV")
    b.add_argument("--negatives-csv", default=None, help="licensed: optional CSV with disease, negative_disease")
    b.add_argument("--names-csv", default=None,
                   help="licensed: optional CSV with CUI, name (from your UMLS) naming the negative diseases")
    b.add_argument("--out", default=None, help="output file (default: cache/diskne/<source>-seed…json)")
    b.add_argument("--format", default="table", choices=["table", "json"])
    b.set_defaults(func=_cmd_build)

    r = actions.add_parser("run", help="fine-tune per (model, disease, seed), store the run, print F1 tables")
    r.add_argument("--set", default=None, help="a built set (default: the demo-derived smoke set, built if needed)")
    r.add_argument("--recipe", default=None, choices=sorted(recipes.RECIPES),
                   help="fine-tuning recipe (default: diskne-reference for a licensed set, probekit for a smoke set); "
                        "the options below override single fields")
    r.add_argument("--model", action="append", default=None, help="model id or folder (repeat; default: default)")
    r.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")
    r.add_argument("--category", action="append", default=None, help="only these categories (repeat)")
    r.add_argument("--disease", action="append", default=None, help="only these disease ids (repeat)")
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    r.add_argument("--negatives", type=int, default=10, help="negative diseases per disease (paper: 10)")
    r.add_argument("--lr", type=float, default=None)
    r.add_argument("--batch-size", type=int, default=None)
    r.add_argument("--epochs", type=int, default=None, help="maximum epochs (early stopping on validation loss)")
    r.add_argument("--patience", type=int, default=None, help="non-improving epochs before stopping (recipe: 2 | 1)")
    r.add_argument("--val-fraction", type=float, default=None)
    r.add_argument("--max-length", type=int, default=None, help="recipe: 256 | 128")
    r.add_argument("--train-filter", default=None, choices=splits.TRAIN_FILTERS,
                   help="Train_X filter: repository (DisKnE's splits.py) | strict (also bans neg(X))")
    r.add_argument("--hypothesis", default="canonical", choices=["canonical", "full"])
    r.add_argument("--hypothesis-only", action="store_true", help="the hypothesis-only baseline")
    r.add_argument("--max-train", type=int, default=None, help="cap training examples per cell (quick runs)")
    r.add_argument("--format", default="table", choices=["table", "json"])
    r.add_argument("--quiet", action="store_true")
    r.set_defaults(func=_cmd_run)

    s = actions.add_parser("show", help="list DisKnE runs, or show one or more (macro/weighted F1, per disease)")
    s.add_argument("run", nargs="*", default=None, help="run ids (none: list the runs)")
    s.add_argument("--format", default="table", choices=["table", "json"])
    s.set_defaults(func=_cmd_show)
