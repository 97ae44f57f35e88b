"""``python -m probekit grid run|list|show``: probing grids, locally or on a Ray cluster."""

from __future__ import annotations

import math

from .. import grid
from ..errors import ProbekitError, command, positive_int
from ..grid import scores
from ..metrics.accuracy import COUNTINGS, counting_label
from ..metrics.registry import metric_names
from ..model_registry import short_model_id
from .common import add_actions, print_json, print_listing, progress_bar


def _print_cells(frame, *, metric: str | None = None) -> None:
    """One line per cell: status, label, the macro value of every metric (and ``metric``'s interval when the frame
    has it), run id or error; first the counting rule of the stored cells' numbers."""
    for c in frame["counting"].dropna().unique() if "counting" in frame.columns else ():
        print(counting_label(c) + (" (each cell as its run was stored)" if frame["counting"].nunique() > 1 else ""))
    shown = f"macro {metric} [lo, hi]" if metric else None
    width = min(100, max((len(str(x)) for x in frame["label"]), default=0))  # whole labels, up to a point
    for r in frame.to_dict(orient="records"):
        values = {name: r.get(f"macro {name}") for name in metric_names()}
        acc = "  ".join(f"{name} {100 * v:6.2f}" for name, v in values.items() if v is not None and v == v)
        ci = f"  {metric} {r[shown]}" if shown and shown in r and r.get("status") == "done" else ""
        extra = f"  {r['run_id']}" if r.get("run_id") else ""
        err = f"  {r['error']}" if r.get("status") == "failed" and r.get("error") else ""
        print(f"{r['status']:<8} {r['label'][:width]:<{width}} {acc}{ci}{extra}{err}")


def _num(v: float, fmt: str = ".3f") -> str:
    return "undefined" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)


def _print_stability(held: dict) -> None:
    level = f"{100 * (1 - held['alpha']):g} %"
    print(f"Does the model ranking hold across the grid's conditions? {held['average']} {held['metric']}, "
          f"{held['counting']}")
    print(f"  Kendall's tau-b (mean over {len(held['taus'])} condition pairs) {_num(held['tau'])}, {level} interval "
          f"[{_num(held['lo'])}, {_num(held['hi'])}] over {held['defined']:,} of {held['n_boot']:,} query resamples "
          f"(seed {held['seed']})")
    for r in held["pairs"].to_dict(orient="records"):
        flips = f"; flips in {r['flips in']}" if r["flips in"] else ""
        a, b = (short_model_id(str(r[m])) for m in ("model a", "model b"))
        print(f"  {a} vs {b} ({r['reference order']} on the mean): "
              f"{r['verdict']}, {r['in resamples']}{flips}")
    print(f"  ({held['rule']})")


def _cmd_list(args) -> int:
    print_listing(grid.list_grids(), args.format, empty=f"no grids yet ({command()} grid run grid.yaml)")
    return 0


def _cmd_show(args) -> int:
    meta = grid.get_grid(args.grid)
    positive_int("--resamples", args.resamples)
    cells = scores.cell_intervals(args.grid, metric=args.metric, n_boot=args.resamples, seed=args.seed)
    held, why = None, None
    try:
        held = scores.grid_stability(args.grid, metric=args.metric, average=args.average, counting=args.counting,
                                     n_boot=args.resamples, seed=args.seed)
    except ProbekitError as e:  # one model or one condition: nothing to compare, said in one line
        why = str(e)
    if args.format == "json":
        stab = None if held is None else {
            **{k: held[k] for k in ("metric", "average", "counting", "models", "conditions", "tau", "lo", "hi",
                                    "defined", "n_boot", "seed", "alpha", "rule")},
            "taus": held["taus"].to_dict(orient="records"), "pairs": held["pairs"].to_dict(orient="records")}
        print_json({"grid": meta, "intervals": cells.attrs["note"],
                    "cells": cells.drop(columns=["settings"]).to_dict(orient="records"),
                    "ranking": stab or {"note": why}})
    else:
        print(f"{meta['grid_id']}  {meta['name']}  {meta['n_cells']} cells")
        _print_cells(cells, metric=args.metric)
        print(cells.attrs["note"])
        if held is not None:
            _print_stability(held)
        else:
            print(f"ranking across conditions: {why}")
    return 0


def _cmd_run(args) -> int:
    ray_flags = {"address": args.ray_address, "workers": args.workers, "max_retries": args.max_retries}
    backend = args.backend or ("ray" if args.ray_address else "local")  # joining a cluster is the Ray backend
    options = {"device": args.device}
    if backend == "ray":
        options.update({k: v for k, v in ray_flags.items() if v is not None})
    elif any(v is not None for v in ray_flags.values()):
        raise ProbekitError("--ray-address, --workers and --max-retries apply to --backend ray only")
    spec = grid.GridSpec.load(args.file)
    with progress_bar(args.quiet) as report:
        result = grid.run_grid(spec, backend=backend, progress=report, **options)
    if args.format == "json":
        print_json({"grid_id": result.grid_id, "ran": result.ran, "skipped": result.skipped,
                    "seconds": result.seconds, "cells": result.cells.drop(columns=["settings"]).to_dict("records")})
    else:
        print(f"{result.grid_id}: ran {result.ran} cells, {result.skipped} already stored, "
              f"{result.failed} failed, {result.seconds:.1f} s")
        _print_cells(result.cells)
    return 1 if result.failed else 0


def register(sub) -> None:
    p = sub.add_parser("grid", help="probing grids (models x datasets x probes x options x layers), local or Ray",
                       description="Probing grids; `grid ACTION --help` lists an action's flags.")
    actions = add_actions(p)
    a = actions.add_parser("run", help="run every cell of a grid file not stored yet (local or on Ray)")
    a.add_argument("file", metavar="GRID_FILE", help="the grid (.yaml/.json)")
    a.add_argument("--backend", default=None, choices=["local", "ray"],
                   help="default: ray with --ray-address, else local")
    a.add_argument("--ray-address", default=None, help="ray: join this Ray cluster (default: RAY_ADDRESS, else a "
                   "local Ray started on this machine)")
    a.add_argument("--workers", type=int, default=None,
                   help="ray: worker processes, each keeps one model loaded (default 2)")
    a.add_argument("--max-retries", type=int, default=None,
                   help="ray: restarts of a lost worker / retries of its cell (default 2)")
    a.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=_cmd_run)
    a = actions.add_parser("list", help="every stored grid")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.set_defaults(func=_cmd_list)
    a = actions.add_parser("show", help="one grid's cells (status, every macro score, an interval, run id) and "
                                        "whether its model ranking holds across the other axes")
    a.add_argument("grid", metavar="GRID_ID", help="grid id (see `grid list`)")
    a.add_argument("--metric", default="acc@10", choices=metric_names(),
                   help="the metric given an interval and ranked (default acc@10)")
    a.add_argument("--average", default="macro", choices=["macro", "micro"], help="the ranking's average")
    a.add_argument("--counting", default="query", choices=list(COUNTINGS),
                   help="; ".join(f"{k}: {v}" for k, v in COUNTINGS.items()) + " (the ranking's items)")
    a.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    a.add_argument("--seed", type=int, default=0, help="resampling seed (the same seed, the same numbers)")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.set_defaults(func=_cmd_show)
