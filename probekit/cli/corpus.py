"""``python -m probekit corpus index|list|stats|search|template-free``: the face of :mod:`probekit.corpus`.

    corpus index --corpus elicit --dataset medlama          # index once (reused while the corpus is unchanged)
    corpus index --corpus NOTEEVENTS.csv --text-column TEXT --entities names.txt
    corpus list                                              # every index, ok / stale / interrupted
    corpus stats 333db4d1 [--coverage]                       # counts; facts with a context per relation
    corpus search 333db4d1 --subject metformin --object "type 2 diabetes" --unit window --window 1
    corpus search 333db4d1 --relation may_treat --role tail  # sentences mentioning any tail of a relation
    corpus template-free 333db4d1 --role tail --out prompts.jsonl   # LIPID steps, counts per step
    corpus remove 333db4d1                                   # delete an index (and interrupted builds)
"""

from __future__ import annotations

import sys

from probekit.errors import ProbekitError, command
from probekit.vocab.sources import MAX_NAME_LINE_CHARS

from .common import add_actions, print_json, print_listing, progress_bar


def _source(args):
    from probekit.corpus import open_source

    return open_source(args.corpus, kind=args.kind, text_column=args.text_column, id_column=args.id_column)


def _entities(args):
    from probekit.corpus import load_entities

    if args.entities:
        return load_entities(names_file=args.entities)
    return load_entities(dataset=args.dataset, which=args.which, data_dir=args.data_dir)


def _index(args):
    """The index named by ``args.index``, or the one for --corpus and --dataset/--entities."""
    from probekit.corpus import find_index, open_index

    if args.index:
        return open_index(args.index)
    idx = find_index(_source(args), _entities(args))
    if idx is None:
        raise ProbekitError(f"this corpus is not indexed with these names yet: run `{command()} corpus index` "
                            "with the same --corpus and --dataset/--entities (see `corpus list`)")
    return idx


def _cmd_index(args) -> int:
    from probekit.corpus import CorpusChangedError, build_index, find_index

    source, ents = _source(args), _entities(args)
    try:
        existing = None if args.force else find_index(source, ents)
    except CorpusChangedError as e:
        print(f"note: {e}; re-indexing now", file=sys.stderr)
        existing = None
    if existing is not None:
        print(f"already indexed as {existing.fingerprint} (use --force to rebuild)", file=sys.stderr)
        idx = existing
    else:
        with progress_bar(args.quiet) as report:
            idx = build_index(source, ents, progress=report, force=args.force)
    stats = idx.stats()
    if args.format == "json":
        print_json(stats)
    else:
        _print_stats(stats)
    return 0


def _print_stats(stats: dict) -> None:
    print(f"{stats['fingerprint']}  {stats['corpus']} ({stats['kind']}) × {stats['entities']}")
    print(f"  documents {stats['documents']:,}  sentences {stats['sentences']:,}  mentions {stats['mentions']:,}  "
          f"names {stats['entity_names']:,} ({stats['entities_mentioned']:,} mentioned)")
    if stats.get("facts"):
        print(f"  facts {stats['facts']:,}: with a document mentioning S and O_t {stats['facts_with_document']:,}, "
              f"with a sentence {stats['facts_with_sentence']:,}  (same-name facts {stats.get('facts_same_name', 0):,} "
              "not counted)")
    print(f"  built {stats['created']} in {stats['seconds']:.1f} s")


def _cmd_list(args) -> int:
    import pandas as pd

    from probekit.corpus import list_indexes

    def line(r: dict) -> str:
        if "corpus" not in r or pd.isna(r.get("corpus")):
            return f"{r['fingerprint']}  {r['status']}"
        return (f"{r['fingerprint']}  {r['status']:<6} {r['corpus']} × {r['entities']}  "
                f"[{int(r['documents']):,} documents, {int(r['mentions']):,} mentions]")

    print_listing(pd.DataFrame(list_indexes()), args.format, empty="no corpus indexes (run `corpus index`)",
                  line=line)
    return 0


def _cmd_stats(args) -> int:
    from probekit.corpus import coverage

    idx = _index(args)
    stats = idx.stats()
    if args.coverage:
        facts = [tuple(r) for r in idx.sql("SELECT s.name, f.relation, o.name FROM facts f JOIN entities s ON "
                                          "s.entity_id = f.subject_id JOIN entities o ON o.entity_id = f.object_id")]
        if not facts:
            raise ProbekitError("this index has no facts (it was built from a name list, not a dataset)")
        stats["coverage"] = {u: coverage(idx, facts, unit=u) for u in ("document", "sentence")}
    if args.format == "json":
        print_json(stats)
        return 0
    _print_stats(stats)
    for unit, cov in stats.get("coverage", {}).items():
        print(f"\ncoverage by {unit}: {cov['with_context']:,}/{cov['facts']:,} facts ({100 * cov['share']:.2f} %)")
        for rel, row in cov["by_relation"].items():
            print(f"  {rel[:50]:<50} {row['with_context']:>6,}/{row['facts']:,}")
    return 0


def _cmd_search(args) -> int:
    from probekit.corpus import contexts_for, sentences_mentioning

    idx = _index(args)
    if args.subject or args.object:
        if not (args.subject and args.object):
            raise ProbekitError("give both --subject and --object (or --entity / --relation for sentences)")
        found = [c.to_dict() for c in contexts_for(idx, args.subject, args.object, unit=args.unit,
                                                   window=args.window, limit=args.limit or 20)]
    else:
        found = sentences_mentioning(idx, entity=args.entity, relation=args.relation, role=args.role,
                                     limit=args.limit or 20)
    if args.format == "json":
        print_json(found)
        return 0
    if not found:
        print("no contexts found")
    for c in found:
        where = f"{c['file']}:{c['key']}" if "file" in c else f"document {c['doc_id']} sentence {c['sent']}"
        text = " ".join(c["text"].split())
        print(f"[{where}] {text[:args.width]}{' …' if len(text) > args.width else ''}")
    return 0


def _cmd_template_free(args) -> int:
    from probekit.corpus import build_template_free, write_template_free

    idx = _index(args)
    names = None
    if args.names:
        from probekit.corpus import from_file

        names = from_file(args.names).names
    result = build_template_free(idx, entities=names, role=args.role, relation=args.relation or "template_free",
                                 keyword_reading=args.keyword_reading, limit=args.limit)
    if args.out:
        write_template_free(result, args.out)
    if args.format == "json":
        print_json({"steps": result.steps, "keyword_reading": result.reading,
                    "kept_by_keyword_reading": result.kept_by_reading, "unknown_entities": result.unknown_entities,
                    "out": args.out, "prompts": len(result.rows)})
        return 0
    for step, n in result.steps:
        print(f"{step:<60} {n:>9,}")
    print("   step 3 under each keyword reading: "
          + ", ".join(f"{k} {v:,}" for k, v in result.kept_by_reading.items()))
    if result.unknown_entities:
        print(f"{len(result.unknown_entities)} names not in the index: {', '.join(result.unknown_entities[:5])}")
    print(f"wrote {len(result.rows):,} prompts to {args.out}" if args.out else
          "\n".join(f"  {r['object']}: {r['prompt']}" for r in result.rows[:10]))
    return 0


def _cmd_remove(args) -> int:
    from probekit.corpus import remove_index, sweep_incomplete

    print(f"removed {remove_index(args.index)}")
    for name in sweep_incomplete():
        print(f"removed interrupted build {name}")
    return 0


def _finding_args(a, *, named: bool = True) -> None:
    """The corpus and entity-name flags: what ``index`` indexes, and how ``stats``/``search``/``template-free``
    find that index when it is not named by its fingerprint."""
    if named:
        a.add_argument("index", nargs="?", default=None,
                       help="index fingerprint (or prefix), see `corpus list`; or find it by --corpus and "
                            "--dataset/--entities")
    g = a.add_argument_group("corpus" if not named else "corpus (to find the index instead of naming it)")
    g.add_argument("--corpus", default="elicit", help="'elicit' (the shipped corpora), a .txt folder, .jsonl or .csv")
    g.add_argument("--kind", default=None, choices=["lines", "txt", "jsonl", "csv"], help="default: from the path")
    g.add_argument("--text-column", default=None, help="CSV/JSONL text field (default 'text'; MIMIC-III: TEXT)")
    g.add_argument("--id-column", default=None, help="CSV/JSONL id field (default ROW_ID / id when present)")
    g = a.add_argument_group("entity names")
    g.add_argument("--dataset", default="medlama", help="heads and tails of: demo | medlama | biolama | triples")
    g.add_argument("--set", dest="which", default="full", choices=["full", "hard"], help="MedLAMA set")
    g.add_argument("--data-dir", default=None, help="dataset folder or file")
    g.add_argument("--entities", default=None, help="a file of names instead (one a line, or CSV name[,type]; a line "
                   f"of at most {MAX_NAME_LINE_CHARS:,} characters)")


def register(sub) -> None:
    from probekit.corpus.lipid import DEFAULT_READING, KEYWORD_READINGS  # light: no torch
    from probekit.corpus.lookup import UNITS  # light: no torch

    p = sub.add_parser("corpus", help="corpora: index mentions once, find real contexts, build template-free prompts",
                       description=__doc__.split("\n\n")[0] + " `corpus ACTION --help` lists an action's flags.")
    actions = add_actions(p)
    fmt = {"default": "table", "choices": ["table", "json"]}

    a = actions.add_parser("index", help="index a corpus's mentions of a dataset's (or a list's) entity names once")
    _finding_args(a, named=False)
    a.add_argument("--force", action="store_true", help="rebuild even when an index exists")
    a.add_argument("--format", **fmt)
    a.add_argument("--quiet", action="store_true", help="no progress bar")
    a.set_defaults(func=_cmd_index)

    a = actions.add_parser("list", help="every index: ok / stale / interrupted")
    a.add_argument("--format", **fmt)
    a.set_defaults(func=_cmd_list)

    a = actions.add_parser("stats", help="an index's counts; with --coverage, facts with a context per relation")
    _finding_args(a)
    a.add_argument("--coverage", action="store_true", help="facts with a context per relation")
    a.add_argument("--format", **fmt)
    a.set_defaults(func=_cmd_stats)

    a = actions.add_parser("search", help="real contexts of a fact (--subject/--object), or sentences mentioning "
                                          "an entity or a relation's entities")
    _finding_args(a)
    g = a.add_argument_group("search")
    g.add_argument("--subject", default=None, help="S: contexts mentioning S and --object")
    g.add_argument("--object", default=None, help="O_t")
    g.add_argument("--unit", default="document", choices=UNITS, help="context unit (the paper's: document)")
    g.add_argument("--window", type=int, default=1, help="sentences either side of O_t (--unit window)")
    g.add_argument("--entity", default=None, help="sentences mentioning this entity")
    g.add_argument("--relation", default=None, help="sentences mentioning an entity of this relation (or type)")
    g.add_argument("--role", default=None, help="head | tail | type (with --relation)")
    g.add_argument("--limit", type=int, default=None, help="at most this many (default 20)")
    g.add_argument("--width", type=int, default=200, help="characters of context printed (table format)")
    a.add_argument("--format", **fmt)
    a.set_defaults(func=_cmd_search)

    a = actions.add_parser("template-free", help="template-free prompts from the index's sentences (LIPID steps)")
    _finding_args(a)
    g = a.add_argument_group("template-free")
    g.add_argument("--names", default=None, help="only these entities (a names file: one a line, or CSV name[,type]; "
                   f"a line of at most {MAX_NAME_LINE_CHARS:,} characters)")
    g.add_argument("--role", default=None, help="tail = only the dataset's objects")
    g.add_argument("--keyword-reading", default=DEFAULT_READING, choices=sorted(KEYWORD_READINGS),
                   help="LIPID's keyword list as the paper writes it, substrings (default), or as whole words")
    g.add_argument("--relation", default=None, help="the relation label written (default template_free)")
    g.add_argument("--limit", type=int, default=None, help="at most this many prompts (default all)")
    g.add_argument("--out", default=None, help="write the prompts (.jsonl or .csv)")
    a.add_argument("--format", **fmt)
    a.set_defaults(func=_cmd_template_free)

    a = actions.add_parser("remove", help="delete an index (and interrupted builds)")
    a.add_argument("index", help="index fingerprint (or prefix), see `corpus list`")
    a.set_defaults(func=_cmd_remove)
