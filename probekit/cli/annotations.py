"""``python -m probekit annotations ...``: the command-line face of :mod:`probekit.annotations`."""

from __future__ import annotations

import json

import pandas as pd

from probekit.annotations import (
    EXPORT_FORMATS,
    EXPORT_TABLES,
    expert_link,
    experts,
    export,
    from_probe,
    from_run,
    get_session,
    issue_token,
    list_sessions,
    revoke_tokens,
    stats,
    stats_json,
)
from probekit.errors import ProbekitError
from probekit.metrics import agreement


def _print_stats(result: dict) -> None:
    meta = result["session"]
    print(f"session {meta['session_id']} '{meta['name']}': {meta['n_queries']} queries × top-{meta['k']}, "
          f"{'blind' if meta['blind'] else 'not blind'}, {result['n_ratings']} ratings by "
          f"{len(result['annotators'])} annotator(s)")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print("\nExpert score × gold hit (consensus per answer):")
        print(result["table5"].to_string(index=False))
        print(agreement.MEDLAMA_NOTE)
        s = result["shares"]
        print(f"\nShare of answers (MedLAMA §5.3's acc@10): of {s['rated']} rated top-{s['k']} answers, "
              f"{s['gold_hits']} gold hits ({100 * s['gold_share']:.1f}%), {s['expert_hits']} rated "
              f"≥{s['threshold']} ({100 * s['expert_share']:.1f}%)" if s["rated"] else "\nNo ratings yet.")
        print("\nAccuracy per query (a query is a hit when one of its top-k answers is):")
        print(result["accuracy"].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print("\nAgreement:")
        print(result["agreement"].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"\nCandidate missing facts (rated ≥ threshold, not gold): {len(result['missing_facts'])}")
        if len(result["missing_facts"]):
            print(result["missing_facts"][["query_text", "answer", "ratings"]].to_string(index=False))


def _cmd_annotations(args) -> int:
    from .common import print_json

    if args.action == "list":
        frame = list_sessions()
        if args.format == "json":
            print_json(json.loads(frame.to_json(orient="records", date_format="iso")))
        elif frame.empty:
            print("no annotation sessions (create one: `python -m probekit annotations create --name NAME`)")
        else:
            for r in frame.to_dict(orient="records"):
                print(f"{r['session_id']}  {r['name']}  [{r['n_queries']} queries × {r['k']}, "
                      f"{r['annotators']} annotators, {r['ratings']} ratings]")
        return 0
    if args.action == "create":
        return _cmd_create(args)
    if not args.session:
        raise ProbekitError(f"`annotations {args.action}` needs --session ID (see `annotations list`)")
    if args.action == "stats":
        result = stats(args.session, threshold=args.threshold)
        if args.format == "json":
            print_json(stats_json(result))
        else:
            _print_stats(result)
        return 0
    if args.action in ("link", "revoke"):
        if not args.name:
            raise ProbekitError(f"`annotations {args.action}` needs --name EXPERT")
        if args.action == "link":
            token = issue_token(args.session, args.name)
            print(f"personal link for {' '.join(args.name.split())} (shown once; send it to them only):\n"
                  f"{expert_link(args.url, args.session, token)}")
        else:
            n = revoke_tokens(args.session, args.name)
            print(f"revoked {n} link(s) of {' '.join(args.name.split())}" if n else
                  f"{' '.join(args.name.split())} has no active link")
        return 0
    if args.action == "experts":
        frame = experts(args.session)
        print(frame.to_string(index=False) if len(frame) else "no experts yet (`annotations link --name NAME`)")
        return 0
    if args.action == "export":
        if not args.out:
            raise ProbekitError("`annotations export` needs --out FILE (.csv, .parquet or .jsonl)")
        fmt = args.format if args.format in EXPORT_FORMATS else None
        path = export(args.session, args.out, fmt=fmt, what=args.table)
        print(f"wrote {path}")
        return 0
    raise ProbekitError(f"unknown action {args.action!r}")  # pragma: no cover - argparse choices


def _cmd_create(args) -> int:
    from .common import _progress_printer, load_dataset_from_args, probe_options

    common = dict(name=args.name, organiser=args.organiser or "", n_queries=args.n, k=args.k, seed=args.seed,
                  blind=not args.not_blind, raters_per_item=args.raters or None)
    if args.run:
        sid = from_run(args.run, relations=args.relation, allow_partial=args.allow_partial, **common)
    else:
        from probekit import models
        from probekit.probes import get_probe

        probe = get_probe(args.probe)
        ds = load_dataset_from_args(args)
        model = models.load(args.model, device=args.device)
        sid = from_probe(model, ds, probe=probe, options=probe_options(args, probe), vocab=args.vocab,
                         exclude_subject=not args.keep_subject, progress=_progress_printer(args.quiet), **common)
    meta = get_session(sid)
    print(f"created session {sid}: {meta['n_queries']} queries × top-{meta['k']} "
          f"(a personal link per expert: `python -m probekit annotations link --session {sid} --name NAME`)")
    return 0


def register(sub) -> None:
    from .common import add_dataset_args, add_model_args, add_probe_args

    p = sub.add_parser("annotations", help="expert annotation sessions: create, list, link/revoke experts, stats, "
                                           "export")
    p.add_argument("action", choices=["create", "list", "link", "revoke", "experts", "stats", "export"])
    p.add_argument("--session", default=None, help="session id (link, revoke, experts, stats, export)")
    p.add_argument("--url", default="http://localhost:8501", help="link: the app's address as experts reach it")
    p.add_argument("--format", default=None,
                   help="list/stats: table | json; export: csv | parquet | jsonl (default from --out's suffix)")
    p.add_argument("--out", default=None, help="export: output file")
    p.add_argument("--table", default="ratings", choices=EXPORT_TABLES, help="export: which table")
    p.add_argument("--threshold", type=int, default=5, choices=[4, 5], help="stats: expert score counted as a hit")
    g = p.add_argument_group("create")
    g.add_argument("--name", default=None, help="create: session name; link, revoke: the expert's name")
    g.add_argument("--organiser", default="")
    g.add_argument("--run", default=None, help="build from this stored run instead of probing")
    g.add_argument("--allow-partial", action="store_true",
                   help="with --run: accept an unfinished run (cancelled, failed, interrupted)")
    g.add_argument("--n", type=int, default=15, help="number of queries (seeded sample, spread over relations)")
    g.add_argument("--k", type=int, default=10, help="top-k answers per query")
    g.add_argument("--raters", type=int, default=0, help="annotators per query (0: every annotator rates all)")
    g.add_argument("--not-blind", action="store_true", help="show gold marks, ranks and scores to annotators")
    g.add_argument("--keep-subject", action="store_true",
                   help="keep each query's own subject among its answers (left out by default when probing)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--quiet", action="store_true")
    add_model_args(g)
    add_dataset_args(g)
    add_probe_args(g)
    p.set_defaults(func=_cmd_annotations_checked)


def _cmd_annotations_checked(args) -> int:
    allowed = {"list": ("table", "json"), "stats": ("table", "json"), "export": EXPORT_FORMATS, "create": (),
               "link": (), "revoke": (), "experts": ()}
    if args.format is None:
        args.format = "table" if args.action in ("list", "stats") else None
    elif args.format not in allowed[args.action]:
        raise ProbekitError(f"--format {args.format!r} does not apply to `annotations {args.action}`; "
                            f"use {' | '.join(allowed[args.action]) or 'no --format'}")
    if args.action == "create" and not args.name:
        raise ProbekitError("`annotations create` needs --name NAME")
    return _cmd_annotations(args)
