"""``python -m probekit context ...``: the command-line face of :mod:`probekit.context`."""

from __future__ import annotations

from pathlib import Path

from probekit import models
from probekit.context import (
    CONTEXT_KINDS,
    DATASET_VARIANTS,
    SIDES,
    VARIANTS,
    check_document,
    role_of,
    run_context,
    run_dataset,
    summary_frames,
    unique_names,
)
from probekit.context.sources import INDEX_UNITS
from probekit.errors import ProbekitError
from probekit.types import Query

from ..metrics.accuracy import DEFAULT_COUNTING, counting_label
from ..types import MAX_K, parse_free_query
from .common import (
    add_dataset_args,
    add_model_args,
    add_probe_args,
    load_dataset_from_args,
    print_json,
    print_listing,
    probe_options,
    progress_bar,
)


def _read_pool_file(path: str) -> list[str]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ProbekitError(f"cannot read the pool file {path}: {e}") from None
    names = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    if not names:
        raise ProbekitError(f"the pool file {path} holds no entity names (one a line)")
    return names


def _read_document(path: str) -> str:
    import sys

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProbekitError(f"cannot read the document {path}: {e}") from None
    return check_document(text)


def _add_probe_args(p) -> None:
    add_probe_args(p, vocab=False)
    p.add_argument("--k", type=int, default=10, help=f"top-k kept per input (1 to {MAX_K:,})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--format", default="table", choices=["table", "json"])


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:+g}" if isinstance(v, (int, float)) else str(v)


def _cmd_single(args) -> int:
    from probekit.probes import get_probe

    probe = get_probe(args.probe)
    if bool(args.pool_file) == bool(args.dataset):
        raise ProbekitError("give the entity pool with exactly one of --pool-file FILE or --dataset NAME")
    ds = load_dataset_from_args(args) if args.dataset else None
    if args.query_id:
        if ds is None:
            raise ProbekitError("--query-id needs --dataset")
        query = ds.query(args.query_id)
    else:
        if not args.prompt:
            raise ProbekitError("give --prompt \"... [MASK] ...\" (and --subject), or --dataset with --query-id")
        query = parse_free_query(args.prompt, subject=args.subject or "", relation=(args.relation or ["free"])[0])
    query = Query(query.id, query.subject, query.relation, query.template,
                  golds=tuple(unique_names([*query.golds, *(args.gold or [])])))
    target = args.target or (query.golds[0] if query.golds else "")
    if ds is not None:
        rel = query.relation if query.relation in ds.relations else None
        pool = ds.candidates("relation", rel).names if rel else ds.candidates("tails").names
    else:
        pool = _read_pool_file(args.pool_file)
    model = models.load(args.model, device=args.device)
    result = run_context(model, query, target=target, pool=pool, document=_read_document(args.document),
                         variant=args.variant, negative=args.negative, probe=probe.name, seed=args.seed,
                         permutations=args.permutations, first_side=args.first_side, occurrence=args.occurrence,
                         k=args.k, **probe_options(args, probe))
    if args.format == "json":
        print_json({"model": model.describe(), **result.to_dict()})
        return 0
    print(f"{query.text(model.mask_token)}   [{model.id}, {probe.name}, pool {result.pool_size}, "
          f"variant {result.variant}{', negative target' if result.negative else ''}]")
    print(f"target O_t: {result.target!r}")
    for s in result.segmentation.segments:
        print(f"  S{s.order:<3} {s.side:<6} {role_of(s.entity, result.target, result.golds):<6} {s.entity!r}: "
              f"{' '.join(s.text.split())[:80]!r}")
    cols = ("step", "added", "added_role", "rank_target", "rank_added", "rc_target", "rc_added", "rc_cor", "rc_incor")
    for run in result.runs:
        if len(result.runs) > 1:
            print(f"permutation {run.permutation}")
        print("  ".join(f"{c:>12}" for c in cols))
        for r in run.rows:
            print("  ".join(f"{(_fmt(r[c]) if c.startswith('rc') else str(r[c] if r[c] is not None else '-'))[:12]:>12}"
                            for c in cols))
    print(result.ucm_text())
    for n in result.notices:
        print(f"notice: {n}")
    return 0


def _source_from_args(args):
    """The documents source of ``--contexts`` (None for KB contexts)."""
    from probekit.context import CorpusScan, IndexSource, resolve_corpora, short_name

    if args.contexts == "kb":
        return "kb"
    if args.contexts == "corpus":
        files = resolve_corpora(args.corpus)
        return CorpusScan(files, window=args.window, limit=args.max_contexts,
                          name=", ".join(short_name(f) for f in files))
    if not args.index:
        raise ProbekitError("--contexts index needs --index FINGERPRINT (a stored corpus index)")
    return IndexSource.open(args.index, unit=args.unit, window=args.window, limit=args.max_contexts)


def _print_coverage(cov: dict) -> None:
    print(f"coverage: {cov['with_context']:,} of {cov['triples']:,} triples (S, R, O_t) found a context "
          f"({100 * cov['share']:.1f} %); {cov['contexts']:,} contexts used, {cov['unusable']:,} unusable "
          f"(O_t only inside a longer pool name), {cov['no_incor']:,} without an O_incor (no negative target)"
          + (f", {cov['name_overlap_excluded']:,} facts skipped (object in the subject's name)"
             if cov.get("name_overlap_excluded") else ""))
    for rel, c in cov["by_relation"].items():
        print(f"          {rel:<46}{c['with_context']:>6} / {c['triples']:<6}({100 * c['share']:.1f} %)")


def _cmd_dataset(args) -> int:
    from probekit.context import KB_LABEL
    from probekit.context import store as context_runs
    from probekit.probes import get_probe

    probe = get_probe(args.probe)
    ds = load_dataset_from_args(args)
    source = _source_from_args(args)
    model = models.load(args.model, device=args.device)
    with progress_bar(args.quiet) as report:
        result = run_dataset(model, ds, contexts=source, probe=probe.name, limit=args.limit, seed=args.seed,
                             n_incor=args.n_incor, negative=args.negative, variant=args.variant,
                             permutations=args.permutations, k=args.k, target_mentions=not args.no_target_mentions,
                             exclude_name_overlap=args.exclude_name_overlap, progress=report,
                             **probe_options(args, probe))
    out = {"model": model.describe(), "counting": DEFAULT_COUNTING, **result.to_dict(with_rows=args.rows)}
    if args.save:
        if result.rows:
            out["run_id"] = context_runs.save_run(result, model=model, label=args.label)
        else:
            out["run_id"] = None
    if args.format == "json":
        print_json(out)
        return 0
    what = KB_LABEL if source == "kb" else f"real contexts from {source.name}"
    print(f"{ds.name}: {result.settings['n_queries']} queries, {model.id}, {probe.name}, {result.settings['variant']}"
          f" · {what} · {result.seconds:.1f} s")
    if source != "kb":
        _print_coverage(result.coverage)
    if not result.rows:
        print("no triple found a usable context: nothing to rank")
    for mode, summ in result.summary.items():
        print(f"[{mode}] {'relation':<46}{'U':>7}{'C':>7}{'M':>7}{'n':>7}")
        lines = [*summ["ucm_k"].items(), ("UCM_m (micro)", summ["ucm_m"]), ("UCM_m (macro)", summ["ucm_m_macro"])]
        for rel, u in lines:
            if u["n"]:
                print(f"         {rel:<46}{u['U']:>7.3f}{u['C']:>7.3f}{u['M']:>7.3f}{u['n']:>7}")
            else:
                print(f"         {rel:<46}  no correct object (O_cor) was added: UCM undefined")
        none, full = summ["acc"]["none"]["macro"], summ["acc"]["full"]["macro"]
        print(f"         acc (macro, %) without -> with context, {counting_label(DEFAULT_COUNTING)}: "
              + ", ".join(f"{k} {100 * none[k]:.1f} -> {100 * full[k]:.1f}" for k in none))
        if summ["name_overlap_triples"]:
            w = summ["without_name_overlap"]
            u = w["ucm_m"]
            line = (f"         without the {summ['name_overlap_triples']} facts whose object is in the subject's name "
                    f"({w['n_triples']} left): UCM_m (micro) " + (f"{u['U']:.3f} / {u['C']:.3f} / {u['M']:.3f} "
                                                                  f"(n {u['n']})" if u["n"] else "undefined"))
            if w["acc"]:
                none, full = w["acc"]["none"]["macro"], w["acc"]["full"]["macro"]
                line += "; acc (macro, %) " + ", ".join(f"{k} {100 * none[k]:.1f} -> {100 * full[k]:.1f}"
                                                        for k in none)
            print(line)
    if out.get("run_id"):
        print(f"saved as {out['run_id']}")
    elif args.save:
        print("nothing stored: the run has no steps")
    return 0


def _cmd_runs(args) -> int:
    from probekit.context import store as context_runs

    if args.export:
        if not args.run_id:
            raise ProbekitError("--export needs a run id")
        print(context_runs.export_run(args.run_id, args.export))
        return 0
    if args.run_id:
        meta, summary = context_runs.get_run(args.run_id), context_runs.load_summary(args.run_id)
        if args.format == "json":
            print_json({**meta, **summary})
            return 0
        ucm, acc = summary_frames(summary)
        print(f"{meta['run_id']}  {meta['label']}  ({meta['probe']}, {meta['dataset']}, {meta['variant']}, "
              f"{meta['n_queries']} triples, {meta['seconds'] or 0:.0f} s)")
        print("\nUCM (share of O_cor steps: Understand / Confuse / Misunderstand)")
        print(ucm.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(f"\nacc@k and MRR (macro) with the prompt alone (none) and with the full context; "
              f"{counting_label(DEFAULT_COUNTING)}")
        print(acc.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return 0
    print_listing(context_runs.list_runs(), args.format, empty="no stored context runs (run `context dataset --save`)")
    return 0


def register(sub) -> None:

    p = sub.add_parser("context", help="context variance: rank-change curves (single) and UCM (dataset)")
    csub = p.add_subparsers(dest="context_command", required=True)

    s = csub.add_parser("single", help="one triple (S, R, O_t) with a document: segments, ranks, RC, UCM")
    add_model_args(s)
    s.add_argument("--dataset", default=None, help="pool = tails of the query's relation in this dataset")
    s.add_argument("--data-dir", default=None)
    s.add_argument("--set", dest="which", default="full", choices=["full", "hard"])
    s.add_argument("--relation", action="append", default=None, help="relation of a typed prompt")
    s.add_argument("--pool-file", default=None, help="entity pool, one name a line")
    s.add_argument("--query-id", default=None, help="take subject, prompt and golds from this dataset query")
    s.add_argument("--subject", default=None)
    s.add_argument("--prompt", default=None, help="text with [MASK] (or a template with [X]/[Y])")
    s.add_argument("--target", default=None, help="O_t (default: the query's first gold)")
    s.add_argument("--gold", action="append", default=None, help="another true object (an O_cor); repeatable")
    s.add_argument("--document", required=True, help="text file holding S and O_t ('-' = stdin)")
    s.add_argument("--variant", default="real", choices=VARIANTS)
    s.add_argument("--negative", action="store_true", help="re-centre on the first O_incor (negative target)")
    s.add_argument("--permutations", type=int, default=3, help="orders tried by knowledge-random")
    s.add_argument("--first-side", default="left", choices=SIDES, help="side of S2")
    s.add_argument("--occurrence", type=int, default=0, help="which occurrence of O_t anchors S1 (0 = first)")
    _add_probe_args(s)
    s.set_defaults(func=_cmd_single)

    d = csub.add_parser("dataset", help="every triple of a dataset with real contexts from a corpus (the paper's "
                        "experiment) or KB contexts (a fallback): UCM_k, UCM_m, acc@k and coverage")
    add_model_args(d)
    add_dataset_args(d, default="medlama")
    d.add_argument("--contexts", default="kb", choices=CONTEXT_KINDS,
                   help="corpus: real contexts found by scanning corpus files (one sentence a line); index: the "
                        "corpus mention index; kb: knowledge-only contexts built from the KB (a fallback)")
    d.add_argument("--corpus", action="append", default=None,
                   help="corpus file short name (pubmed_0 … pubmed_9, wiki, pubmed = all ten) or path; repeatable; "
                        "default: every file under PROBEKIT_CORPORA_DIR")
    d.add_argument("--window", type=int, default=0, help="lines either side of an O_t line taken as the document")
    d.add_argument("--max-contexts", type=int, default=5, help="contexts used per triple (S, R, O_t) at most")
    d.add_argument("--index", default=None, help="corpus index fingerprint (with --contexts index)")
    d.add_argument("--unit", default="document", choices=INDEX_UNITS, help="context unit of the corpus index")
    d.add_argument("--limit", type=int, default=None, help="seeded sample of at most N queries per relation")
    d.add_argument("--n-incor", type=int, default=None, help="KB contexts: O_incor per context (default: as many "
                                                             "as O_cor)")
    d.add_argument("--negative", action="store_true", help="also run negative-target contexts")
    d.add_argument("--variant", default=None, choices=DATASET_VARIANTS,
                   help="default: real for corpus contexts, knowledge-only for KB contexts")
    d.add_argument("--permutations", type=int, default=3, help="orders tried by knowledge-random")
    d.add_argument("--no-target-mentions", action="store_true",
                   help="do not count a repeated mention of O_t as an O_cor step (the paper: \"O_t belongs to O_cor\")")
    d.add_argument("--exclude-name-overlap", action="store_true",
                   help="skip facts whose object is in the subject's name (MedLAMA's hardness rule); by default "
                        "they run and every figure is also shown without them")
    d.add_argument("--save", action="store_true", help="store the run in the database")
    d.add_argument("--label", default=None, help="name of the stored run (default: the model's label)")
    d.add_argument("--rows", action="store_true", help="include every step row in the JSON")
    d.add_argument("--quiet", action="store_true", help="no progress on stderr")
    _add_probe_args(d)
    d.set_defaults(func=_cmd_dataset)

    r = csub.add_parser("runs", help="list stored dataset-mode runs, show one, or export one (CSV/Parquet)")
    r.add_argument("run_id", nargs="?", default=None)
    r.add_argument("--export", default=None, help="file.csv or file.parquet")
    r.add_argument("--format", default="table", choices=["table", "json"])
    r.set_defaults(func=_cmd_runs)
