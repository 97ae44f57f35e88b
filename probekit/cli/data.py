"""``probekit data``: fetch the official dataset releases, register a local copy, list what is found.

``data fetch medlama`` downloads MedLAMA's published data (github.com/cambridgeltl/medlama at a pinned commit)
into ``<data dir>/medlama``, checks every file against the pinned checksums and that the hard set is hard;
``data fetch elicit_corpora`` takes MedLAMA's rewiring corpora from the same archive; ``data fetch biolama``
BioLAMA's ``data.tar.gz``. Interrupted downloads resume. Offline: download the release on a machine with
internet and run ``data add NAME PATH``.
"""

from __future__ import annotations

import sys

from .. import config
from ..datasets import fetch
from ..datasets.fetch import CHECKS, RELEASES
from ..errors import ProbekitError
from .common import print_json


def _cmd_fetch(args) -> int:

    release = fetch.RELEASES[args.name]
    if args.url:
        from dataclasses import replace

        release = replace(release, url=args.url, sha256=args.sha256 or release.sha256)
    elif args.sha256:
        raise ProbekitError("--sha256 goes with --url (the official releases have their own checks)")
    log = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    root = fetch.fetch(release, dest=args.dest, subset=args.subset, force=args.force, progress=not args.quiet,
                       log=log)
    print(root)
    return 0


def _cmd_add(args) -> int:

    summary = fetch.add(args.name, args.path, subset=args.subset)
    print(f"registered {args.name}: {config.registered_datasets()[args.name]} ({summary})")
    return 0


def dataset_rows() -> list[dict]:
    """Each fetchable dataset: where probekit looks for it, why there, and whether it is found."""
    registered = config.registered_datasets()
    rows = []
    for name, var, path in (("medlama", "PROBEKIT_MEDLAMA_DIR", config.medlama_dir()),
                            ("biolama", "PROBEKIT_BIOLAMA_DIR", config.biolama_dir()),
                            ("elicit_corpora", "PROBEKIT_CORPORA_DIR", config.corpora_dir())):
        source = var if config.set_in_env(var) else "registered" if name in registered else "default"
        found = (path / "2021AA").is_dir() if name == "medlama" else path.is_dir() and any(path.iterdir())
        rows.append({"name": name, "path": str(path), "from": source, "found": found,
                     "get": "" if found else f"probekit data fetch {name}  (or: probekit data add {name} PATH)"})
    demo = config.demo_dir()
    rows.insert(0, {"name": "demo", "path": str(demo), "from": "PROBEKIT_DEMO_DIR" if config.set_in_env(
        "PROBEKIT_DEMO_DIR") else "shipped", "found": (demo / "2021AA").is_dir(), "get": ""})
    return rows


def _cmd_list(args) -> int:
    rows = dataset_rows()
    if args.format == "json":
        print_json(rows)
        return 0
    for r in rows:
        state = "found" if r["found"] else "missing"
        print(f"{r['name']:<15} {state:<8} {r['path']}  [{r['from']}]" + (f"\n{'':<24}get it: {r['get']}"
                                                                           if r["get"] else ""))
    return 0


def register(sub) -> None:

    p = sub.add_parser("data", help="datasets: fetch the official MedLAMA/BioLAMA releases, add a local copy, list",
                       description=__doc__.splitlines()[0])
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    f = actions.add_parser("fetch", help="download an official release, check it and put it where probekit looks",
                           description="Download an official release (resumes an interrupted download), check its "
                           "size and checksums and that it loads, and extract it into the data dir.")
    f.add_argument("name", choices=sorted(RELEASES))
    f.add_argument("--dest", default=None, help="extract here instead of <data dir>/NAME (then registered)")
    f.add_argument("--subset", default=None, help="BioLAMA: ctd (default) or wikidata, the one registered")
    f.add_argument("--url", default=None, help="download from this mirror instead (the same archive)")
    f.add_argument("--sha256", default=None, help="with --url: the archive's expected SHA-256")
    f.add_argument("--force", action="store_true", help="download and extract again even if already present")
    f.add_argument("--quiet", action="store_true", help="no progress bar, no messages; print the folder only")
    f.set_defaults(func=_cmd_fetch)

    a = actions.add_parser("add", help="register a local copy (e.g. downloaded on another machine)",
                           description="Check a local copy of a dataset and register it so probekit finds it "
                           "(a PROBEKIT_*_DIR variable still wins).")
    a.add_argument("name", choices=sorted(CHECKS))
    a.add_argument("path", help="the dataset folder (MedLAMA: the one holding prompts.csv and 2021AA/)")
    a.add_argument("--subset", default=None, help="BioLAMA: ctd or wikidata when PATH holds both")
    a.set_defaults(func=_cmd_add)

    ls = actions.add_parser("list", help="where each dataset is looked for and whether it is found")
    ls.add_argument("--format", default="table", choices=["table", "json"])
    ls.set_defaults(func=_cmd_list)


__all__ = ["dataset_rows", "register"]
