"""``python -m probekit grid run|list|show``: probing grids, locally or on a Ray cluster."""

from __future__ import annotations

from .. import grid
from ..errors import ProbekitError, command
from ..metrics.registry import metric_names
from .common import add_actions, print_json, print_listing, progress_bar


def _print_cells(frame) -> None:
    for r in frame.to_dict(orient="records"):
        values = {name: r.get(f"macro {name}") for name in metric_names()}
        acc = "  ".join(f"{name} {100 * v:6.2f}" for name, v in values.items() if v is not None and v == v)
        extra = f"  {r['run_id']}" if r.get("run_id") else ""
        err = f"  {r['error']}" if r.get("status") == "failed" and r.get("error") else ""
        print(f"{r['status']:<8} {r['label'][:70]:<70} {acc}{extra}{err}")


def _cmd_list(args) -> int:
    print_listing(grid.list_grids(), args.format, empty=f"no grids yet ({command()} grid run grid.yaml)")
    return 0


def _cmd_show(args) -> int:
    meta, cells = grid.get_grid(args.grid), grid.cells_frame(args.grid)
    if args.format == "json":
        print_json({"grid": meta, "cells": cells.drop(columns=["settings"]).to_dict(orient="records")})
    else:
        print(f"{meta['grid_id']}  {meta['name']}  {meta['n_cells']} cells")
        _print_cells(cells)
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
    a = actions.add_parser("show", help="one grid's cells: status, macro acc@10, run id")
    a.add_argument("grid", metavar="GRID_ID", help="grid id (see `grid list`)")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.set_defaults(func=_cmd_show)
