"""What a rerun takes over, said in one line: a benchmark run's stored relations, a vocabulary's encoded shards.
(The same lines after a real SIGKILL, and rewiring's, are checked in test_kill_jobs.py, under the heavy marker.)"""

from __future__ import annotations

import pytest

from probekit.jobs import Cancelled


def test_a_resumed_bench_run_says_how_much_of_it_is_stored(tiny_encoder, tiny_dataset):
    from probekit.bench import results
    from probekit.bench.runner import run_benchmark

    seen: list[str] = []
    with pytest.raises(Cancelled):  # stopped once the first relation is stored
        run_benchmark(tiny_encoder, tiny_dataset, progress=lambda d, t, stage: seen.append(stage),
                      should_cancel=lambda: any(s.endswith("· done") for s in seen))
    [(run_id, created)] = results.store().fetch("SELECT run_id, created_at FROM runs")
    notes: list[str] = []
    run = run_benchmark(tiny_encoder, tiny_dataset, notice=notes.append)
    assert notes == [f"resuming cancelled run {run_id}: 1 of 2 relations stored "
                     f"(started {created:%Y-%m-%d %H:%M} UTC)"]
    assert run.run_id == run_id and len(run.frame) == len(tiny_dataset.queries)
    notes.clear()
    run_benchmark(tiny_encoder, tiny_dataset, notice=notes.append)
    assert notes == []  # a finished run is found, not resumed


def test_a_resumed_vocabulary_encoding_says_how_many_shards_are_done(tmp_path, tiny_encoder):
    from probekit.vocab import shards
    from probekit.vocab.sources import open_source

    path = tmp_path / "names.txt"
    path.write_text("\n".join(f"name {i}" for i in range(23)) + "\n")
    rows = shards.read_rows(open_source("names", path), shard_size=5)
    published: list[int] = []
    real = shards.Vectors.publish

    def counting(self, i, vec, *, seconds):
        real(self, i, vec, seconds=seconds)
        published.append(i)

    notes: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shards.Vectors, "publish", counting)
        with pytest.raises(Cancelled):
            shards.encode(tiny_encoder, rows, should_cancel=lambda: len(published) >= 2, notice=notes.append)
    assert notes == []  # a first encoding has nothing to resume
    shards.encode(tiny_encoder, rows, notice=notes.append)
    assert notes == ["resuming: 2 of 5 shards done"]
    shards.encode(tiny_encoder, rows, notice=notes.append)
    assert notes[1:] == ["all 5 shards already encoded"]
