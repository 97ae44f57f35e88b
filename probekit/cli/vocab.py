"""``python -m probekit vocab build|list|info``: the face of :mod:`probekit.vocab`.

    vocab build snomed-diso --source umls --file MRCONSO.RRF --mrsty MRSTY.RRF --sab SNOMEDCT_US --tui T047,T191
    vocab build site --source names --file terms.csv --id-column code --index ivf-flat --dtype float16
    vocab build snomed-diso ... --backend ray --workers 2       # shards as Ray tasks, one model per worker
    vocab list                                                    # every vocabulary: ok / stale, size, recall
    vocab info snomed-diso                                        # source, filters, each build's measurements

A killed build resumes where it stopped (finished shards are kept). Probe with it: ``probekit bench --vocab NAME``.
"""

from __future__ import annotations

import sys

from probekit import models
from probekit.errors import ProbekitError
from probekit.vocab.sources import MAX_NAME_LINE_CHARS, open_source

from .common import add_actions, add_model_args, print_json, print_listing, progress_bar

INDEX_KINDS = ("exact", "ivf-flat", "ivf-pq", "hnsw", "auto")


def _params(pairs) -> dict:
    out: dict = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ProbekitError(f"--index-param takes KEY=VALUE (e.g. nprobe=32), got {pair!r}")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def _cmd_build(args) -> int:
    from probekit.vocab.build import build

    if args.source == "umls":
        opts = {"lat": args.lat, "sab": args.sab, "tty": args.tty, "suppress": args.suppress, "tui": args.tui,
                "groups": args.groups, "semgroups_file": args.semgroups_file, "mrsty": args.mrsty,
                "names": "all" if args.all_names else "preferred"}
        umls_only = []
    else:
        opts = {"name_column": args.name_column, "id_column": args.id_column}
        umls_only = [f for f, v in (("--mrsty", args.mrsty), ("--sab", args.sab), ("--tty", args.tty),
                                    ("--tui", args.tui), ("--groups", args.groups), ("--all-names", args.all_names))
                     if v]
    if umls_only:
        raise ProbekitError(f"{umls_only[0]} is a UMLS filter: use it with --source umls")
    source = open_source(args.source, args.file, **opts)
    model = None
    if args.backend == "local":
        model = models.load(args.model, device=args.device)
    with progress_bar(args.quiet) as report:
        out = build(args.name, source, model_id=args.model, model=model, layer=args.layer, pooling=args.pooling,
                    dtype=args.dtype, shard_size=args.shard_size, index=args.index,
                    index_params=_params(args.index_param), similarity=args.similarity, batch_size=args.batch_size,
                    fast=args.fast, backend=args.backend, workers=args.workers,
                    threads_per_worker=args.threads_per_worker, progress=report,
                    notice=lambda line: print(line, file=sys.stderr))  # with --quiet too
    if args.format == "json":
        print_json(out)
    else:
        _print_build(out)
    return 0


def _print_build(b: dict) -> None:
    on = f" on {b['recall_queries']}" if b.get("recall_queries") else ""
    recall = f", recall@10 {b['recall_at_10']:.4f} vs exact{on}" if b.get("recall_at_10") is not None else ""
    print(f"{b.get('name', '')}  {b['names']:,} names in {b['shards']} shards, {b['dim']}-d {b['dtype']} "
          f"({b['vector_bytes'] / 2**20:,.1f} MiB) · {b['model']} on {b['backend']} ({b['workers']} worker(s))")
    print(f"  read {b['read_s']:.1f} s · encode {b['encode_s']:.1f} s ({b['names_per_s'] or 0:,.0f} names/s) · "
          f"index {b['index']} {b['index_s']:.1f} s{recall} · peak RSS {b['peak_rss_bytes'] / 2**20:,.0f} MiB")


def _cmd_list(args) -> int:
    import pandas as pd

    from probekit.vocab.store import listing

    def line(r: dict) -> str:
        recall = f" recall@10 {r['recall_at_10']:.4f}" if r.get("recall_at_10") is not None else ""
        cuis = ", CUIs" if r["cuis"] else ""
        return (f"{r['name']:<20} {r['status']:<7} {r['names']:>10,} names ({r['source']}{cuis})"
                f"  {r['vector_mib']:,.1f} MiB  {r['model']}  {r['index']}{recall}")

    print_listing(pd.DataFrame(listing()), args.format, empty="no vocabularies (build one with `vocab build`)",
                  line=line)
    return 0


def _cmd_info(args) -> int:
    from probekit.vocab.store import record, status

    rec = record(args.name)
    rec["status"] = status(rec)
    if args.format == "json":
        print_json(rec)
        return 0
    src = rec["source"]
    opts = ", ".join(f"{k}={v}" for k, v in src["options"].items())
    print(f"{rec['name']}  {rec['status']}  {rec['names']:,} names{' with CUIs' if rec['has_cuis'] else ''}, "
          f"shards of {rec['shard_size']:,}")
    print(f"  source {src['kind']}: {', '.join(src['paths'])}  ({opts})  fingerprint {rec['fingerprint']}")
    for key, b in rec.get("builds", {}).items():
        print(f"  build {key}{' (default)' if key == rec.get('default') else ''}  at {b['built_at']}")
        _print_build({**b, "name": ""})
    return 0


def register(sub) -> None:
    from probekit.vocab.shards import DTYPES, SHARD_SIZE

    p = sub.add_parser("vocab", help="vocabularies at scale: build (UMLS or a name list), list, info",
                       description=__doc__.split("\n\n")[0] + " `vocab ACTION --help` lists an action's flags.")
    actions = add_actions(p)
    fmt = {"default": "table", "choices": ["table", "json"]}

    a = actions.add_parser("build", help="read, encode (resumable shards) and index a vocabulary")
    a.add_argument("name", help="the vocabulary's name (letters, digits, _ . -)")
    a.add_argument("--source", required=True, choices=["umls", "names"], help="umls (MRCONSO.RRF) or names")
    a.add_argument("--file", required=True, help="MRCONSO.RRF, or a names file (.txt one a line, .csv with header; "
                   f"a line of at most {MAX_NAME_LINE_CHARS:,} characters)")
    g = a.add_argument_group("UMLS filters (--source umls)")
    g.add_argument("--lat", default=None, help="languages kept, comma-separated (default ENG)")
    g.add_argument("--sab", default=None, help="source vocabularies kept (e.g. SNOMEDCT_US,MSH; default all)")
    g.add_argument("--tty", default=None, help="term types kept (e.g. PT,SY; default all)")
    g.add_argument("--suppress", default=None, help="SUPPRESS values kept (default N: no suppressible/obsolete)")
    g.add_argument("--mrsty", default=None, help="MRSTY.RRF, for --tui / --groups and the semantic types")
    g.add_argument("--tui", default=None, help="semantic types kept (e.g. T047,T191)")
    g.add_argument("--groups", default=None, help="semantic groups kept (e.g. DISO), with --semgroups-file")
    g.add_argument("--semgroups-file", default=None, help="NLM's SemGroups.txt (GROUP|Group name|TUI|Type name)")
    g.add_argument("--all-names", action="store_true", help="every distinct string of a concept, not one per CUI")
    g = a.add_argument_group("name lists (--source names)")
    g.add_argument("--name-column", default=None, help="CSV name column (default name)")
    g.add_argument("--id-column", default=None, help="CSV concept-id column (default id when present)")
    g = a.add_argument_group("encoding")
    add_model_args(g)  # an argument group takes add_argument like a parser
    g.add_argument("--layer", type=int, default=None, help="hidden_states[L] (default: last)")
    g.add_argument("--pooling", default=None, choices=["cls", "mean"], help="default: the model's")
    g.add_argument("--dtype", default="float32", choices=DTYPES, help="stored vectors (float16 halves the disk)")
    g.add_argument("--shard-size", type=int, default=SHARD_SIZE, help="names per shard (memory bound of a step)")
    g.add_argument("--batch-size", type=int, default=128)
    g.add_argument("--fast", action="store_true", help="int8 weights on CPU")
    g.add_argument("--backend", default="local", choices=["local", "ray"], help="ray: shards as tasks on workers")
    g.add_argument("--workers", type=int, default=2, help="Ray workers (one model each)")
    g.add_argument("--threads-per-worker", type=int, default=1, help="torch threads per Ray worker")
    g = a.add_argument_group("index")
    g.add_argument("--index", default="exact", choices=INDEX_KINDS, help="exact, or approximate (recall measured)")
    g.add_argument("--index-param", action="append", default=None, metavar="KEY=VALUE",
                   help="index parameter (repeatable), e.g. nlist=1024, nprobe=32, m=32")
    g.add_argument("--similarity", default="cosine", choices=["cosine", "l2", "dot"])
    a.add_argument("--format", **fmt)
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=_cmd_build)

    a = actions.add_parser("list", help="every vocabulary: status (ok / stale), names, size, recall")
    a.add_argument("--format", **fmt)
    a.set_defaults(func=_cmd_list)

    a = actions.add_parser("info", help="a vocabulary's source, filters and each build's measurements")
    a.add_argument("name")
    a.add_argument("--format", **fmt)
    a.set_defaults(func=_cmd_info)
