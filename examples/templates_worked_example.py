"""Worked example for docs/templates.md: template prompts vs natural PubMed sentences for the same facts.

1. Find sentences for the facts of a template dataset (demo or MedLAMA) in the shipped PubMed corpora
   (``PROBEKIT_CORPORA_DIR``, one lower-cased sentence a line, punctuation stripped). This is a small,
   simple scan standing in for the corpus layer's LIPID builder: a sentence qualifies for a fact (S, R, O)
   when it holds S and O as whole words, O exactly once and not as part of a longer listed name ("heart"
   in "heart failure"), and none of the paper's filter keywords ("here", "we", "investigate", "study",
   "propose", "outline", "(", "our", "performed", "suggest", "however"); O is masked. It writes the
   template-free file (prompt, object, subject, relation, source).
2. Pair it with the templates (:func:`probekit.templates.parallel.pair_datasets`: same facts, same single
   gold, same candidates), probe both sides with the default model, and print acc@k per relation and
   the change (:func:`~probekit.templates.parallel.parallel_drop`), plus prediction frequency per side.
3. A tiny ranking comparison: a few probing configurations of the default model (pooling × layer), each
   ranked on both sides, Kendall's tau and Spearman's rho.

    .venv/bin/python examples/templates_worked_example.py                      # demo facts
    .venv/bin/python examples/templates_worked_example.py --dataset medlama    # MedLAMA full set
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KEYWORDS = {"here", "we", "investigate", "study", "propose", "outline", "our", "performed", "suggest", "however"}
MAX_NGRAM = 8


def corpus_form(name: str) -> str:
    """A name as it would appear in the corpora: lower-cased, punctuation dropped (not spaced).

    >>> corpus_form("Community-acquired pneumonia (disorder)")
    'communityacquired pneumonia disorder'
    """
    return " ".join(re.sub(r"[^0-9a-z ]+", "", name.lower()).split())


def find_sentences(dataset, corpus_files) -> tuple[list[dict], dict]:
    """One row per (fact, sentence) found; counts of each filter step."""
    facts = defaultdict(list)  # subject form -> [(query, object name, object form)]
    for q in dataset.queries:
        s = corpus_form(q.subject)
        for gold in q.golds:
            o = corpus_form(gold)
            if s and o and s != o and s not in o and o not in s:
                facts[s].append((q, gold, o))
    objects = {o for items in facts.values() for _, _, o in items}
    names = set(facts) | objects
    rows, counts = [], defaultdict(int)
    for path in corpus_files:
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            words = line.split()
            found = {" ".join(words[i:i + n]) for n in range(1, MAX_NGRAM + 1) for i in range(len(words) - n + 1)}
            subjects = [s for s in found & names if s in facts]
            if not subjects:
                continue
            for s in subjects:
                for q, gold, o in facts[s]:
                    if o not in found:
                        continue
                    counts["sentences with S and O"] += 1
                    text = " ".join(words)
                    if len(re.findall(rf"(?<!\S){re.escape(o)}(?!\S)", text)) != 1:
                        counts["dropped: O more than once"] += 1
                        continue
                    if any(o != n and re.search(rf"(?<!\S){re.escape(o)}(?!\S)", n) for n in found & names):
                        counts["dropped: O only inside a longer listed name"] += 1  # "heart" in "heart failure"
                        continue
                    if KEYWORDS & set(words):
                        counts["dropped: filter keyword"] += 1
                        continue
                    prompt = re.sub(rf"(?<!\S){re.escape(o)}(?!\S)", "[MASK]", text)
                    rows.append({"prompt": prompt, "object": gold, "subject": q.subject, "relation": q.relation,
                                 "source": f"{path.name}:{line_no}"})
    counts["kept"] = len(rows)
    return rows, dict(counts)


def markdown(frame) -> str:
    """A pandas frame as a Markdown table (no extra dependency)."""
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def pct(v) -> str:
    return f"{100 * v:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="demo", choices=["demo", "medlama"])
    ap.add_argument("--model", default="default")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--vocab", default="pairs", choices=["pairs", "template"],
                    help="shared candidates: the paired objects (default) or the template dataset's vocabulary")
    ap.add_argument("--out", default=None, help="folder for the sentences file and results (default: cache/)")
    ap.add_argument("--no-configs", action="store_true", help="skip the ranking comparison of configurations")
    args = ap.parse_args()

    import pandas as pd

    from probekit import config, models
    from probekit.bench import runs
    from probekit.datasets import load_dataset
    from probekit.metrics import compare as run_metrics
    from probekit.templates import frequency, rankings
    from probekit.templates.parallel import pair_datasets, parallel_drop

    out = Path(args.out or config.cache_dir() / "templates-example")
    out.mkdir(parents=True, exist_ok=True)
    template = load_dataset(args.dataset)
    files = sorted(config.corpora_dir().glob("pubmed_sents_no_punkt_10k_*"))
    if not files:
        raise SystemExit(f"no PubMed corpora in {config.corpora_dir()} (set PROBEKIT_CORPORA_DIR)")
    t = time.perf_counter()
    rows, counts = find_sentences(template, files)
    print(f"## {template.name}: {len(template)} queries; scanned {len(files)} files in {time.perf_counter() - t:.0f} s")
    print("counts:", json.dumps(counts))
    sentences = out / f"{args.dataset}_pubmed_sentences.jsonl"
    sentences.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    free = load_dataset("freetext", path=sentences, use_cache=False)
    par = pair_datasets(template, free, per_fact=1, vocab=args.vocab)
    print(f"pairs: {json.dumps(par.stats)}; shared candidates: {len(par.free.candidates())}")
    for r in par.pairs.head(5).itertuples():
        print(f"  {r.template.replace('[X]', r.subject)}  |  {r.prompt}  ->  {r.object}")

    model = models.load(args.model)
    result = {"dataset": args.dataset, "counts": counts, "pairs": par.stats, "model": model.id, "vocab": args.vocab,
              "candidates": len(par.free.candidates())}
    frames = {}
    for side, ds in (("template", par.template), ("free", par.free)):
        frames[side] = runs.run_benchmark(model, ds, probe="retrieval", k=args.k, save=False).frame
    ks = tuple(k for k in (1, 5, 10) if k <= args.k)
    drop = parallel_drop(frames["template"], frames["free"], ks=ks)
    print(f"\n### {model.id}, retrieval, k={args.k}: acc@k (%) per relation, template vs sentence")
    print(markdown(pd.concat([drop[["pairs"]], (drop.drop(columns="pairs") * 100).round(1)], axis=1).reset_index()))
    result["per_relation"] = drop.reset_index().to_dict(orient="records")
    print("\n### prediction frequency (top-1)")
    freq = {}
    for side, frame in frames.items():
        f = frequency.prediction_frequency(frame, k=1)
        dist = frequency.distinct_predictions(frame, ks=(1,))[1]
        freq[side] = {"top objects": f.head(5)[["object", "prompts", "share", "gold_share"]].to_dict(orient="records"),
                      "top-5 share": frequency.top_share(frame, k=1, n=5), "distinct": dist,
                      "flags": frequency.flags(frame, label=f"{model.id} ({side})", threshold=0.1)}
        print(f"{side}: top-5 objects take {pct(freq[side]['top-5 share'])} % of top-1 answers; "
              f"{dist['distinct']} distinct top-1 answers over {len(frame)} prompts; most frequent: "
              + ", ".join(f"{r['object']} {pct(r['share'])} % (gold {pct(r['gold_share'])} %)"
                          for r in freq[side]["top objects"][:3]))
        for flag in freq[side]["flags"]:
            print(f"  flag: {flag}")
    result["frequency"] = freq

    if not args.no_configs:
        configs = [("mean", model.num_layers), ("cls", model.num_layers), ("mean", model.num_layers // 2),
                   ("cls", model.num_layers // 2), ("mean", 1)]
        acc = {"template": {}, "free": {}}
        for pooling, layer in configs:
            name = f"{pooling}, layer {layer}"
            for side, ds in (("template", par.template), ("free", par.free)):
                frame = runs.run_benchmark(model, ds, probe="retrieval", options={"pooling": pooling, "layer": layer},
                                           k=args.k, save=False).frame
                acc[side][name] = run_metrics.accuracy(frame, k=1, average="macro")
        table = rankings.model_rankings(acc["template"], acc["free"])
        corr = rankings.rank_correlation(acc["template"], acc["free"])
        print("\n### configurations of one model ranked by macro acc@1 (%), template vs sentence")
        shown = table.copy()
        for c in ("template-based score", "template-free score"):
            shown[c] = (shown[c] * 100).round(1)
        print(markdown(shown))
        print(f"Kendall's tau {corr['kendall_tau']:.3f} (p {corr['kendall_p']:.3f}), Spearman's rho "
              f"{corr['spearman_rho']:.3f} (p {corr['spearman_p']:.3f}), n = {corr['n']}")
        result["configs"] = {"table": table.to_dict(orient="records"), "correlation": corr}
    result_file = out / f"{args.dataset}_{args.vocab}_result.json"
    result_file.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {sentences} and {result_file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
