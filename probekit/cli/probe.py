"""``python -m probekit probe``: rank candidate entities for one query."""

from __future__ import annotations

from .. import models
from ..errors import ProbekitError
from ..types import MAX_K, parse_free_query
from .common import (
    add_dataset_args,
    add_model_args,
    add_probe_args,
    load_dataset_from_args,
    print_json,
    probe_options,
    vocab_of,
)


def _cmd_probe(args) -> int:
    from ..probes import ONE_QUERY_DEFAULTS, get_probe

    probe = get_probe(args.probe)
    typed_without_relation = args.query is not None and not args.query_id and not args.relation
    args.vocab = vocab_of(args, probe, has_relation=not typed_without_relation)
    model = models.load(args.model, device=args.device)
    candidates = None
    if args.query_id or (args.dataset and args.query is None):
        ds = load_dataset_from_args(args)
        if args.query_id:
            q = ds.query(args.query_id)
        else:
            raise ProbekitError("give --query TEXT or --query-id ID")
        candidates = ds.candidates(args.vocab, q.relation)
    else:
        if args.vocab == "relation" and not args.relation:
            raise ProbekitError("--vocab relation needs --relation R (whose tails are the candidates)")
        relation = args.relation[0] if args.relation else "free"
        q = parse_free_query(args.query, subject=args.subject or "", relation=relation,
                             golds=tuple(args.gold or ()))
        ds = load_dataset_from_args(args)
        if args.vocab == "relation":
            candidates = ds.candidates("relation", relation)
        else:
            candidates = ds.candidates(args.vocab)
    options = {**ONE_QUERY_DEFAULTS, **probe_options(args, probe)}  # the Probe page's defaults
    ranking = probe.rank(model, [q], candidates, k=args.k, **options)[0]
    if args.format == "json":
        print_json({"model": model.describe(), "probe": probe.name, "options": options,
                    "n_candidates": len(candidates), **ranking.to_dict()})
    else:
        left_out = "; its own subject left out (--no-exclude-subject keeps it)" if options.get("exclude_subject") \
            else ""
        print(f"{q.text(model.mask_token)}   [{model.id}, {probe.name}, {len(candidates)} candidates{left_out}]")
        for row in ranking.to_dict()["top"]:
            print(f"{row['rank']:>4}  {row['score']:>9.4f}  {'*' if row['gold'] else ' '} {row['name']}")
        for g, r in zip(q.golds, ranking.gold_ranks):
            missing = "not generated" if ranking.generated else "not a candidate"
            print(f"gold: {g!r} rank {r if r is not None else missing}")
    return 0



def register(sub) -> None:
    p = sub.add_parser("probe", help="rank candidate entities for one query (its own subject left out, as on the "
                                     "Probe page; --no-exclude-subject keeps it)")
    add_model_args(p)
    add_dataset_args(p)
    add_probe_args(p)
    p.add_argument("--query", default=None, help="text with [MASK], or a template with [X]/[Y]")
    p.add_argument("--subject", default=None, help="subject for [X]")
    p.add_argument("--gold", action="append", help="gold answer(s) to locate (repeatable)")
    p.add_argument("--query-id", default=None, help="a query of the dataset, e.g. may_treat:0003")
    p.add_argument("--k", type=int, default=10, help=f"answers kept per query, the top k (1 to {MAX_K:,})")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.set_defaults(func=_cmd_probe)
