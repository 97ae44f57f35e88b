"""Likelihood probing in process vs through an inference engine: statements per second, equal rankings first.

The tests' tiny GPT-2 (``tests/_tiny_causal.py``, random weights; ``--embd``/``--layers`` widen it) is scored two
ways on the demo set's queries against their relation's answers (BEAR's multiple choice), ``sum`` over the whole
statement: by probekit in process (PyTorch, prefix-shared batches), and through llama-cpp-python's
OpenAI-compatible server (llama.cpp, the same weights as a float32 GGUF) started here on 127.0.0.1, one
``/v1/completions`` echo per statement, ``--concurrency`` requests in flight. Before any timing, every query's
scores are compared by the heavy test's rule (tests/test_backends_engine.py): within ``n * --token-tol`` of each
other (n: the query's longest statement, in tokens) and the same order for every pair of candidates more than twice
that apart; the script stops if they are not.
The two alternate (in process, served, ...) so both see the same machine load; the best of ``--repeats`` counts;
the load average before and after is recorded.

Needs ``pip install -r requirements-engines.txt`` (compiles llama.cpp).

    .venv/bin/python benchmarks/likelihood_backends.py --out benchmarks/results/likelihood_backends.json
    .venv/bin/python benchmarks/likelihood_backends.py --queries 10 --repeats 1      # a quick smoke run
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


def score_all(model, probe, cases, span: str) -> list:
    """Each case's scores in candidate-id order."""
    import numpy as np

    out = []
    for q, cands in cases:
        r = probe.rank(model, [q], cands, k=len(cands), span=span)[0]
        out.append(np.array(r.scores)[np.argsort(r.ids)])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=40, help="demo queries (every k-th, all relations)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight to the server")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of each scorer (torch and llama.cpp)")
    ap.add_argument("--embd", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--token-tol", type=float, default=5e-3, help="largest |Δ log-prob| of one token")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    from _tiny_causal import save_tiny_gpt2, save_tiny_gpt2_gguf, serve_gguf

    from probekit import models
    from probekit.datasets import load_dataset
    from probekit.probes import get_probe

    torch.set_num_threads(args.threads)
    os.environ["PROBEKIT_OPENAI_CONCURRENCY"] = str(args.concurrency)
    tmp = Path(tempfile.mkdtemp(prefix="pk-backends-"))
    folder = save_tiny_gpt2(tmp / "gpt2", n_embd=args.embd, n_layer=args.layers)
    gguf_file = save_tiny_gpt2_gguf(folder, tmp / "tiny-f32.gguf")
    os.environ["PROBEKIT_OPENAI_TOKENIZER"] = str(folder)
    proc, url = serve_gguf(gguf_file, alias="tiny", threads=args.threads)
    try:
        local = models.load(str(folder), device="cpu")
        remote = models.load(f"openai:{url}#tiny")
        ds = load_dataset("demo")
        step = max(1, len(ds) // args.queries)
        cases = [(q, ds.candidates("relation", q.relation)) for q in ds.queries[::step][:args.queries]]
        statements = sum(len(c) for _, c in cases)
        tokens = sum(len(local.tokenizer(local_statement(q, n))["input_ids"]) + 1 for q, c in cases
                     for n in c.names)
        probe = get_probe("likelihood")
        a, b = score_all(local, probe, cases, "statement"), score_all(remote, probe, cases, "statement")
        worst = max(float(np.abs(x - y).max()) for x, y in zip(a, b))
        for (q, c), y, x in zip(cases, a, b):
            tol = args.token_tol * max(len(local.tokenizer(local_statement(q, n))["input_ids"]) + 1 for n in c.names)
            far = np.abs(y[:, None] - y[None, :]) > 2 * tol
            same = np.sign(x[:, None] - x[None, :]) == np.sign(y[:, None] - y[None, :])
            if np.abs(x - y).max() > tol or not same[far].all():
                raise SystemExit(f"query {q.id}: scores or ranking differ beyond the tolerance: no timing")
        load_before = os.getloadavg()[0]
        times: dict[str, list[float]] = {"in_process": [], "served": []}
        for _ in range(args.repeats):
            for name, model in (("in_process", local), ("served", remote)):
                t0 = time.perf_counter()
                score_all(model, probe, cases, "statement")
                times[name].append(time.perf_counter() - t0)
        load_after = os.getloadavg()[0]
    finally:
        proc.terminate()
        proc.wait(10)
    best = {k: min(v) for k, v in times.items()}
    out = {
        "model": f"tiny GPT-2 ({args.layers} layers, {args.embd}-dim, random weights), float32",
        "engine": "llama-cpp-python 0.3.36 server (llama.cpp, float32 KV cache), /v1/completions echo, one "
                  "statement per request",
        "queries": len(cases), "statements": statements, "tokens_with_bos": tokens,
        "threads": args.threads, "concurrency": args.concurrency, "repeats": args.repeats,
        "max_abs_score_diff": worst, "token_tol": args.token_tol, "rankings_equal_beyond_ties": True,
        "seconds_best": best, "seconds_all": times,
        "statements_per_s": {k: statements / v for k, v in best.items()},
        "in_process_over_served": best["served"] / best["in_process"],
        "load_average": {"before": load_before, "after": load_after},
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    return 0


def local_statement(q, name: str) -> str:
    from probekit.probes.likelihood import statement

    return statement(q, name)[0]


if __name__ == "__main__":
    raise SystemExit(main())
