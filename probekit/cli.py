"""``python -m probekit ...``: every core action from the shell.

Subcommands live with their feature module: a module listed in :data:`COMMAND_MODULES` exposes
``add_cli(subparsers)``, which adds its parsers and sets ``func(args) -> int`` on each. User errors
(:class:`ProbekitError`) print one clear line to stderr and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import warnings

from . import config
from .errors import ProbekitError, UnknownNameError
from .types import MASK, OBJECT, SUBJECT, Query

COMMAND_MODULES = ["probekit.cli"]
"""Feature modules with an ``add_cli(subparsers)``; each issue adds its module here."""
COMMAND_MODULES.append("probekit.context")  # context variance: single triple and dataset UCM
COMMAND_MODULES += ["probekit.runs", "probekit.layers"]  # stored benchmark runs; layer-wise probing
COMMAND_MODULES.append("probekit.annotations")  # expert annotation sessions: create, list, stats, export
COMMAND_MODULES.append("probekit.rewire")  # contrastive rewiring and checkpoint sweeps


# ---------------------------------------------------------------- shared helpers for subcommands
def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=config.DEFAULT_MODEL,
                   help="registry id, Hugging Face id, local folder, or 'default' (embedded MiniLM)")
    p.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")


def add_dataset_args(p: argparse.ArgumentParser, *, default: str = "demo") -> None:
    p.add_argument("--dataset", default=default, help="demo | medlama | biolama | triples")
    p.add_argument("--data-dir", default=None, help="dataset folder or file (default from PROBEKIT_*_DIR)")
    p.add_argument("--set", dest="which", default="full", choices=["full", "hard"], help="MedLAMA set")
    p.add_argument("--relation", action="append", default=None, help="only these relations (repeatable)")


def add_probe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--probe", default="retrieval", help="retrieval | mask_average")
    p.add_argument("--pooling", default=None, choices=["cls", "mean"])
    p.add_argument("--similarity", default="cosine", choices=["cosine", "l2", "dot"])
    p.add_argument("--layer", type=int, default=None, help="hidden_states[L] (default: last layer)")
    p.add_argument("--vocab", default="heads+tails", choices=["heads+tails", "tails", "relation"])
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--fast", action="store_true", help="retrieval: int8 weights on CPU (about 3x faster encoding, "
                   "scores differ slightly)")


def probe_options(args, probe) -> dict:
    """The subset of parsed args that ``probe`` accepts, dropping unset ones."""
    names = {o.name for o in probe.options}
    opts = {k: getattr(args, k, None) for k in ("pooling", "similarity", "layer", "batch_size")}
    if getattr(args, "fast", False):
        opts["fast"] = True
    return {k: v for k, v in opts.items() if k in names and v is not None}


def load_dataset_from_args(args):
    from .datasets import Dataset, load_dataset

    kw = {"which": args.which} if args.dataset in ("demo", "medlama") else {}
    if args.relation and args.dataset in ("demo", "medlama"):
        kw["relations"] = args.relation
    ds = load_dataset(args.dataset, path=args.data_dir, **kw)
    if args.relation and "relations" not in kw:  # loaders without their own relation filter
        unknown = [r for r in args.relation if r not in ds.relations]
        if unknown:
            raise UnknownNameError("relation", unknown[0], ds.relations)
        ds = Dataset(ds.name, [q for q in ds.queries if q.relation in args.relation], ds.templates,
                     version=ds.version, source=ds.source)
    return ds


def parse_free_query(text: str, *, subject: str = "", relation: str = "free", golds=()) -> Query:
    """A typed query: text with ``[MASK]``, or a template with ``[Y]`` (and ``[X]`` filled by ``subject``).

    >>> parse_free_query("Metformin might treat [MASK].").template
    'Metformin might treat [Y].'
    """
    text = " ".join(str(text or "").split())
    if not text:
        raise ProbekitError("the query is empty: type e.g. 'Metformin might treat [MASK].'")
    if len(text) > 1000:
        raise ProbekitError(f"the query is too long ({len(text)} characters; at most 1000)")
    tpl = text.replace(MASK, OBJECT).replace("<mask>", OBJECT)
    if tpl.count(OBJECT) != 1:
        raise ProbekitError("the query needs exactly one [MASK] (or [Y]) where the answer goes, "
                            f"e.g. 'Metformin might treat [MASK].'; got {text!r}")
    if SUBJECT in tpl and not subject.strip():
        raise ProbekitError("the template has [X] but no subject was given")
    return Query(id="free", subject=subject.strip(), relation=relation, template=tpl, golds=tuple(golds))


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_listing(frame, fmt: str, *, empty: str, line=None) -> None:
    """A stored-items listing (``--list`` / ``runs``): JSON records, or one line per row (``line(record)``,
    default: the frame as a table), or ``empty`` when there is nothing."""
    if fmt == "json":
        print_json(frame.to_dict(orient="records"))
    elif frame.empty:
        print(empty)
    elif line is None:
        print(frame.to_string(index=False))
    else:
        for record in frame.to_dict(orient="records"):
            print(line(record))


def _progress_printer(quiet: bool):
    if quiet:
        return None
    last = {}

    def report(done, total, stage):
        pct = int(100 * done / max(total, 1))
        if last.get(stage) != pct and (pct % 10 == 0 or done == total):
            last[stage] = pct
            print(f"  {stage}: {done}/{total}", file=sys.stderr)

    return report


# ---------------------------------------------------------------- probe and bench
def _cmd_probe(args) -> int:
    from . import models
    from .probes import get_probe

    probe = get_probe(args.probe)
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
    ranking = probe.rank(model, [q], candidates, k=args.k, **probe_options(args, probe))[0]
    if args.format == "json":
        print_json({"model": model.describe(), "probe": probe.name, "n_candidates": len(candidates),
                    **ranking.to_dict()})
    else:
        print(f"{q.text(model.mask_token)}   [{model.id}, {probe.name}, {len(candidates)} candidates]")
        for row in ranking.to_dict()["top"]:
            print(f"{row['rank']:>4}  {row['score']:>9.4f}  {'*' if row['gold'] else ' '} {row['name']}")
        for g, r in zip(q.golds, ranking.gold_ranks):
            print(f"gold: {g!r} rank {r if r is not None else 'not a candidate'}")
    return 0


def _cmd_bench(args) -> int:
    from . import metrics, models
    from .probes import get_probe

    probe = get_probe(args.probe)
    ds = load_dataset_from_args(args)
    model = models.load(args.model, device=args.device)
    opts = probe_options(args, probe)
    report = _progress_printer(args.quiet)
    rankings = []
    if args.vocab == "relation":
        for rel in ds.relations:
            rankings += probe.rank(model, ds.queries_for(rel), ds.candidates("relation", rel), k=args.k,
                                   progress=report, **opts)
    else:
        rankings = probe.rank(model, ds.queries, ds.candidates(args.vocab), k=args.k, progress=report, **opts)
    ks = tuple(k for k in (1, 5, 10) if k <= args.k)
    summary = metrics.summary(rankings, ks=ks)
    out = {"model": model.describe(), "dataset": ds.summary(), "probe": probe.name, "options": opts,
           "vocab": args.vocab, **summary}
    if getattr(args, "save", False):
        if importlib.util.find_spec("probekit.runs") is None:
            raise ProbekitError("--save needs the benchmark-runs feature (probekit.runs), not installed here")
        from . import runs  # added by the benchmark-runs feature

        out["run_id"] = runs.save_run(rankings, model=model, dataset=ds, probe=probe.name, options=opts,
                                      vocab=args.vocab, k=args.k)
    if args.format == "json":
        print_json(out)
    else:
        print(f"{ds.name} ({len(ds)} queries), {model.id}, {probe.name} {opts}")
        print(f"{'relation':<50}" + "".join(f"{'acc@' + str(k):>9}" for k in ks))
        for rel, row in summary["relations"].items():
            print(f"{rel:<50}" + "".join(f"{100 * row[f'acc@{k}']:>9.2f}" for k in ks))
        for avg in ("macro", "micro"):
            print(f"{avg:<50}" + "".join(f"{100 * summary[avg][f'acc@{k}']:>9.2f}" for k in ks))
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("probe", help="rank candidate entities for one query")
    add_model_args(p)
    add_dataset_args(p)
    add_probe_args(p)
    p.add_argument("--query", default=None, help="text with [MASK], or a template with [X]/[Y]")
    p.add_argument("--subject", default=None, help="subject for [X]")
    p.add_argument("--gold", action="append", help="gold answer(s) to locate (repeatable)")
    p.add_argument("--query-id", default=None, help="a query of the dataset, e.g. may_treat:0003")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.set_defaults(func=_cmd_probe)

    p = sub.add_parser("bench", help="probe a whole dataset and print per-relation, macro and micro acc@k")
    add_model_args(p)
    add_dataset_args(p, default="medlama")
    add_probe_args(p)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--format", default="table", choices=["table", "json"])
    p.add_argument("--save", action="store_true", help="store the run in the database")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_bench)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m probekit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_cli(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    try:
        return int(args.func(args) or 0)
    except ProbekitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("error: out of memory; try a smaller --batch-size or fewer relations", file=sys.stderr)
        return 2
    except OSError as e:  # unreadable files, full disks: the user's to fix
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: one line for the user, the traceback on request
        if os.environ.get("PROBEKIT_DEBUG"):
            raise
        print(f"error: unexpected {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''} "
              "(a bug in probekit; run with PROBEKIT_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1
