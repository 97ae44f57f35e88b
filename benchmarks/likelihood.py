"""Likelihood probing speed: probekit's prefix-shared batched scoring vs a one-statement-at-a-time loop (and vs
BEAR's ``lm-pub-quiz`` where it is importable), same inputs, same outputs, in one process.

All three score the demo set's queries against their relation's answer set (BEAR's multiple choice, ``--vocab
relation``) with the same causal LM, ``sum`` over the whole statement. The loop runs one forward per statement
(full logits, no padding); ``lm-pub-quiz`` scores padded batches of whole statements (``--batch-size``);
probekit's gets the queries relation by relation (as the benchmark runner gives them), runs each query's shared
prefix once (KV cache, several prefixes per forward) and all candidates' continuations in length-sorted padded
batches across queries. They alternate (loop, lm-pub-quiz, probekit, …) so all see the same machine load; the best of
``--repeats`` counts; the load average before and after is recorded with the figures. Outputs are compared:
max |Δ score| and whether every query's ranking is identical.

``--rerank N``: retrieve-then-rerank on MedLAMA (full vocabulary, 22,923 names): the embedded encoder's
retrieval keeps the top N, the causal LM re-ranks them; its cost per query and acc@10 next to retrieval alone
(retrieval runs once first, so that the names' embeddings are in the disk cache for both timed runs).

The default model is the tests' tiny random GPT-2 (``tests/_tiny_causal.py``); ``--model FOLDER`` times another.

    .venv/bin/python benchmarks/likelihood.py --out benchmarks/results/likelihood.json
    .venv/bin/python benchmarks/likelihood.py --queries 10 --repeats 1      # a quick smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def naive_scores(model, query, names) -> list[float]:
    """BEAR's sum of log P(w_t | w_<t), one statement per forward (BOS first when the tokenizer adds none)."""
    import torch

    from probekit.probes.likelihood import statement

    tok, lm = model.tokenizer, model.causal
    out = []
    with torch.inference_mode():
        for n in names:
            enc = tok(statement(query, n)[0], return_special_tokens_mask=True)
            ids, special = enc["input_ids"], enc["special_tokens_mask"]
            if tok.bos_token_id is not None and ids[0] != tok.bos_token_id:
                ids, special = [tok.bos_token_id] + ids, [1] + special
            logp = lm(input_ids=torch.tensor([ids])).logits[0].float().log_softmax(-1)  # (seq, vocab)
            target = torch.tensor(ids[1:])
            keep = ~torch.tensor(special[1:], dtype=torch.bool)
            out.append(float(logp[:-1].gather(1, target[:, None])[:, 0][keep].double().sum()))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="a causal LM folder (default: a random GPT-2 built here)")
    ap.add_argument("--width", type=int, default=32, help="the random GPT-2's hidden size (tests: 32)")
    ap.add_argument("--layers", type=int, default=2, help="the random GPT-2's layers (tests: 2)")
    ap.add_argument("--queries", type=int, default=113, help="how many demo queries (113 = all)")
    ap.add_argument("--batch-size", type=int, default=64, help="statements per forward (probekit, lm-pub-quiz)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rerank", type=int, default=0, help="also time retrieve-then-rerank on MedLAMA, top N")
    ap.add_argument("--rerank-queries", type=int, default=200, help="MedLAMA queries for --rerank")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    args = ap.parse_args()
    import numpy as np
    import torch

    from probekit import models
    from probekit.datasets import load_dataset
    from probekit.probes import get_probe

    torch.set_num_threads(args.threads)
    if args.model:
        folder = args.model
    else:
        from _tiny_causal import save_tiny_gpt2

        folder = str(save_tiny_gpt2(Path(tempfile.mkdtemp()), n_embd=args.width, n_layer=args.layers))
    model = models.load(folder, device="cpu")
    probe = get_probe("likelihood")
    demo = load_dataset("demo")
    cases = [(q, demo.candidates("relation", q.relation)) for q in demo.queries[:args.queries]]
    n_statements = sum(len(c) for _, c in cases)
    tok = model.tokenizer
    n_tokens = sum(len(tok(get_statement(q, n))["input_ids"]) + 1 for q, c in cases for n in c.names)
    n_run = run_tokens(model, cases)
    try:
        from lm_pub_quiz import Evaluator

        lpq = Evaluator.from_model(model.causal, model_type="CLM", tokenizer=tok, device="cpu", capitalize=False)
    except ImportError:
        lpq = None
    params = sum(p.numel() for p in model.causal.parameters())
    print(f"{model.id} ({params / 1e6:.2f}M parameters), CPU ({torch.get_num_threads()} threads); {len(cases)} "
          f"queries x their relation's answers = {n_statements} statements, {n_tokens} tokens ({n_run} after the "
          f"shared prefixes, prefixes once each); batch "
          f"{args.batch_size}; lm-pub-quiz {'present' if lpq else 'absent'}; {args.repeats} repeats", flush=True)

    def run_naive(cs):
        return [naive_scores(model, q, c.names) for q, c in cs]

    def run_lpq(cs):
        return [lpq.evaluate_instance(template=q.template, answers=list(c.names), subject=q.subject,
                                      reduction="sum", batch_size=args.batch_size) for q, c in cs]

    def run_ours(cs):  # relation by relation, as the benchmark runner calls probes (one candidate set each)
        by_rel: dict[str, list[int]] = {}
        for j, (q, _) in enumerate(cs):
            by_rel.setdefault(q.relation, []).append(j)
        out: list = [None] * len(cs)
        for js in by_rel.values():
            c = cs[js[0]][1]
            for j, r in zip(js, probe.rank(model, [cs[j][0] for j in js], c, k=len(c), batch_size=args.batch_size)):
                s = dict(zip(r.ids, r.scores))
                out[j] = [s[i] for i in range(len(c))]
        return out

    runners = {"loop": run_naive, **({"lm-pub-quiz": run_lpq} if lpq else {}), "probekit": run_ours}
    for f in runners.values():  # warm-up
        f(cases[:2])
    load_before = os.getloadavg()
    seconds: dict[str, list[float]] = {n: [] for n in runners}
    results: dict = {}
    for rep in range(args.repeats):
        for name, f in runners.items():
            t = time.perf_counter()
            results[name] = f(cases)
            seconds[name].append(time.perf_counter() - t)
        print(f"  repeat {rep + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()), flush=True)
    load_after = os.getloadavg()
    best = {n: min(s) for n, s in seconds.items()}
    ours = results["probekit"]
    compare = {}
    for name in runners:
        if name == "probekit":
            continue
        diff = max(float(np.max(np.abs(np.array(a) - np.array(b)))) for a, b in zip(ours, results[name]))
        same = all(list(np.argsort(-np.array(a), kind="stable")) == list(np.argsort(-np.array(b), kind="stable"))
                   for a, b in zip(ours, results[name]))
        compare[name] = {"speedup": best[name] / best["probekit"], "max_abs_diff": diff, "same_rankings": same}
    per_1000 = best["probekit"] / n_statements * 1000
    print("best: " + ", ".join(f"{n} {s:.2f} s" for n, s in best.items()) + "; " + "; ".join(
        f"probekit vs {n}: {c['speedup']:.1f}x, max |Δ score| {c['max_abs_diff']:.1e}, rankings "
        f"{'identical' if c['same_rankings'] else 'DIFFERENT'}" for n, c in compare.items())
        + f"; probekit {per_1000:.2f} s per 1,000 query x candidate statements ({n_tokens / best['probekit']:.0f} "
        f"tokens/s); load average {load_before[0]:.1f} before, {load_after[0]:.1f} after ({os.cpu_count()} cores)",
        flush=True)
    figures = {"model": model.id, "parameters": params, "threads": torch.get_num_threads(), "queries": len(cases),
               "statements": n_statements, "tokens": n_tokens, "tokens_run_by_probekit": n_run,
               "batch_size": args.batch_size, "seconds": seconds,
               "best_seconds": best, "compare": compare, "seconds_per_1000_statements": per_1000,
               "cpu_count": os.cpu_count(), "load_average_1min_before": load_before[0],
               "load_average_1min_after": load_after[0]}
    if args.rerank:
        figures["rerank"] = rerank(model, args.rerank, args.rerank_queries, args.batch_size)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


def run_tokens(model, cases) -> int:
    """Tokens probekit runs: each query's shared prefix once, then every candidate's continuation."""
    from probekit.probes.likelihood import statement
    from probekit.probes.likelihood_scoring import common_prefix, encode

    total = 0
    for q, c in cases:
        filled = [statement(q, n) for n in c.names]
        rows = [e.ids for e in encode(model, [t for t, _ in filled], [s for _, s in filled], "statement")]
        p = common_prefix(rows)
        total += p + sum(len(r) - p for r in rows)
    return total


def get_statement(query, name) -> str:
    from probekit.probes.likelihood import statement

    return statement(query, name)[0]


def rerank(model, top_n: int, n_queries: int, batch_size: int) -> dict:
    """Retrieve-then-rerank on MedLAMA's full vocabulary: cost per query and acc@10, next to retrieval alone."""
    from probekit import models
    from probekit.datasets import load_dataset
    from probekit.probes import get_probe

    ds = load_dataset("medlama")
    cands = ds.candidates("heads+tails")
    queries = ds.queries[:: max(1, len(ds.queries) // n_queries)][:n_queries]
    encoder = models.load("default", device="cpu")
    t = time.perf_counter()
    get_probe("retrieval").rank(encoder, queries, cands, k=top_n)  # encodes the names once (the disk cache)
    t_cold = time.perf_counter() - t
    t = time.perf_counter()
    first = get_probe("retrieval").rank(encoder, queries, cands, k=top_n)
    t_first = time.perf_counter() - t
    t = time.perf_counter()
    rr = get_probe("likelihood").rank(model, queries, cands, k=10, first_stage="retrieval", top_n=top_n,
                                      batch_size=batch_size)
    t_both = time.perf_counter() - t

    def acc10(rankings):
        return sum(any(g is not None and g <= 10 for g in r.gold_ranks) for r in rankings) / len(rankings)

    out = {"queries": len(queries), "candidates": len(cands), "top_n": top_n,
           "retrieval_first_call_seconds": t_cold, "retrieval_seconds": t_first,
           "retrieve_then_rerank_seconds": t_both,
           "rerank_seconds_per_query": (t_both - t_first) / len(queries),
           "acc@10_retrieval": acc10(first), "acc@10_reranked": acc10(rr),
           "gold_in_first_stage_top_n": sum(any(g is not None and g <= top_n for g in r.gold_ranks)
                                            for r in first) / len(queries)}
    print(f"rerank on MedLAMA ({len(queries)} queries, {len(cands)} names, top {top_n}): retrieval {t_first:.1f} s "
          f"(first call, names encoded unless cached: {t_cold:.1f} s), "
          f"retrieve-then-rerank {t_both:.1f} s ({out['rerank_seconds_per_query']:.2f} s per query to rerank); "
          f"acc@10 retrieval {out['acc@10_retrieval']:.3f}, reranked {out['acc@10_reranked']:.3f}; a gold in the "
          f"first stage's top {top_n}: {out['gold_in_first_stage_top_n']:.3f}", flush=True)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
