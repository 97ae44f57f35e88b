"""runs: store round trip, run_benchmark == probe.rank, reuse/resume/cancel, jobs, exports, CLI."""

from __future__ import annotations

import json
import re
import threading

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, TINY_TRIPLES

from probekit import cache, cli, encode, index, jobs, metrics
from probekit.bench import runs
from probekit.datasets import triples
from probekit.errors import ProbekitError
from probekit.probes import get_probe


@pytest.fixture(autouse=True)
def _fresh_memo():
    runs.clear_memo()
    index.clear_memo()
    yield
    runs.clear_memo()


def _same(a, b):
    assert [r.query.id for r in a] == [r.query.id for r in b]
    for x, y in zip(a, b):
        assert x.names == y.names and x.gold_ranks == y.gold_ranks
        np.testing.assert_allclose(x.scores, y.scores, rtol=1e-5, atol=1e-6)


def _by_relation(rankings):
    return sorted(rankings, key=lambda r: (r.query.relation, r.query.id))


def count_encodes(monkeypatch):
    calls = []
    real = encode.encode_layers

    def counting(model, texts, **kw):
        calls.append(len(texts))
        return real(model, texts, **kw)

    monkeypatch.setattr(cache, "encode_layers", counting)
    return calls


def test_retrieval_run_equals_probe_and_round_trips(tiny_encoder, tiny_dataset):
    probe = get_probe("retrieval")
    expected = probe.rank(tiny_encoder, tiny_dataset.queries, tiny_dataset.candidates(), k=5)
    run = runs.run_benchmark(tiny_encoder, tiny_dataset, options={"pooling": "mean"}, k=5)
    assert run.run_id and run.meta["status"] == "done" and len(run.frame) == len(tiny_dataset)
    _same(_by_relation(run.rankings()), _by_relation(
        probe.rank(tiny_encoder, tiny_dataset.queries, tiny_dataset.candidates(), k=5, pooling="mean")))
    # the stored run gives back exactly what was computed
    loaded = runs.load_run(run.run_id)
    _same(loaded.rankings(), run.rankings())
    assert loaded.summary()["macro"] == metrics.summary(loaded.rankings())["macro"]
    meta = loaded.meta
    assert meta["model_source"] == tiny_encoder.source and meta["model_revision"] == tiny_encoder.revision
    assert meta["dataset"] == "tiny" and meta["dataset_version"] == tiny_dataset.version
    assert meta["options"]["pooling"] == "mean" and meta["options"]["layer"] == 2
    assert meta["device"] == "cpu" and meta["probekit_version"] and meta["k"] == 5
    assert set(meta["timings"]) >= {"encoding candidates", "encoding queries", "scoring", "saving"}
    assert len(expected) == len(loaded.frame)
    from probekit.store import get_store, schema

    assert get_store().schema_version("runs") == len(schema.MIGRATIONS["runs"])


def test_mask_average_run_equals_probe(tiny_mlm, tiny_dataset):
    probe = get_probe("mask_average")
    expected = probe.rank(tiny_mlm, tiny_dataset.queries, tiny_dataset.candidates("tails"), k=3)
    run = runs.run_benchmark(tiny_mlm, tiny_dataset, probe="mask_average", vocab="tails", k=3)
    _same(_by_relation(run.rankings()), _by_relation(expected))
    assert "probing" in run.meta["timings"]


def test_relation_vocab_uses_each_relations_tails(tiny_encoder, tiny_dataset):
    run = runs.run_benchmark(tiny_encoder, tiny_dataset, vocab="relation", k=3, save=False)
    assert run.run_id is None
    n = dict(zip(run.frame.relation, run.frame.n_candidates))
    assert n == {"may_prevent": 4, "may_treat": 5}


def test_identical_settings_open_the_stored_run(tiny_encoder, tiny_dataset, monkeypatch):
    first = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, options={"batch_size": 4})
    calls = count_encodes(monkeypatch)
    stages = []
    again = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, options={"pooling": None, "batch_size": 64},
                               progress=lambda d, t, s: stages.append(s))
    assert again.run_id == first.run_id and calls == [] and stages == ["found in the store"]
    # forced recomputation: a new run, but every embedding comes from the cache
    fresh = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, reuse=False)
    assert fresh.run_id != first.run_id and calls == []
    _same(fresh.rankings(), first.rankings())
    # ... also after a "restart": in-process memos cleared, disk cache only
    runs.clear_memo()
    index.clear_memo()
    runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, reuse=False, save=False)
    assert calls == []
    # other settings are other runs
    other = runs.run_benchmark(tiny_encoder, tiny_dataset, k=3)
    assert other.run_id not in (first.run_id, fresh.run_id) and calls == []  # k=3: same embeddings, new run
    assert runs.find_run(runs.settings_of(tiny_encoder, tiny_dataset, k=5)) == fresh.run_id


def test_settings_ignore_batch_size_but_not_results_options(tiny_encoder, tiny_dataset):
    base = runs.settings_of(tiny_encoder, tiny_dataset, k=10)
    assert runs.settings_key(base) == runs.settings_key(
        runs.settings_of(tiny_encoder, tiny_dataset, options={"batch_size": 3, "layer": 2}, k=10))
    for change in ({"options": {"similarity": "dot"}}, {"options": {"layer": 1}}, {"vocab": "tails"}, {"k": 5}):
        kw = {"options": None, "vocab": "heads+tails", "k": 10, **change}
        assert runs.settings_key(runs.settings_of(tiny_encoder, tiny_dataset, **kw)) != runs.settings_key(base)
    with pytest.raises(ProbekitError, match="unknown option"):
        runs.settings_of(tiny_encoder, tiny_dataset, options={"nope": 1})
    with pytest.raises(ProbekitError, match="k must be"):
        runs.settings_of(tiny_encoder, tiny_dataset, k=0)
    with pytest.raises(ProbekitError, match="vocabulary"):
        runs.settings_of(tiny_encoder, tiny_dataset, vocab="all")


def test_cancel_keeps_finished_relations_and_resumes(tiny_encoder, tiny_dataset, monkeypatch):
    done_stages = []

    def progress(d, t, stage):
        done_stages.append(stage)

    with pytest.raises(jobs.Cancelled):
        runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, progress=progress,
                           should_cancel=lambda: any(s.endswith("· done") for s in done_stages))
    listed = runs.list_runs()
    assert list(listed.status) == ["cancelled"]
    run_id = listed.run_id[0]
    first_rel = tiny_dataset.relations[0]
    stored = runs.load_run(run_id)
    assert set(stored.frame.relation) == {first_rel}
    calls = count_encodes(monkeypatch)
    resumed = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5)
    assert resumed.run_id == run_id and resumed.meta["status"] == "done"
    assert len(resumed.frame) == len(tiny_dataset)
    assert calls == [len(tiny_dataset.queries_for(tiny_dataset.relations[1]))]  # only the missing relation
    full = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, reuse=False, save=False)
    _same(resumed.rankings(), full.rankings())


def test_cancel_inside_encoding(tiny_encoder, tiny_dataset):
    with pytest.raises(jobs.Cancelled):
        runs.run_benchmark(tiny_encoder, tiny_dataset, options={"batch_size": 2}, k=5,
                           should_cancel=lambda: True)
    assert runs.list_runs().status.tolist() == ["cancelled"]


def test_a_run_is_active_while_it_computes_and_the_set_belongs_to_results(tiny_encoder, tiny_dataset):
    """The active-run set is results' own (claim_run / release_run / is_active): the runner claims its run while it
    computes (a delete meanwhile is refused) and releases it however the run ends; no other module touches it."""
    from probekit.bench import results

    seen: dict = {}

    def progress(d, t, stage):
        if not seen:
            (rid,), = results.store().fetch("SELECT run_id FROM runs WHERE status = 'running'")
            seen[rid] = results.is_active(rid)
            with pytest.raises(ProbekitError, match="is running: cancel it first"):
                runs.delete_run(rid)

    with pytest.raises(jobs.Cancelled):
        runs.run_benchmark(tiny_encoder, tiny_dataset, k=5, progress=progress, should_cancel=lambda: bool(seen))
    (rid, active), = seen.items()
    assert active and not results.is_active(rid)
    assert results.claim_run(rid) and not results.claim_run(rid)  # one claim at a time
    results.release_run(rid)
    results.release_run(rid)  # twice is harmless
    assert not results.is_active(rid)
    others = [p for p in (ROOT / "probekit").rglob("*.py") if re.search(r"\b(res|results)\._?ACTIVE", p.read_text())]
    assert not others


def test_save_run_like_the_cli(tiny_encoder, tiny_dataset):
    probe = get_probe("retrieval")
    rankings = probe.rank(tiny_encoder, tiny_dataset.queries, tiny_dataset.candidates(), k=10)
    run_id = runs.save_run(rankings, model=tiny_encoder, dataset=tiny_dataset, probe="retrieval", options={},
                           vocab="heads+tails", k=10)
    run = runs.load_run(run_id)
    _same(_by_relation(run.rankings()), _by_relation(rankings))
    row = run.frame.set_index("query_id").loc[rankings[0].query.id]
    assert row.golds == list(rankings[0].query.golds) and row.best_gold_rank == rankings[0].best_gold_rank
    assert row.gold_length == np.mean([len(g) for g in rankings[0].query.golds])
    # the CLI-saved run is found by the app with the same settings
    assert runs.run_benchmark(tiny_encoder, tiny_dataset, k=10).run_id == run_id
    with pytest.raises(ProbekitError, match="nothing to store"):
        runs.save_run([], model=tiny_encoder, dataset=tiny_dataset, probe="retrieval")


def test_list_runs_accuracy_matches_metrics(tiny_encoder, tiny_dataset):
    a = runs.run_benchmark(tiny_encoder, tiny_dataset, k=10)
    b = runs.run_benchmark(tiny_encoder, tiny_dataset, k=10, options={"pooling": "cls"})
    listed = runs.list_runs().set_index("run_id")
    for run in (a, b):
        s = metrics.summary(run.rankings())
        row = listed.loc[run.run_id]
        assert row["macro acc@1"] == pytest.approx(s["macro"]["acc@1"])
        assert row["micro acc@10"] == pytest.approx(s["micro"]["acc@10"])
        assert row.n_done == len(tiny_dataset) and row.status == "done"
    assert "cls" in listed.loc[b.run_id, "label"]


def test_hard_flag_and_hard_summary(tiny_encoder, tiny_dataset):
    from probekit.datasets import hardness

    run = runs.run_benchmark(tiny_encoder, tiny_dataset, k=10)
    for row in run.frame.itertuples():
        assert row.hard == hardness.is_hard(row.subject, row.golds)
    hard = [r for r in run.rankings() if hardness.is_hard(r.query.subject, list(r.query.golds))]
    summary = run.summary()
    assert summary["hard-in-full"]["micro"] == metrics.summary(hard)["micro"]
    assert "hard" not in summary and summary["subsets"] == ["full", "hard-in-full"]


def test_hard_block_is_labelled_by_the_set_it_was_ranked_in(tiny_encoder):
    """The rule: "A full run's 'hard' block is a different experiment (hard queries ranked in the full
    vocabulary): keep it only if it is labelled so everywhere (tables, exports, charts)." A full-set run's hard
    queries are ``hard-in-full``; only a run on the hard set (among its own files' names) says ``hard``."""
    from probekit.datasets import load_dataset

    full = runs.run_benchmark(tiny_encoder, load_dataset("demo"), k=10, save=False)
    hard = runs.run_benchmark(tiny_encoder, load_dataset("demo", which="hard"), k=10, save=False)
    assert full.meta["dataset_set"] != "hard" and hard.meta["dataset_set"] == "hard"
    s_full, s_hard = full.summary(), hard.summary()
    assert runs.hard_block(s_full) == ("hard-in-full", s_full["hard-in-full"]) and "hard" not in s_full
    assert s_hard["hard"]["macro"] == s_hard["macro"] and "hard-in-full" not in s_hard  # the whole hard-set run
    assert runs.hard_block(s_hard) == ("hard", s_hard["hard"])
    # a summary from before the label (it said "hard" for both) is still read, by the run's set
    old = {k: v for k, v in s_full.items() if k not in ("hard-in-full", "subsets")} | {"hard": s_full["hard-in-full"]}
    assert runs.hard_block(old, hard_set=False) == ("hard-in-full", s_full["hard-in-full"])
    assert runs.hard_block({**old, "run": {"dataset_set": "hard"}})[0] == "hard"


def test_export_and_delete(tiny_encoder, tiny_dataset, tmp_path):
    run = runs.run_benchmark(tiny_encoder, tiny_dataset, k=5)
    csv = runs.export_run(run.run_id, tmp_path / "out.csv")
    pq = runs.export_run(run.run_id, tmp_path / "x.data", fmt="parquet")
    a, b = pd.read_csv(csv), pd.read_parquet(pq)
    assert len(a) == len(b) == len(tiny_dataset)
    assert {"run_id", "model", "dataset", "probe", "query_id", "gold_ranks", "top_names"} <= set(a.columns)
    assert json.loads(b.top_names[0]) == run.frame.top_names[0]
    with pytest.raises(ProbekitError, match="export format"):
        runs.export_run(run.run_id, tmp_path / "out.xlsx")
    assert runs.frame_bytes(run.frame[["query_id"]], "csv").startswith(b"query_id")
    runs.delete_run(run.run_id)
    assert runs.list_runs().empty
    with pytest.raises(ProbekitError, match="no stored run"):
        runs.load_run(run.run_id)


class _Watched:
    """``jobs._WORK`` that says when an attempt to take it timed out: a job found the machine taken."""

    def __init__(self, semaphore):
        self.semaphore, self.refused = semaphore, threading.Event()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        got = self.semaphore.acquire(blocking, timeout)
        if not got:
            self.refused.set()
        return got

    def release(self) -> None:
        self.semaphore.release()


def test_jobs_run_in_background(tiny_encoder, tiny_encoder_dir, tiny_dataset, monkeypatch):
    job = runs.start_benchmark([tiny_encoder, str(tiny_encoder_dir)], tiny_dataset, k=5, device="cpu")
    assert job.wait(120) and job.status == "done", job.error
    assert len(job.result) == 2 and job.result[0] == job.result[1]  # same weights: the second is found stored
    assert job.fraction == 1.0
    bad = runs.start_benchmark(["/no/such/model"], tiny_dataset, k=5)
    assert bad.wait(60) and bad.status == "failed" and "does not exist" in bad.error
    work = _Watched(jobs._WORK)
    monkeypatch.setattr(jobs, "_WORK", work)
    work.acquire()  # another job holds the machine: this one waits its turn, then is cancelled
    try:
        queued = runs.start_benchmark([tiny_encoder], tiny_dataset, k=2, options={"layer": 1})
        assert work.refused.wait(60), "the job never asked for the machine"
        assert queued.status == "queued" and not queued.finished
        queued.cancel()
        assert queued.wait(10) and queued.status == "cancelled"
    finally:
        work.release()
    assert runs.find_run(runs.settings_of(tiny_encoder, tiny_dataset, k=2, options={"layer": 1})) is None
    with pytest.raises(ProbekitError, match="at least one model"):
        runs.start_benchmark([], tiny_dataset)


def test_dataset_spec(tiny_dataset):
    from probekit.datasets import load_dataset

    assert runs.dataset_spec(load_dataset("demo")) == "demo"
    assert runs.dataset_spec(load_dataset("demo", which="hard")) == "demo:hard"
    assert runs.dataset_spec(tiny_dataset) == "tiny"
    up = triples.parse(TINY_TRIPLES, label="x.csv", name="upload:x.csv")
    assert runs.dataset_spec(up) is None


def test_cli_bench_save_and_runs_commands(capsys, tiny_encoder_dir, tmp_path):
    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    base = ["--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts)]
    assert cli.main(["bench", *base, "--save", "--quiet", "--format", "json", "--k", "5"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert cli.main(["runs", "list"]) == 0
    assert run_id in capsys.readouterr().out
    assert cli.main(["runs", "show", run_id, "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run"]["run_id"] == run_id and shown["n_queries"] == 8 and "hard-in-full" in shown
    assert "hard" not in shown  # a full-set run's hard queries are not the hard set's experiment
    assert cli.main(["runs", "show", run_id]) == 0
    text = capsys.readouterr().out
    assert "macro" in text and "hard-in-full@1" in text and " hard@" not in text
    out = tmp_path / "run.parquet"
    assert cli.main(["runs", "export", run_id, "--format", "parquet", "--out", str(out)]) == 0
    assert len(pd.read_parquet(out)) == 8
    capsys.readouterr()
    assert cli.main(["runs", "show", "run-nope"]) == 2
    assert "no stored run" in capsys.readouterr().err
    assert cli.main(["runs", "export", run_id]) == 2
    assert "--out" in capsys.readouterr().err


def test_cli_second_save_reopens_the_stored_run_without_loading_the_model(capsys, tiny_encoder_dir, tmp_path,
                                                                          monkeypatch):
    """The shell goes through the one runner: a second identical `bench --save` is the stored run (found from
    the model folder's identity, no weights loaded); --fresh computes a new run from cached embeddings."""
    from probekit import models

    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    base = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts), "--save",
            "--quiet", "--format", "json", "--k", "5"]
    assert cli.main(base) == 0
    out, err = capsys.readouterr()
    first = json.loads(out)
    assert "reused" not in err and "reused" not in first

    def no_loading(*a, **kw):
        raise AssertionError("the model was loaded")

    with monkeypatch.context() as m:
        m.setattr(models, "load", no_loading)
        assert cli.main(base) == 0
    out, err = capsys.readouterr()
    again = json.loads(out)
    assert again["reused"] is True  # and it says so, with how to compute it again
    assert re.search(rf"^reused run {again['run_id']} \(stored \d{{4}}-\d\d-\d\d \d\d:\d\d UTC\); --fresh to "
                     "compute it again$", err.strip()), err
    assert again["run_id"] == first["run_id"] and again["macro"] == first["macro"]
    assert again["model"]["revision"] == first["model"]["revision"]
    calls = count_encodes(monkeypatch)
    assert cli.main([*base, "--fresh"]) == 0
    out, err = capsys.readouterr()
    fresh = json.loads(out)
    assert "reused" not in err and "reused" not in fresh
    assert fresh["run_id"] != first["run_id"] and fresh["macro"] == first["macro"] and calls == []
    # the app finds what the shell stored
    model = models.load(str(tiny_encoder_dir), device="cpu")
    ds = triples.load(str(facts))
    assert runs.run_benchmark(model, ds, k=5).run_id == fresh["run_id"]
    assert cli.main([*base[:-2], "--k", "1001"]) == 2
    assert "k must be an integer from 1 to 1000" in capsys.readouterr().err
    assert cli.main(["bench", "--fresh", "--dataset", "demo"]) == 2
    assert "--fresh only applies with --save" in capsys.readouterr().err


def test_cli_save_with_a_locked_database_fails_fast(capsys, tiny_encoder_dir, tmp_path, monkeypatch):
    """Another process holds the DuckDB file: one error line, before the model is loaded or anything computed."""
    import subprocess
    import sys

    from probekit import config, models

    monkeypatch.setenv("PROBEKIT_DB_LOCK_WAIT_S", "0.5")  # how long it retries is a setting (20 s by default)
    db = config.db_path()
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); "
                               "print('ready', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        from probekit import store

        store.close_all()
        monkeypatch.setattr(models, "load", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("loaded")))
        code = cli.main(["bench", "--model", str(tiny_encoder_dir), "--dataset", "demo", "--save", "--quiet"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and err[0].startswith("error: cannot open the database")
    finally:
        holder.kill()
        holder.wait()


def test_options_added_later_leave_stored_keys_alone(tiny_mlm, tiny_dataset):
    """The rule of bench.settings.KEY_OMITTED_PROBE_DEFAULTS: an option added after runs were stored is left out of
    the key at its default (the behaviour those runs had), so they are still found; a value that changes results
    (here the lm-pub-quiz preset) changes the key."""
    base = runs.settings_of(tiny_mlm, tiny_dataset, probe="likelihood", vocab="relation")
    assert not {"capitalize", "pll", "preset"} & set(base["options"])
    preset = runs.settings_of(tiny_mlm, tiny_dataset, probe="likelihood", vocab="relation",
                              options={"preset": "lm-pub-quiz"})
    assert runs.settings_key(preset) != runs.settings_key(base)
