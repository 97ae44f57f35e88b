"""``python -m probekit perplexity``: perplexity of prompts (Shaier et al. §5.5, Table 5).

Pseudo-perplexity with a masked LM (each token masked in turn, batched), or perplexity with a causal LM
(``--causal``). Score the prompts of a stored run (``--run ID``: stored with it), of a dataset
(``--dataset ...``: printed, not stored) or typed texts (``--text ...``).
"""

from __future__ import annotations

import sys

from .. import models
from ..errors import ProbekitError, positive_int
from .common import add_dataset_args, load_dataset_from_args, print_json, progress_bar


def _scorer(args):
    if args.causal:
        from ..templates.perplexity import load_causal_lm

        return load_causal_lm(args.model, device=args.device)

    model = models.load(args.model, device=args.device)
    if not model.has_mlm:
        raise ProbekitError(f"model {args.model!r} has no MLM head, so it has no pseudo-perplexity: pass a masked LM "
                            "(e.g. --model bert-base-uncased) or a causal LM with --causal")
    return model


def _cmd_perplexity(args) -> int:
    from ..templates import stored
    from ..templates.perplexity import causal_perplexity, pseudo_perplexity

    given = [name for name in ("run", "text") if getattr(args, name)] + (["dataset"] if args.dataset else [])
    if len(given) != 1:
        raise ProbekitError("give exactly one of --run RUN_ID, --dataset NAME or --text TEXT")
    if args.batch_size is not None:
        positive_int("--batch-size", args.batch_size)
    scorer = _scorer(args)
    name, _, method = stored.scorer_info(scorer)
    if args.text:
        if method == "causal":
            res = causal_perplexity(scorer.model, scorer.tokenizer, args.text, batch_size=args.batch_size or 16)
        else:
            res = pseudo_perplexity(scorer.mlm, scorer.tokenizer, args.text, batch_size=args.batch_size or 64)
        for note in res.cut_notes():
            print(f"warning: {note}", file=sys.stderr)
        rows = [{"text": t, "n_tokens": int(n), "perplexity": float(p)}
                for t, n, p in zip(args.text, res.n_tokens, res.perplexity)]
        if args.format == "json":
            print_json({"scorer": name, "method": method, "texts": rows, "cut": res.cut_notes()})
        else:
            for r in rows:
                print(f"{r['perplexity']:>12.2f}  {r['n_tokens']:>4} tokens  {r['text']}")
        return 0
    ds = None if args.run else load_dataset_from_args(args)
    with progress_bar(args.quiet) as report:
        if ds is None:
            scores = stored.score_run(args.run, scorer, fill=args.fill, batch_size=args.batch_size,
                                      progress=report)
        else:
            scores = stored.score_queries(scorer, ds.queries, fill=args.fill, batch_size=args.batch_size,
                                          progress=report)
    where = f"run {args.run} (stored)" if ds is None else f"dataset {ds.name} (not stored)"
    per = scores.groupby("relation", sort=True).agg(prompts=("query_id", "size"), mean=("perplexity", "mean"))
    if args.format == "json":
        print_json({"scorer": name, "method": method, "fill": args.fill, "where": where,
                    "mean_perplexity": float(scores.perplexity.mean()),
                    "per_relation": per.reset_index().to_dict(orient="records"),
                    "prompts": scores.to_dict(orient="records")})
        return 0
    print(f"{method} perplexity by {name}, fill={args.fill}, {where}")
    print(f"{'relation':<48}{'prompts':>8}{'mean ppl':>12}")
    for rel, row in per.iterrows():
        print(f"{rel[:47]:<48}{int(row['prompts']):>8}{row['mean']:>12.2f}")
    print(f"{'all prompts':<48}{len(scores):>8}{scores.perplexity.mean():>12.2f}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("perplexity", help="perplexity of prompts (pseudo for masked LMs, causal LMs)")
    p.add_argument("--model", required=True, help="the scorer: a masked LM (registry id, HF id, folder) or, with "
                   "--causal, a causal LM")
    p.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")
    p.add_argument("--causal", action="store_true", help="--model is a causal LM: ordinary perplexity")
    p.add_argument("--run", default=None, help="score a stored run's prompts and store the scores with it")
    add_dataset_args(p, default=None)
    p.add_argument("--text", action="append", default=None, help="score this text (repeatable)")
    p.add_argument("--fill", default="gold", choices=["gold", "mask"],
                   help="gold: the prompt with its first gold answer filled in (default); mask: as probed")
    p.add_argument("--batch-size", type=int, default=None,
                   help="masked copies (or texts, --causal) per forward pass")
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_perplexity)
