"""``python -m probekit tour list|show|add|export|import|check|delete``: tours of saved views for a talk
(:mod:`probekit.tours`); present one in the app at ``/?tour=NAME&present=1``."""

from __future__ import annotations

import sys

from ..errors import ProbekitError
from .common import add_actions, print_json, print_listing, progress_bar


def _cmd_list(args) -> int:
    from .. import tours

    print_listing(tours.list_tours(), args.format,
                  empty="no tours yet (press 'Add to tour' next to a share link in the app, or `probekit tour add`)")
    return 0


def _cmd_show(args) -> int:
    from .. import tours

    tour = tours.get_tour(args.name)
    if args.format == "json":
        print_json({"tour": tour.name, "steps": [{"title": s.title, "note": s.note, "page": s.page, "link": s.link}
                                                 for s in tour.steps]})
        return 0
    print(f"{tour.name}  {len(tour.steps)} steps  (present: /?tour={tour.name}&present=1)")
    for i, s in enumerate(tour.steps, start=1):
        print(f"{i:>3}. {s.title}  [{s.page}]" + (f"  — {s.note}" if s.note else ""))
        print(f"     {s.link}")
    return 0


def _cmd_add(args) -> int:
    from .. import tours

    step = tours.step_from_link(args.link, title=args.title, note=args.note)
    tours.STEP_KINDS.get_or_raise(step.page)
    tour = tours.add_step(args.name, step)
    print(f"{tour.name}: step {len(tour.steps)} added ({step.title})")
    return 0


def _cmd_export(args) -> int:
    from .. import tours

    if args.file is None and args.html is None:
        raise ProbekitError("say what to write: FILE (the tour as YAML) and/or --html FILE (an offline deck)")
    if args.skip_missing and args.html is None:
        raise ProbekitError("--skip-missing goes with --html (the YAML file keeps every step)")
    tour = tours.get_tour(args.name)
    if args.html is not None:
        with progress_bar(args.quiet) as report:
            deck = tours.export_deck(tour, args.html, load_model=tours.one_model_loader(),
                                     skip_missing=args.skip_missing, progress=report)
        for line in deck.left_out:
            print(f"left out {line}", file=sys.stderr)
        print(f"wrote {args.html} ({deck.shows} of {len(tour.steps)} steps; open it in a browser, no network needed)")
    if args.file is not None:
        print(f"wrote {tours.export_tour(tour, args.file)}")
    return 0


def _cmd_import(args) -> int:
    from .. import tours

    tour = tours.import_tour(args.file, name=args.name, replace=args.replace)
    print(f"imported tour {tour.name!r} ({len(tour.steps)} steps); check it with `probekit tour check {tour.name}`")
    return 0


def _cmd_check(args) -> int:
    from .. import tours

    tour = tours.get_tour(args.name)
    with progress_bar(args.quiet) as report:
        rows = tours.check_tour(tour, tours.one_model_loader(), progress=report)
    frame = tours.check_frame(rows)
    if args.format == "json":
        print_json(frame.to_dict(orient="records"))
    else:
        for r in rows:
            warm = "   -  " if r.warm_s is None else f"{r.warm_s:6.2f}"
            print(f"{r.position:>3}. {'ok     ' if r.ok else 'MISSING'} cold {r.cold_s:6.2f} s  warm {warm} s  "
                  f"{r.step.title}: {r.message}")
        bad = sum(not r.ok for r in rows)
        print(f"{tour.name}: {len(rows) - bad} of {len(rows)} steps ready" + (f", {bad} missing" if bad else ""))
    return 0 if all(r.ok for r in rows) else 1


def _cmd_delete(args) -> int:
    from .. import tours

    tours.delete_tour(args.name)
    print(f"deleted tour {args.name!r}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("tour", help="tours of saved views for a talk: list, show, add, export, import, check",
                       description="Tours of saved views; present one in the app at /?tour=NAME&present=1. "
                                   "`tour ACTION --help` lists an action's flags.")
    actions = add_actions(p)
    a = actions.add_parser("list", help="every stored tour")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.set_defaults(func=_cmd_list)
    a = actions.add_parser("show", help="a tour's steps: title, note, page and link")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.set_defaults(func=_cmd_show)
    a = actions.add_parser("add", help="append a share link to a tour (made if new)")
    a.add_argument("name", metavar="NAME")
    a.add_argument("link", metavar="LINK", help="a page's share link (full URL, or /page?…)")
    a.add_argument("--title", required=True, help="the step's heading")
    a.add_argument("--note", default="", help="one line shown under the heading")
    a.set_defaults(func=_cmd_add)
    a = actions.add_parser("export", help="write a tour as YAML (with the documents its Context steps use) and/or "
                                          "as an offline HTML deck (--html)")
    a.add_argument("name", metavar="NAME")
    a.add_argument("file", metavar="FILE", nargs="?", default=None, help="e.g. talk.yaml")
    a.add_argument("--html", default=None, metavar="FILE",
                   help="also (or only) write one self-contained HTML file that presents the tour without the "
                        "workbench or a network, e.g. talk.html")
    a.add_argument("--skip-missing", action="store_true",
                   help="with --html: leave out steps whose data are not here (else the export fails, naming them)")
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=_cmd_export)
    a = actions.add_parser("import", help="read a tour YAML file into this store")
    a.add_argument("file", metavar="FILE")
    a.add_argument("--name", default=None, help="store it under this name instead of the file's")
    a.add_argument("--replace", action="store_true", help="replace a tour of the same name")
    a.set_defaults(func=_cmd_import)
    a = actions.add_parser("check", help="prepare every step cold and warm: what is missing, and the times")
    a.add_argument("name", metavar="NAME")
    a.add_argument("--format", default="table", choices=["table", "json"])
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=_cmd_check)
    a = actions.add_parser("delete", help="delete a tour (its steps' views stay)")
    a.add_argument("name", metavar="NAME")
    a.set_defaults(func=_cmd_delete)
