"""``python -m probekit annotations ...``: the command-line face of :mod:`probekit.annotations`."""

from __future__ import annotations

import json

import pandas as pd

from probekit import models
from probekit.annotations import (
    EXPORT_FORMATS,
    EXPORT_TABLES,
    ROLES,
    SELECTIONS,
    describe,
    disputed,
    expert_link,
    experts,
    export,
    from_probe,
    from_run,
    from_selection,
    get_session,
    issue_token,
    list_sessions,
    record_verdict,
    review_view,
    reviewer_link,
    reviewers,
    revoke_tokens,
    select,
    stats,
    stats_json,
)
from probekit.errors import ProbekitError, command
from probekit.metrics import agreement
from probekit.types import MAX_K

from .common import (
    add_actions,
    add_dataset_args,
    add_model_args,
    add_probe_args,
    load_dataset_from_args,
    print_json,
    probe_options,
    progress_bar,
    vocab_of,
)


def _print_stats(result: dict) -> None:
    meta = result["session"]
    print(f"session {meta['session_id']} '{meta['name']}': {meta['n_queries']} queries × top-{meta['k']}, "
          f"{'blind' if meta['blind'] else 'not blind'}, {result['n_ratings']} ratings by "
          f"{len(result['annotators'])} annotator(s)")
    if meta.get("selection"):
        print(f"queries chosen by {describe(meta['selection'])}")
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
        print("\nOrdinal agreement (ICC: two-way random, absolute agreement, Shrout & Fleiss ICC(2,·)):")
        print(result["ordinal"].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print("\nRater quality (bias and consistency against the other raters' mean; reliability: Dawid–Skene):")
        print(result["raters"].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print("\nExpert acc@k, plain consensus and weighted by rater reliability:")
        print(result["adjusted_accuracy"].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"\n{result['verdict_note'][0].upper()}{result['verdict_note'][1:]}.")
        print(f"\nCandidate missing facts (rated ≥ threshold, not gold): {len(result['missing_facts'])}")
        if len(result["missing_facts"]):
            print(result["missing_facts"][["query_text", "answer", "ratings"]].to_string(index=False))


def _format(args, allowed: tuple[str, ...], default: str | None) -> str | None:
    """``--format`` of an action that takes a few formats (the others are refused with the ones it takes)."""
    if args.format is None:
        return default
    if args.format not in allowed:
        raise ProbekitError(f"--format {args.format!r} does not apply to `annotations {args.action}`; "
                            f"use {' | '.join(allowed)}")
    return args.format


def _session(args) -> str:
    if not args.session:
        raise ProbekitError(f"`annotations {args.action}` needs --session ID (see `annotations list`)")
    return args.session


def _expert(args) -> str:
    if not args.name:
        raise ProbekitError(f"`annotations {args.action}` needs --name EXPERT")
    return args.name


def _cmd_list(args) -> int:

    frame = list_sessions()
    if _format(args, ("table", "json"), "table") == "json":
        print_json(json.loads(frame.to_json(orient="records", date_format="iso")))
    elif frame.empty:
        print(f"no annotation sessions (create one: `{command()} annotations create --name NAME`)")
    else:
        for r in frame.to_dict(orient="records"):
            print(f"{r['session_id']}  {r['name']}  [{r['n_queries']} queries × {r['k']}, "
                  f"{r['annotators']} annotators, {r['ratings']} ratings]"
                  + (f" chosen by rule '{r['selection']}'" if r.get("selection") else ""))
    return 0


def _cmd_stats(args) -> int:

    fmt = _format(args, ("table", "json"), "table")
    result = stats(_session(args), threshold=args.threshold)
    if fmt == "json":
        print_json(stats_json(result))
    else:
        _print_stats(result)
    return 0


def _cmd_review(args) -> int:
    session = _session(args)
    if args.item is None:
        if args.score is not None:
            raise ProbekitError("--score needs --item ID (the answer to settle; see `annotations review` without it)")
        table = disputed(session, min_spread=args.min_spread)
        if table.empty:
            print(f"no disputed answers (rated by two or more raters {args.min_spread}+ points apart)")
            return 0
        for row in table.to_dict(orient="records"):
            view = review_view(session, row["item_id"], show_names=args.show_names)
            scores = ", ".join(f"{r['rater']}: {r['score']}" for r in view["ratings"])
            verdict = "" if view["verdict"] is None else f"  [verdict {view['verdict']['score']}]"
            print(f"{row['item_id']}  {row['query']} → {row['answer']}  ({scores}){verdict}")
        return 0
    if args.score is None:
        view = review_view(session, args.item, show_names=args.show_names)
        print_json(view)
        return 0
    if not args.name:
        raise ProbekitError("`annotations review --score` needs --name REVIEWER")
    event = record_verdict(session, args.item, args.name, args.score, note=args.note or "")
    print(f"recorded verdict {args.score} on {args.item} (event {event}); the ratings stay as they were")
    return 0


def _cmd_link(args) -> int:
    session, name = _session(args), _expert(args)
    token = issue_token(session, name, role=args.role)
    make, what = (reviewer_link, "reviewer link") if args.role == "reviewer" else (expert_link, "personal link")
    print(f"{what} for {' '.join(name.split())} (shown once; send it to them only):\n"
          f"{make(args.url, session, token)}")
    return 0


def _cmd_revoke(args) -> int:
    session, name = _session(args), _expert(args)
    n = revoke_tokens(session, name)
    print(f"revoked {n} link(s) of {' '.join(name.split())}" if n else f"{' '.join(name.split())} has no active link")
    return 0


def _cmd_experts(args) -> int:
    session = _session(args)
    frame = experts(session)
    print(frame.to_string(index=False) if len(frame) else "no experts yet (`annotations link --name NAME`)")
    team = reviewers(session)
    if len(team):
        print("\nreviewers (they record verdicts on disputed answers; `annotations revoke --name NAME` ends a link):")
        print(team.to_string(index=False))
    return 0


def _cmd_export(args) -> int:
    fmt = _format(args, EXPORT_FORMATS, None)
    session = _session(args)
    if not args.out:
        raise ProbekitError("`annotations export` needs --out FILE (.csv, .parquet or .jsonl)")
    print(f"wrote {export(session, args.out, fmt=fmt, what=args.table)}")
    return 0


def _params(args) -> dict:
    """``--param KEY=VALUE`` (repeatable) as a dict; the rule converts and checks the values."""
    out = {}
    for item in args.param or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ProbekitError(f"--param takes KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _cmd_select(args, common: dict) -> int:
    if not args.select:
        raise ProbekitError(f"--from-runs/--from-session need --select RULE; available: {', '.join(SELECTIONS)}")
    if args.run:
        raise ProbekitError("give either --run (a sample of one run) or --from-runs with --select, not both")
    if args.preview:
        picked, table, described = select(args.select, runs=args.from_runs or [], session=args.from_session,
                                          params=_params(args), k=args.k)
        print(f"{describe({**described, 'taken': min(args.n, len(picked))})} (preview: nothing created)")
        with pd.option_context("display.width", 160, "display.max_columns", 20, "display.max_colwidth", 50):
            print(table.head(args.n).to_string(index=False) if len(table) else "no query qualifies")
        return 0
    common.pop("relations", None)
    sid = from_selection(args.select, runs=args.from_runs or [], session=args.from_session, params=_params(args),
                         **common)
    meta = get_session(sid)
    print(f"created session {sid}: {meta['n_queries']} queries × top-{meta['k']}, chosen by "
          f"{describe(meta['selection'])} (a personal link per expert: "
          f"`{command()} annotations link --session {sid} --name NAME`)")
    return 0


def _cmd_create(args) -> int:

    if not args.name and not args.preview:
        raise ProbekitError("`annotations create` needs --name NAME")
    common = dict(name=args.name, organiser=args.organiser or "", n_queries=args.n, k=args.k, seed=args.seed,
                  blind=not args.not_blind, raters_per_item=args.raters or None)
    if args.select or args.from_runs or args.from_session:
        return _cmd_select(args, common)
    if args.param or args.preview:
        raise ProbekitError("--param and --preview go with --select RULE (and --from-runs or --from-session)")
    if args.run:
        sid = from_run(args.run, relations=args.relation, allow_partial=args.allow_partial, **common)
    else:
        from probekit.probes import get_probe

        probe = get_probe(args.probe)
        args.vocab = vocab_of(args, probe)
        ds = load_dataset_from_args(args)
        model = models.load(args.model, device=args.device)
        with progress_bar(args.quiet) as report:
            sid = from_probe(model, ds, probe=probe, options=probe_options(args, probe), vocab=args.vocab,
                             exclude_subject=not args.keep_subject, progress=report, **common)
    meta = get_session(sid)
    print(f"created session {sid}: {meta['n_queries']} queries × top-{meta['k']} "
          f"(a personal link per expert: `{command()} annotations link --session {sid} --name NAME`)")
    return 0


def register(sub) -> None:

    p = sub.add_parser("annotations", help="expert annotation sessions: create, list, link/revoke experts, stats, "
                                           "export",
                       description="Expert annotation sessions; `annotations ACTION --help` lists an action's flags.")
    actions = add_actions(p)
    session = {"default": None, "help": "session id (see `annotations list`); required"}
    expert = {"default": None, "help": "the expert's name; required"}

    a = actions.add_parser("create", help="a new session from a fresh probe (default), a stored run (--run), or "
                                          "where judgement is needed (--select RULE --from-runs A B)")
    a.add_argument("--name", default=None, help="session name; required")
    a.add_argument("--organiser", default="")
    a.add_argument("--run", default=None, help="build from this stored run instead of probing")
    rules = "; ".join(f"{r.name}: {r.description}" for r in SELECTIONS.values())
    a.add_argument("--select", default=None, metavar="RULE", help=f"choose the queries by a selection rule ({rules})")
    a.add_argument("--from-runs", nargs="+", default=None, metavar="RUN", help="--select's stored run(s)")
    a.add_argument("--from-session", default=None, metavar="ID", help="--select's session (expert-disagreement)")
    a.add_argument("--param", action="append", default=None, metavar="KEY=VALUE",
                   help="a selection rule's parameter (repeatable), e.g. min_margin=0.2 or min_spread=3")
    a.add_argument("--preview", action="store_true", help="with --select: list the qualifying queries, create nothing")
    a.add_argument("--allow-partial", action="store_true",
                   help="with --run: accept an unfinished run (cancelled, failed, interrupted)")
    a.add_argument("--n", type=int, default=15, help="number of queries (seeded sample, spread over relations)")
    a.add_argument("--k", type=int, default=10, help=f"top-k answers per query (1 to {MAX_K:,})")
    a.add_argument("--raters", type=int, default=0, help="annotators per query (0: every annotator rates all)")
    a.add_argument("--not-blind", action="store_true", help="show gold marks, ranks and scores to annotators")
    a.add_argument("--keep-subject", action="store_true",
                   help="keep each query's own subject among its answers (left out by default when probing)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    add_model_args(a)
    add_dataset_args(a)
    add_probe_args(a)
    a.set_defaults(func=_cmd_create)

    a = actions.add_parser("list", help="every session with its queries, annotators and ratings")
    a.add_argument("--format", default=None, metavar="{table,json}", help="table | json")
    a.set_defaults(func=_cmd_list)

    a = actions.add_parser("link", help="a personal link for one expert, or with --role reviewer one reviewer "
                                        "(shown once)")
    a.add_argument("--session", **session)
    a.add_argument("--name", **expert)
    a.add_argument("--url", default="http://localhost:8501", help="the app's address as experts reach it")
    a.add_argument("--role", default="expert", metavar="{" + ",".join(ROLES) + "}",
                   help="expert: rates the answers (default); reviewer: records verdicts on the disputed answers, "
                        "their ratings shown blind (a review-only app)")
    a.set_defaults(func=_cmd_link)

    a = actions.add_parser("revoke", help="revoke every link of one expert or reviewer")
    a.add_argument("--session", **session)
    a.add_argument("--name", **expert)
    a.set_defaults(func=_cmd_revoke)

    a = actions.add_parser("experts", help="a session's experts and reviewers and whether their link is active")
    a.add_argument("--session", **session)
    a.set_defaults(func=_cmd_experts)

    a = actions.add_parser("stats", help="expert score × gold hit (MedLAMA Table 5), accuracy, agreement")
    a.add_argument("--session", **session)
    a.add_argument("--threshold", type=int, default=5, choices=[4, 5], help="expert score counted as a hit")
    a.add_argument("--format", default=None, metavar="{table,json}", help="table | json")
    a.set_defaults(func=_cmd_stats)

    a = actions.add_parser("review", help="disputed answers with their blind ratings; --item ID --score N "
                                          "--name REVIEWER records a final verdict")
    a.add_argument("--session", **session)
    a.add_argument("--item", default=None, help="the answer to show or settle (an item id from the listing)")
    a.add_argument("--score", type=int, default=None, help="the verdict, 1..5 (with --item and --name)")
    a.add_argument("--name", default=None, help="the reviewer's name (with --score)")
    a.add_argument("--note", default=None, help="why (kept with the verdict)")
    a.add_argument("--min-spread", type=int, default=2, help="disputed: scores at least this far apart")
    a.add_argument("--show-names", action="store_true", help="show the raters' names (the organiser allows it)")
    a.set_defaults(func=_cmd_review)

    a = actions.add_parser("export", help="a session's ratings, items, events or verdicts as a file")
    a.add_argument("--session", **session)
    a.add_argument("--out", default=None, help="output file (.csv, .parquet or .jsonl); required")
    a.add_argument("--table", default="ratings", choices=EXPORT_TABLES, help="which table")
    a.add_argument("--format", default=None, metavar="{" + ",".join(EXPORT_FORMATS) + "}",
                   help="default: from --out's suffix")
    a.set_defaults(func=_cmd_export)
