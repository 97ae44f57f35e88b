"""Corpus indexing speed and memory, and context lookup latency.

1. Index the 11 shipped elicit corpora (110k sentences) against MedLAMA's heads+tails names (22,923) and, in the
   same process, a regex-alternation baseline over the same names (one compiled ``(?<!\\w)(?:n1|n2|...)(?!\\w)``,
   longest names first, case-insensitive): sentences/s of each and the ratio (target >= 10x). The baseline is
   timed on a sample (it is slow); its mentions are compared with the index's on that sample.
2. A synthetic corpus (default 1 GB of JSONL notes made of shipped sentences, generated in a temp dir and deleted
   after) streamed through the indexer in a child process: peak RSS (target < 2 GB), MB/s.
3. Median time of ``contexts_for`` for one (S, O_t) pair on the indexed shipped corpora (target <= 20 ms).

    flock /tmp/probekit-timing.lock .venv/bin/python benchmarks/corpus.py            # all three, 1 GB
    flock /tmp/probekit-timing.lock .venv/bin/python benchmarks/corpus.py --size-mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probekit import atomic, config  # noqa: E402
from probekit.corpus import (  # noqa: E402
    build_index,
    contexts_for,
    from_names,
    open_source,
    read_documents,
)
from probekit.corpus.match import name_key  # noqa: E402
from probekit.datasets import load_dataset  # noqa: E402


def peak_rss_mb(who=resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def regex_baseline(names: list[str]) -> re.Pattern:
    keys = sorted({name_key(n) for n in names}, key=len, reverse=True)
    alternation = "|".join(r"\s+".join(map(re.escape, k.split())) for k in keys)
    return re.compile(r"(?<!\w)(?:" + alternation + r")(?!\w)", re.IGNORECASE)


def shipped(names: list[str], baseline_seconds: float) -> tuple[dict, object]:
    source = open_source("elicit")
    ents = from_names(names, label="medlama heads+tails")
    t0 = time.perf_counter()
    idx = build_index(source, ents, force=True)
    ours_s = time.perf_counter() - t0
    sentences = idx.counts["sentences"]
    # baseline: same names, one regex, sentence by sentence until the time budget is spent
    t0 = time.perf_counter()
    pattern = regex_baseline(names)
    compile_s = time.perf_counter() - t0
    docs = list(read_documents(source))
    rng = random.Random(0)
    sample = rng.sample(range(len(docs)), len(docs))
    base_mentions, done = {}, 0
    t0 = time.perf_counter()
    for i in sample:
        base_mentions[i] = [(m.start(), m.end()) for m in pattern.finditer(docs[i].text)]
        done += 1
        if time.perf_counter() - t0 > baseline_seconds:
            break
    base_s = time.perf_counter() - t0
    ours = {}
    ids = ",".join(str(i) for i in base_mentions)
    for d, a, b in idx.sql(f"SELECT doc_id, start, \"end\" FROM mentions WHERE doc_id IN ({ids}) "
                           "ORDER BY doc_id, start"):
        ours.setdefault(d, []).append((a, b))
    agree = sum(base_mentions[i] == ours.get(i, []) for i in base_mentions)
    rate_ours, rate_base = sentences / ours_s, done / base_s
    return {"sentences": sentences, "names": len(names), "name_keys": len(ents), "mentions": idx.counts["mentions"],
            "index_seconds": round(ours_s, 2), "index_sentences_per_s": round(rate_ours),
            "index_mb_per_s": round(source.total_bytes() / 1e6 / ours_s, 2),
            "baseline_compile_seconds": round(compile_s, 2), "baseline_sentences_timed": done,
            "baseline_seconds": round(base_s, 2), "baseline_sentences_per_s": round(rate_base, 1),
            "ratio": round(rate_ours / rate_base, 1),
            "baseline_sample_same_mentions": f"{agree}/{len(base_mentions)}",
            "facts_with_document": idx.counts.get("facts_with_document")}, idx


def lookups(idx, ds, repeats: int) -> dict:
    pairs = [(q.subject, g) for q in ds.queries for g in q.golds
             if idx.entity_id(q.subject) is not None and idx.entity_id(g) is not None
             and idx.entity_id(q.subject) != idx.entity_id(g)]
    with_ctx = [p for p in pairs if idx.sql(
        "SELECT 1 FROM m a JOIN m b USING (doc_id) WHERE a.entity_id = ? AND b.entity_id = ? LIMIT 1",
        [idx.entity_id(p[0]), idx.entity_id(p[1])])]
    rng = random.Random(0)
    timed = with_ctx + rng.sample(pairs, min(len(pairs), 100))
    times, found = [], 0
    for _ in range(repeats):
        for s, o in timed:
            t0 = time.perf_counter()
            found += len(contexts_for(idx, s, o, unit="document"))
            times.append(time.perf_counter() - t0)
    win = []
    for s, o in with_ctx:
        t0 = time.perf_counter()
        contexts_for(idx, s, o, unit="window", window=2)
        win.append(time.perf_counter() - t0)
    return {"pairs_with_context": len(with_ctx), "pairs_timed": len(timed), "repeats": repeats,
            "median_ms": round(statistics.median(times) * 1000, 2),
            "p90_ms": round(sorted(times)[int(0.9 * len(times))] * 1000, 2),
            "window_median_ms": round(statistics.median(win) * 1000, 2) if win else None}


def make_synthetic(folder: Path, size_mb: int, seed: int = 0) -> Path:
    """JSONL notes of 2-4 paragraphs of 3-8 shipped sentences each (capitalised, full stops): ~size_mb MB."""
    sents = []
    for f in sorted(config.corpora_dir().iterdir()):
        sents += [" ".join(line.split()) for line in f.read_text().splitlines() if line.strip()]
    rng = random.Random(seed)
    path = folder / "synthetic.jsonl"
    target, written, n = size_mb * 1_000_000, 0, 0
    with open(path, "w") as fh:
        while written < target:
            paras = ["  ".join(rng.choice(sents).capitalize() + "." for _ in range(rng.randint(3, 8)))
                     for _ in range(rng.randint(2, 4))]
            line = json.dumps({"id": f"note{n}", "text": "\n\n".join(paras)}) + "\n"
            fh.write(line)
            written += len(line)
            n += 1
    return path


def child_synthetic(path: str, names_file: str) -> None:
    names = Path(names_file).read_text().splitlines()
    ents = from_names(names)
    t0 = time.perf_counter()
    idx = build_index(open_source(path), ents, batch_chars=2_000_000)
    print(json.dumps({"seconds": time.perf_counter() - t0, **idx.counts, "peak_rss_mb": peak_rss_mb()}))


def synthetic(names: list[str], size_mb: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="pk-corpus-bench-"))
    try:
        t0 = time.perf_counter()
        path = make_synthetic(tmp, size_mb)
        gen_s = time.perf_counter() - t0
        names_file = tmp / "names.txt"
        names_file.write_text("\n".join(names))
        env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp / "cache")}
        out = subprocess.run([sys.executable, __file__, "--child", str(path), str(names_file)], env=env,
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        size = path.stat().st_size
        index_mb = sum(f.stat().st_size for f in (tmp / "cache").rglob("*") if f.is_file()) / 1e6
        return {"corpus_mb": round(size / 1e6, 1), "generate_seconds": round(gen_s, 1),
                "documents": res["documents"], "sentences": res["sentences"], "mentions": res["mentions"],
                "index_seconds": round(res["seconds"], 1), "mb_per_s": round(size / 1e6 / res["seconds"], 2),
                "peak_rss_mb_child": round(res["peak_rss_mb"], 1),
                "peak_rss_mb_children_max": round(peak_rss_mb(resource.RUSAGE_CHILDREN), 1),
                "index_size_mb": round(index_mb, 1), "target_rss_mb": 2048}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1000, help="synthetic corpus size (0: skip)")
    ap.add_argument("--baseline-seconds", type=float, default=30.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "corpus.json"))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_synthetic(*args.child)
        return
    cache = Path(tempfile.mkdtemp(prefix="pk-corpus-cache-"))
    os.environ["PROBEKIT_CACHE_DIR"] = str(cache)
    try:
        ds = load_dataset("medlama")
        names = list(ds.candidates("heads+tails").names)
        result = {}
        result["shipped"], idx = shipped(names, args.baseline_seconds)
        result["shipped"]["peak_rss_mb_process"] = round(peak_rss_mb(), 1)
        print(json.dumps(result["shipped"], indent=1), flush=True)
        result["lookup"] = lookups(idx, ds, args.repeats)
        print(json.dumps(result["lookup"], indent=1), flush=True)
        idx.close()
        if args.size_mb:
            result["synthetic"] = synthetic(names, args.size_mb)
            print(json.dumps(result["synthetic"], indent=1), flush=True)
        result["machine"] = {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg()}
        atomic.write_text(args.out, json.dumps(result, indent=1) + "\n")
    finally:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
