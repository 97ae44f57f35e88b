"""Vocabulary shards encoded across Ray workers: one model per worker, shards as tasks, no shard encoded twice.

Ray is started or joined as the grid's Ray backend does (:func:`probekit.ray_session.start_ray`); the shards land
where :func:`probekit.vocab.shards.encode` puts them, so either resumes the other.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import models
from ..errors import positive_int
from ..jobs import Progress
from ..ray_session import ray_address, start_ray, stop_ray
from .shards import Rate, Rows, Vectors, encode_shard, resume_note, vector_key, vectors_for


def _shard_actor(ray):
    @ray.remote
    class ShardWorker:
        """One model per actor, loaded once; encodes the shards it is handed."""

        def __init__(self, model_id: str, threads: int, device: str | None):
            import torch


            torch.set_num_threads(max(1, threads))
            self.model = models.load(model_id, device=device)

        def key(self, fingerprint: str, layer: int | None, pooling: str | None, dtype: str, shard_size: int,
                fast: bool) -> tuple[str, int, str]:
            layer = self.model.num_layers if layer in (None, -1) else int(layer)
            pooling = pooling or self.model.spec.pooling
            return vector_key(self.model, fingerprint=fingerprint, layer=layer, pooling=pooling, dtype=dtype,
                              shard_size=shard_size, fast=fast), layer, pooling

        def encode(self, vectors: Vectors, i: int, layer: int, pooling: str, batch_size: int, fast: bool):
            return i, encode_shard(self.model, vectors, i, layer=layer, pooling=pooling, batch_size=batch_size,
                                   fast=fast)

    return ShardWorker


def encode_on_ray(model_id: str, rows: Rows, *, workers: int = 2, threads_per_worker: int = 1,
                  layer: int | None = None, pooling: str | None = None, dtype: str = "float32",
                  batch_size: int = 128, fast: bool = False, device: str | None = None,
                  address: str | None = None, progress: Progress | None = None,
                  notice: Callable[[str], None] | None = None) -> tuple[Vectors, dict]:
    """Encode the missing shards of ``rows`` across ``workers`` Ray actors: each actor loads the model once; the
    driver hands each missing shard to exactly one idle actor, so no shard is encoded twice.

    Returns the vectors and what happened: ``assigned`` (shard ids in the order handed out), ``start_s`` (Ray and
    the actors' model loads), ``encode_s`` (first shard handed out to last one back), ``worker_s`` (the actors'
    own seconds inside :func:`~probekit.vocab.shards.encode_shard`, summed: what is left of ``encode_s`` x workers
    is Ray's share). ``notice`` gets :func:`~probekit.vocab.shards.resume_note`'s line when shards were done."""
    workers = positive_int("workers", workers)
    address = ray_address(address)
    ray = start_ray(address=address, workers=workers)
    t0 = time.perf_counter()
    actor_cls = _shard_actor(ray)
    actors = [actor_cls.options(num_cpus=1).remote(model_id, threads_per_worker, device)
                      for _ in range(workers)]
    try:
        keys = ray.get([a.key.remote(rows.fingerprint, layer, pooling, dtype, rows.shard_size, fast)
                        for a in actors])  # every actor has its model loaded from here on
        key, layer_, pooling_ = keys[0]
        vectors = vectors_for(rows, key, dtype)
        start_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        todo = vectors.missing()
        note = resume_note(vectors, todo)
        if note and notice is not None:
            notice(note)
        assigned: list[int] = []
        before = rows.n_rows - sum(vectors.shard_rows(i) for i in todo)
        done, rate = before, Rate(rows.n_rows)
        running: dict = {}
        worker_s = 0.0
        free = list(actors)
        while todo or running:
            while todo and free:
                actor, i = free.pop(), todo.pop(0)
                assigned.append(i)
                running[actor.encode.remote(vectors, i, layer_, pooling_, batch_size, fast)] = actor
            ready, _ = ray.wait(list(running), num_returns=1)
            for ref in ready:
                free.append(running.pop(ref))
                i, seconds = ray.get(ref)
                worker_s += seconds
                done += vectors.shard_rows(i)
                if progress:
                    progress(done, rows.n_rows, f"encoding on {workers} Ray workers {rate.text(done, before)}")
        return vectors, {"assigned": assigned, "start_s": start_s, "encode_s": time.perf_counter() - t1,
                         "worker_s": worker_s}
    finally:
        stop_ray(actors, address=address)
