"""``python -m probekit grid run|list|show``: probing grids, locally or on a Ray cluster."""

from __future__ import annotations

from ..errors import ProbekitError
from .common import print_json, print_listing


def _print_cells(frame) -> None:
    for r in frame.to_dict(orient="records"):
        acc = r.get("macro acc@10")
        acc = "" if acc is None or acc != acc else f"acc@10 {100 * acc:6.2f}"
        extra = f"  {r['run_id']}" if r.get("run_id") else ""
        err = f"  {r['error']}" if r.get("status") == "failed" and r.get("error") else ""
        print(f"{r['status']:<8} {r['label'][:70]:<70} {acc}{extra}{err}")


def _run(args) -> int:
    from .. import grid
    from ..jobs import tqdm_progress

    if args.action == "list":
        print_listing(grid.list_grids(), args.format, empty="no grids yet (python -m probekit grid run grid.yaml)")
        return 0
    if not args.target:
        raise ProbekitError(f"`grid {args.action}` needs {'a grid file' if args.action == 'run' else 'a grid id'}")
    if args.action == "show":
        meta, cells = grid.get_grid(args.target), grid.cells_frame(args.target)
        if args.format == "json":
            print_json({"grid": meta, "cells": cells.drop(columns=["settings"]).to_dict(orient="records")})
        else:
            print(f"{meta['grid_id']}  {meta['name']}  {meta['n_cells']} cells")
            _print_cells(cells)
        return 0
    spec = grid.GridSpec.load(args.target)
    options = {"device": args.device}
    if args.backend == "ray":
        options.update(address=args.ray_address, workers=args.workers, max_retries=args.max_retries)
    result = grid.run_grid(spec, backend=args.backend, progress=tqdm_progress(quiet=args.quiet), **options)
    if args.format == "json":
        print_json({"grid_id": result.grid_id, "ran": result.ran, "skipped": result.skipped,
                    "seconds": result.seconds, "cells": result.cells.drop(columns=["settings"]).to_dict("records")})
    else:
        print(f"{result.grid_id}: ran {result.ran} cells, {result.skipped} already stored, "
              f"{result.failed} failed, {result.seconds:.1f} s")
        _print_cells(result.cells)
    return 1 if result.failed else 0


def register(sub) -> None:
    p = sub.add_parser("grid", help="probing grids (models x datasets x probes x options x layers), local or Ray")
    p.add_argument("action", choices=["run", "list", "show"])
    p.add_argument("target", nargs="?", default=None, help="run: grid file (.yaml/.json); show: grid id")
    p.add_argument("--backend", default="local", choices=["local", "ray"])
    p.add_argument("--ray-address", default=None, help="join this Ray cluster (default: RAY_ADDRESS, else a local "
                   "Ray started on this machine)")
    p.add_argument("--workers", type=int, default=2, help="ray: worker processes (each keeps one model loaded)")
    p.add_argument("--max-retries", type=int, default=2, help="ray: restarts of a lost worker / retries of its cell")
    p.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run)
