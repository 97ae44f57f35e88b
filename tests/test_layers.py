"""layers: per-layer accuracy equals the retrieval probe at each layer, one encoding pass, stored and reused."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from probekit import cache, cli, encode, index, jobs, metrics
from probekit.bench import layers, runs
from probekit.datasets import hardness
from probekit.errors import ProbekitError
from probekit.probes import get_probe


@pytest.fixture(autouse=True)
def _fresh_memo():
    runs.clear_memo()
    index.clear_memo()


def count_encodes(monkeypatch):
    calls = []
    real = encode.encode_layers

    def counting(model, texts, *, layers=None, **kw):
        calls.append((len(texts), tuple(layers or ())))
        return real(model, texts, layers=layers, **kw)

    monkeypatch.setattr(cache, "encode_layers", counting)
    return calls


def test_each_layer_equals_the_probe_at_that_layer(tiny_encoder, tiny_dataset, monkeypatch):
    calls = count_encodes(monkeypatch)
    result = layers.run_layers(tiny_encoder, tiny_dataset, pooling="mean", layers=[0, 1, 2])
    # one pass over the candidates for all layers, one per relation for the queries
    n_cands = len(tiny_dataset.candidates())
    assert calls[0] == (n_cands, (0, 1, 2))
    assert sorted(calls[1:]) == sorted((len(tiny_dataset.queries_for(r)), (0, 1, 2)) for r in tiny_dataset.relations)
    probe = get_probe("retrieval")
    for L in (0, 1, 2):
        rankings = probe.rank(tiny_encoder, tiny_dataset.queries, tiny_dataset.candidates(), k=10, layer=L,
                              pooling="mean")
        per = metrics.per_relation(rankings)
        summary = metrics.summary(rankings)
        for name in metrics.metric_names():  # every registered metric, from the sweep's stored ranks
            acc = result.accuracy(metric=name)
            for rel, v in per.items():
                assert acc.loc[rel, L] == pytest.approx(v[name])
            assert result.averages().loc[L, f"micro {name}"] == pytest.approx(summary["micro"][name])
            assert result.averages().loc[L, f"macro {name}"] == pytest.approx(summary["macro"][name])
        hard = [r for r in rankings if hardness.is_hard(r.query.subject, list(r.query.golds))]
        hard_acc = result.averages(subset="hard-in-full").loc[L, "micro acc@10"]
        assert hard_acc == pytest.approx(metrics.acc_at_k(hard, k=10, average="micro"))


def test_stored_and_reused(tiny_encoder, tiny_dataset, monkeypatch):
    first = layers.run_layers(tiny_encoder, tiny_dataset)
    assert first.layers == [1, 2] and first.run_id
    calls = count_encodes(monkeypatch)
    again = layers.run_layers(tiny_encoder, tiny_dataset, pooling=tiny_encoder.spec.pooling)
    assert again.run_id == first.run_id and calls == []
    pd.testing.assert_frame_equal(again.table, first.table, check_dtype=False)
    # a fresh sweep reuses the cached embeddings; the benchmark at layer 1 does too
    fresh = layers.run_layers(tiny_encoder, tiny_dataset, reuse=False, save=False)
    assert fresh.run_id is None and calls == []
    run = runs.run_benchmark(tiny_encoder, tiny_dataset, options={"layer": 1}, save=False)
    assert calls == []
    micro = metrics.acc_at_k(run.rankings(), k=1, average="micro")
    assert first.averages().loc[1, "micro acc@1"] == pytest.approx(micro)
    assert list(layers.list_layer_runs().run_id) == [first.run_id]
    layers.delete_layer_run(first.run_id)
    assert layers.list_layer_runs().empty


def test_relation_vocab_and_cancel(tiny_encoder, tiny_dataset):
    result = layers.run_layers(tiny_encoder, tiny_dataset, vocab="relation", save=False)
    assert set(result.table.relation) == set(tiny_dataset.relations)
    with pytest.raises(jobs.Cancelled):
        layers.run_layers(tiny_encoder, tiny_dataset, similarity="dot", should_cancel=lambda: True)
    assert layers.list_layer_runs().empty


def test_bad_inputs(tiny_encoder, tiny_dataset):
    with pytest.raises(ProbekitError, match="out of range"):
        layers.run_layers(tiny_encoder, tiny_dataset, layers=[3])
    with pytest.raises(ProbekitError, match="integers"):
        layers.run_layers(tiny_encoder, tiny_dataset, layers=["x"])
    with pytest.raises(ProbekitError, match="pooling"):
        layers.run_layers(tiny_encoder, tiny_dataset, pooling="max")
    with pytest.raises(ProbekitError, match="no stored layer sweep"):
        layers.load_layer_run("layers-nope")


HAND = pd.DataFrame(
    [(1, "a", "full", 4, 1, 2, 3), (2, "a", "full", 4, 3, 3, 4), (3, "a", "full", 4, 3, 4, 4),
     (1, "b", "full", 2, 2, 2, 2), (2, "b", "full", 2, 0, 1, 2), (3, "b", "full", 2, 1, 2, 2),
     (1, "a", "hard-in-full", 2, 0, 1, 1), (2, "a", "hard-in-full", 2, 1, 1, 2), (3, "a", "hard-in-full", 2, 1, 2, 2),
     (1, "c", "hard-in-full", 3, 0, 0, 1), (2, "c", "hard-in-full", 3, 0, 0, 0), (3, "c", "hard-in-full", 3, 0, 1, 1)],
    columns=[c for c in layers.TABLE_COLUMNS if c != "ranks"])  # as sweeps stored before ranks were kept


def test_tables_against_naive_loops():
    for subset in ("full", "hard-in-full"):
        rows = [r for r in HAND.itertuples(index=False) if r.subset == subset]
        for k in (1, 5, 10):
            acc = layers.layer_accuracy(HAND, metric=f"acc@{k}", subset=subset)
            col = 4 + (1, 5, 10).index(k)
            for r in rows:
                assert acc.loc[r.relation, r.layer] == r[col] / r.n
            avg = layers.layer_averages(HAND, subset=subset)
            for L in (1, 2, 3):
                mine = [r for r in rows if r.layer == L]
                assert avg.loc[L, f"micro acc@{k}"] == pytest.approx(sum(r[col] for r in mine) / sum(r.n for r in mine))
                assert avg.loc[L, f"macro acc@{k}"] == pytest.approx(np.mean([r[col] / r.n for r in mine]))
            best = layers.best_layers(acc).set_index("relation")
            for rel in acc.index:
                values = {r.layer: r[col] / r.n for r in rows if r.relation == rel}
                top = max(values.values())
                if top == 0:
                    assert pd.isna(best.loc[rel, "best layer"])
                else:
                    assert best.loc[rel, "best layer"] == min(L for L, v in values.items() if v == top)
                assert best.loc[rel, "gain"] == pytest.approx(top - values[3])
    # a sweep stored before ranks were kept has acc@1/5/10 from its hit counts and nothing else
    assert layers.layer_accuracy(HAND, metric="MRR").isna().all().all()
    assert layers.layer_averages(HAND)["micro MRR"].isna().all()
    with pytest.raises(ProbekitError, match="unknown metric 'MMR'"):
        layers.layer_accuracy(HAND, metric="MMR")


def test_job_and_cli(capsys, tiny_encoder, tiny_encoder_dir, tiny_dataset, tmp_path):
    from conftest import TINY_TRIPLES

    job = layers.start_layers(tiny_encoder, tiny_dataset, similarity="dot")
    assert job.wait(120) and job.status == "done", job.error
    assert job.result.layers == [1, 2]
    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    base = ["layers", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts), "--quiet"]
    assert cli.main([*base, "--format", "json", "--save"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["layers"] == [1, 2] and data["run_id"]
    assert set(data["full"]["per_layer"]) == {1, 2} or set(data["full"]["per_layer"]) == {"1", "2"}
    assert list(data["full"]["best_layers"]) == data["metrics"] == metrics.metric_names()
    assert set(data["full"]["best_layers"]["MRR"]) == set(tiny_dataset.relations)
    assert data["counting"] == "query"  # the reading is named with the numbers
    assert cli.main([*base, "--layers", "2"]) == 0
    out = capsys.readouterr().out
    assert "best layer per relation" in out and "counting: query (a query is a hit" in out
    assert cli.main([*base, "--layers", "9"]) == 2
    assert "out of range" in capsys.readouterr().err
    assert cli.main(["layers", "--list"]) == 0
    assert data["run_id"] in capsys.readouterr().out


def test_subsets_say_which_candidates_the_hard_queries_met(tiny_encoder):
    """The rule: "A full run's 'hard' block is a different experiment (hard queries ranked in the full
    vocabulary): keep it only if it is labelled so everywhere." A full-set sweep has ``full`` and
    ``hard-in-full``; a hard-set sweep has ``hard`` alone (all its queries, among its own names)."""
    from probekit.datasets import load_dataset

    full = layers.run_layers(tiny_encoder, load_dataset("demo"), layers=[1], save=False)
    hard = layers.run_layers(tiny_encoder, load_dataset("demo", which="hard"), layers=[1], save=False)
    assert full.subsets == ["full", "hard-in-full"] and hard.subsets == ["hard"]
    assert hard.averages(subset="hard").loc[1, "n"] == len(load_dataset("demo", which="hard"))
    assert full.to_dict()["hard"] is None and hard.to_dict()["hard-in-full"] is None


def test_migration_renames_old_hard_rows_of_full_set_sweeps(tmp_path):
    """Stored sweeps of probekit 0.1 said ``hard`` for a full-set sweep's hard queries: the schema
    migration relabels them ``hard-in-full``; a hard-set sweep keeps one block, ``hard`` (all its queries)."""
    from probekit.store.db import Store
    from probekit.store.schema import MIGRATIONS

    db = Store(tmp_path / "old.duckdb")
    db.ensure_schema("layers", MIGRATIONS["layers"][:1])
    with db.transaction() as cur:
        for run_id, which in (("old-full", "full"), ("old-hard", "hard"), ("old-upload", None)):
            cur.execute("INSERT INTO layer_runs (run_id, created_at, settings_key, model, dataset, dataset_set) "
                        "VALUES (?, now(), 'k', 'm', 'd', ?)", [run_id, which])
            for subset, n in (("full", 5), ("hard", 2)):
                cur.execute("INSERT INTO layer_results VALUES (?, 1, 'r', ?, ?, 0, 0, 0)", [run_id, subset, n])
    db._migrated.discard("layers")
    db.ensure_schema("layers")
    rows = set(db.fetch("SELECT run_id, subset, n FROM layer_results"))
    assert rows == {("old-full", "full", 5), ("old-full", "hard-in-full", 2), ("old-upload", "full", 5),
                    ("old-upload", "hard-in-full", 2), ("old-hard", "hard", 5)}
    db.close()  # made directly, not through get_store: closed here, not left to an idle timer at exit
