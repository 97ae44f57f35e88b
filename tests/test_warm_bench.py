"""The warm benchmark's cuts rank exactly as before.

- One score product: :meth:`probekit.index.EntityIndex.rank` takes the top-k and the gold ranks from one pass of
  scores; the rule it must keep is the code's own (:func:`probekit.ranking.top_k_and_gold_ranks`): "a gold's rank is
  1 + the number of candidates scoring strictly higher, and among equal scores the top-k lists golds first, then
  lower ids"; near-ties within float32 noise go to the gold, identical vectors always tie.
- No model load when every vector is cached: :class:`probekit.bench.identity.CachedModel` ranks from the embedding
  cache alone and loads the weights only when a vector is missing, with the same cache keys as a loaded model.
- The CLI builds only the chosen command's parser.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from probekit import index as index_mod
from probekit import models
from probekit.index import EntityIndex
from probekit.index_rank import (
    TIE_TOLERANCE,
    GoldCounter,
    RunningTop,
    search_width,
    top_k_by_rule,
)
from probekit.ranking import top_k_and_gold_ranks


def _vectors(rng, n, dim, *, twins=0):
    """Random vectors with ``twins`` rows copied onto others (an uncased model's case variants) and a few exact
    score ties from repeated rows."""
    x = rng.standard_normal((n, dim)).astype(np.float32)
    for _ in range(twins):
        a, b = rng.integers(0, n, size=2)
        x[b] = x[a]
    return x


def _two_products(index: EntityIndex, queries, golds, k, exclude):
    """The ranking as it was computed before the one-pass cut: gold ranks from a numpy count over every candidate,
    the top-k from a separate faiss search, both through the same rule functions."""
    q = index_mod._prepare(queries, index.similarity)
    counter = GoldCounter(q, golds, exclude, similarity=index.similarity, max_norm=index._max_norm,
                          rows_of=index._rows_of, twins=index._twins)
    counter.add(0, index.vectors, index._sq_norms, chunk=index_mod.NAME_CHUNK)
    ranks = counter.ranks()
    tops = top_k_by_rule(index._faiss_search, q, golds, exclude, ranks, k, n=len(index),
                         tol=TIE_TOLERANCE * index._scale(q), gold_score=index._gold_score(q))
    return [(ids, scores, r) for (ids, scores), r in zip(tops, ranks)]


@pytest.mark.parametrize("kk", [1, 3, 40])
def test_running_top_keeps_the_best_scores_of_every_block(kk):
    """Against a naive sort of each whole row: the same kk best values, best first, ids pointing at them."""
    rng = np.random.default_rng(kk)
    scores = rng.integers(0, 50, size=(7, 300)).astype(np.float32)  # many exact ties
    top = RunningTop(len(scores), kk)
    for lo, hi in ((0, 25), (25, 89), (89, 90), (90, 300)):  # blocks shorter and longer than kk
        top.add(lo, scores[:, lo:hi])
    s, ids = top.result()
    for row in range(len(scores)):
        want = np.sort(scores[row])[::-1][:kk]
        assert s[row].tolist() == want.tolist()
        assert scores[row, ids[row]].tolist() == want.tolist()
        assert len(set(ids[row].tolist())) == kk


@pytest.mark.parametrize("similarity", ["cosine", "l2", "dot"])
def test_one_pass_ranks_as_the_two_products_and_the_naive_rule(similarity, monkeypatch):
    """Ids and gold ranks equal to the two-product path and to ``top_k_and_gold_ranks`` over every score; scores
    within float32 noise (a different kernel sums the same products)."""
    monkeypatch.setattr(index_mod, "NAME_CHUNK", 97)  # several blocks, the last one short
    monkeypatch.setattr(index_mod, "QUERY_CHUNK", 16)
    rng = np.random.default_rng(7)
    x = _vectors(rng, 500, 24, twins=40)
    index = EntityIndex(x, similarity=similarity)
    n_q = 40
    queries = np.concatenate([x[:10] * 1.0, rng.standard_normal((n_q - 10, 24)).astype(np.float32)])
    golds = [[int(rng.integers(0, 500)), int(rng.integers(0, 500)), None] for _ in range(n_q)]
    golds[0] = [0]  # the query is its gold's own vector: rank 1 whatever its twins do
    golds[5] = []  # no gold: top-k only
    exclude = [[] if i % 3 else [int(rng.integers(0, 500))] for i in range(n_q)]
    for k in (1, 10):
        one = index.rank(queries, golds, k, exclude=exclude)
        two = _two_products(index, queries, golds, k, exclude)
        full = index.all_scores(queries)
        for twins in index._twins.values():  # identical vectors score alike (a matmul may differ in the last bit)
            full[:, twins] = full[:, twins[:1]]
        for i, ((ids, scores, ranks), (ids2, scores2, ranks2)) in enumerate(zip(one, two)):
            assert ranks == ranks2, (similarity, k, i)
            # the same names in the same order; twins (one vector, several ids) may only swap places
            assert [min(index._twins.get(c, [c])) for c in ids] == [min(index._twins.get(c, [c])) for c in ids2], \
                (similarity, k, i)
            np.testing.assert_allclose(scores, scores2, rtol=1e-5, atol=1e-4)
            top, naive_ranks = top_k_and_gold_ranks(full[i], k, golds[i], exclude[i])
            assert ids == top.tolist() and ranks == naive_ranks, (similarity, k, i)
        assert one[0][2] == [1]


def _naive_top_k_by_rule(search, q, golds, exclude, ranks, k, *, n, tol, gold_score):
    """The rule one query at a time, as the code wrote it before it took whole arrays: widen while the k-th place's
    tie group may reach past the search; add golds ranked within k that the search left out; order by score (golds
    gaining the tolerance), then golds first, then lower ids."""
    kk = search_width(k, exclude, n)
    todo, found = np.arange(len(q)), {}
    while len(todo):
        scores, ids = search(q[todo], kk)
        again = []
        for r, i in enumerate(todo.tolist()):
            keep = ids[r] >= 0
            s, d = scores[r][keep], ids[r][keep]
            if exclude[i]:
                ok = ~np.isin(d, exclude[i])
                s, d = s[ok], d[ok]
            kth = s[min(k, len(s)) - 1] if len(s) else -np.inf
            if kk < n and len(s) and s[-1] >= kth - 2 * tol[i]:
                again.append(i)
            else:
                found[i] = (d, s)
        todo = np.array(again, dtype=np.int64)
        kk = min(n, kk * 4)
    out = []
    for i in range(len(q)):
        d, s = found[i]
        ids_i = d.tolist()
        sc = dict(zip(ids_i, s.tolist()))
        gold_set = {g for g, r in zip(golds[i], ranks[i]) if g is not None and r is not None}
        for gid, rk in zip(golds[i], ranks[i]):
            if gid is not None and rk is not None and rk <= k and gid not in sc:
                sc[gid] = gold_score(i, gid)
                ids_i.append(gid)
        arr = np.array(ids_i, dtype=np.int64)
        eff = np.array([sc[c] + (tol[i] if c in gold_set else 0.0) for c in ids_i], dtype=np.float64)
        order = np.lexsort((arr, ~np.array([c in gold_set for c in ids_i], dtype=bool), -eff))[:k]
        out.append((arr[order].tolist(), [float(sc[c]) for c in arr[order]]))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_top_k_by_rule_takes_whole_arrays_as_the_per_query_loop(seed):
    """Equal to the per-query loop on scores with many exact ties and near-ties (so searches widen), excluded
    candidates, golds the search leaves out (an approximate search's misses), repeated and absent golds, and
    searches that return fewer than asked (-1 past the end)."""
    rng = np.random.default_rng(seed)
    n_q, n, k = 30, 60, int(rng.choice([1, 3, 10]))
    # four score levels: tie groups of ~15 reaching past the search's first width; near-ties within the tolerance
    full = (rng.integers(0, 4, size=(n_q, n)) * 0.01 + (rng.random((n_q, n)) < 0.3) * 1e-7).astype(np.float32)
    tol = np.where(np.arange(n_q) % 2, 2e-7, 0.0)  # no tolerance: exact ties, where golds go first
    missed = rng.random((n_q, n)) < 0.1  # candidates the search never returns
    shuffle = rng.permuted(np.broadcast_to(np.arange(n), (n_q, n)), axis=1)  # ties in any order, as faiss

    def search(qq, kk):  # qq: the query rows' own indices, as floats
        rows = qq[:, 0].astype(int)
        s = np.where(missed[rows], -np.inf, full[rows])
        order = np.lexsort((shuffle[rows], -s), axis=1)[:, :kk]
        ids = np.where(np.take_along_axis(s, order, 1) > -np.inf, order, -1)
        return np.take_along_axis(s, order, 1), ids

    q = np.arange(n_q, dtype=np.float32)[:, None]
    golds = [[int(g) for g in rng.integers(0, n, size=rng.integers(0, 4))] + ([None] if i % 4 == 0 else [])
             for i in range(n_q)]
    golds[1] = [golds[1][0], golds[1][0]] if golds[1] else [5, 5]  # one gold twice
    exclude = [[int(e) for e in rng.integers(0, n, size=rng.integers(0, 3))] for _ in range(n_q)]
    for i in range(2, n_q, 3):  # a gold at the top that the search misses: added with its own score
        golds[i] = [7] + golds[i]
        exclude[i] = [e for e in exclude[i] if e != 7]
        full[i, 7], missed[i, 7] = 0.05, True
    ranks = [[None if g is None or g in exclude[i] else 1 + int((full[i] > full[i, g]).sum()) for g in golds[i]]
             for i in range(n_q)]

    def gold_score(i, g):
        return float(full[i, g])

    got = top_k_by_rule(search, q, golds, exclude, ranks, k, n=n, tol=tol, gold_score=gold_score)
    want = _naive_top_k_by_rule(search, q, golds, exclude, ranks, k, n=n, tol=tol, gold_score=gold_score)
    assert got == want
    assert any(g in ids for (ids, _), gs, m in zip(got, golds, missed) for g in gs if g is not None and m[g])


@pytest.mark.parametrize("similarity", ["cosine", "dot", "l2"])
def test_pair_scores_are_a_faiss_search_of_one_query_over_its_rows(similarity):
    """The rule the listed scores keep: each is what faiss's flat search reports for that query over its found rows
    (bit for bit), whatever the other rows and queries; -1 ids score -inf."""
    import faiss

    from probekit.index_rank import pair_scores, prepare

    rng = np.random.default_rng(3)
    y = prepare(_vectors(rng, 300, 48, twins=20), similarity)
    q = prepare(rng.standard_normal((25, 48)).astype(np.float32), similarity)
    ids = rng.integers(0, 300, size=(25, 12))
    ids[::4, -3:] = -1
    got = pair_scores(q, y, ids, similarity)
    metric = faiss.METRIC_L2 if similarity == "l2" else faiss.METRIC_INNER_PRODUCT
    for i in range(len(q)):
        pos = np.flatnonzero(ids[i] >= 0)
        dist, loc = faiss.knn(q[i:i + 1], y[ids[i, pos]], len(pos), metric)
        want = np.full(ids.shape[1], -np.inf, dtype=np.float32)
        want[pos[loc[0]]] = -dist[0] if similarity == "l2" else dist[0]
        assert got[i].tobytes() == want.tobytes(), (similarity, i)


def test_search_width_leaves_room_for_excluded_candidates():
    assert search_width(10, [[1, 2], []], 1000) == 20
    assert search_width(10, [], 5) == 5


def _rank_tiny(model, dataset, **kw):
    from probekit.bench import runner

    run = runner.run_benchmark(model, dataset, probe="retrieval", vocab="heads+tails", k=5, save=False, **kw)
    return [(r.query.id, r.ids, r.gold_ranks) for r in run.rankings()], run


def test_a_cached_model_ranks_from_the_cache_without_loading(tiny_encoder_dir, tiny_encoder, tiny_dataset):
    """The loaded model fills the cache; a proxy (memos cleared, as in a new process) gives the same rankings from
    the disk cache, the weights never loaded."""
    from probekit import index
    from probekit.bench.identity import CachedModel

    loaded = tiny_encoder
    want, _ = _rank_tiny(loaded, tiny_dataset)
    index.clear_memo()
    cold = CachedModel.lazy(str(tiny_encoder_dir), "cpu")
    assert isinstance(cold, CachedModel)
    assert (cold.source, cold.revision, cold.num_layers, cold.hidden_size, cold.mask_token, str(cold.device)) == (
        loaded.source, loaded.revision, loaded.num_layers, loaded.hidden_size, loaded.mask_token, str(loaded.device))
    assert cold.describe() == loaded.describe()
    got, _ = _rank_tiny(cold, tiny_dataset)
    assert got == want and not cold.is_loaded  # the loaded model's vectors were cached under the same keys

    index.clear_memo()
    warm = CachedModel.lazy(str(tiny_encoder_dir), "cpu")
    got, _ = _rank_tiny(warm, tiny_dataset, options={"exclude_subject": True})
    want_ex, _ = _rank_tiny(loaded, tiny_dataset, options={"exclude_subject": True})
    assert got == want_ex  # excluded names: the ranking check reads the tokenizer, which loads the model


def test_a_missing_vector_loads_the_model_and_ranks_as_before(tiny_encoder_dir, tiny_encoder, tiny_dataset):
    from probekit import cache, index
    from probekit.bench.identity import CachedModel

    lazy = CachedModel.lazy(str(tiny_encoder_dir), "cpu")
    got, _ = _rank_tiny(lazy, tiny_dataset)  # nothing cached: the model is loaded for the encoding pass
    assert lazy.is_loaded
    index.clear_memo()
    for f in cache.folder().glob("*.npy"):
        f.unlink()
    want, _ = _rank_tiny(tiny_encoder, tiny_dataset)
    assert got == want


def test_a_model_with_a_head_is_loaded_as_before(tiny_mlm_dir):
    from probekit.bench.identity import CachedModel

    model = CachedModel.lazy(str(tiny_mlm_dir), "cpu")
    assert isinstance(model, models.LoadedModel) and model.has_mlm


def test_warm_cli_bench_prints_the_same_without_loading(tiny_encoder_dir, tmp_path, capsys, monkeypatch):
    from probekit import cli, index

    triples = tmp_path / "t.csv"
    triples.write_text("subject,relation,object\naspirin,may_treat,pain\nibuprofen,may_treat,fever\n"
                       "warfarin,may_prevent,stroke\nstatin,may_prevent,heart attack\n")
    cmd = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(triples),
           "--format", "json", "--quiet", "--k", "3"]
    loads = []
    real_load = models.load

    def counted(*a, **kw):
        loads.append(a)
        return real_load(*a, **kw)

    monkeypatch.setattr(models, "load", counted)
    assert cli.main(cmd) == 0
    cold = json.loads(capsys.readouterr().out)
    assert len(loads) == 1  # cold: the encoding pass needed the weights
    index.clear_memo()
    assert cli.main(cmd) == 0
    warm = json.loads(capsys.readouterr().out)
    assert len(loads) == 1  # warm: every vector was cached
    cold.pop("seconds"), warm.pop("seconds")
    assert warm == cold


def test_a_warm_retrieval_bench_never_imports_torch(tiny_encoder_dir, tmp_path, capsys):
    """torch is imported where it is first used (probekit.lazy): building the command line (every probe's flags)
    and ranking cached vectors need none of it. A new Python (this test's settings in its environment) says."""
    import subprocess
    import sys

    from probekit import cli

    triples = tmp_path / "t.csv"
    triples.write_text("subject,relation,object\naspirin,may_treat,pain\nibuprofen,may_treat,fever\n"
                       "warfarin,may_prevent,stroke\nstatin,may_prevent,heart attack\n")  # query sets: cached
    cmd = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(triples),
           "--format", "json", "--quiet", "--k", "2"]
    assert cli.main(cmd) == 0  # cold, here: every name and query encoded and cached
    want = json.loads(capsys.readouterr().out)
    code = ("import sys\nimport probekit.probes, probekit.bench.runner\n"
            "from probekit.cli.main import build_parser, main\n"
            "build_parser('bench')\nparser_torch = 'torch' in sys.modules\n"
            f"assert main({cmd!r}) == 0\nprint(parser_torch, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    *printed, imported = out.stdout.strip().splitlines()
    assert imported == "False False"  # after the parser, after the warm run
    got = json.loads("\n".join(printed))
    want.pop("seconds"), got.pop("seconds")
    assert got == want


def test_the_device_a_model_identity_records_is_the_one_a_load_picks(monkeypatch):
    """``device_name`` decides as ``pick_device`` does (text, torch asked only where a GPU may be present)."""
    from probekit.errors import ModelLoadError

    for prefer in (None, "auto", "cpu"):
        name = models.device_name(prefer)
        assert name == str(models.pick_device(prefer)) and name.type == models.pick_device(prefer).type
    assert models.DeviceName("cuda:1").type == "cuda"
    monkeypatch.setattr(models, "gpu_possible", lambda: True)  # torch is asked: the same answer
    assert models.device_name() == str(models.pick_device())
    with pytest.raises(ModelLoadError, match="unknown device"):
        models.device_name("tpu")


def test_inference_mode_applies_when_called():
    import torch

    from probekit.lazy import inference_mode

    @inference_mode
    def inside(x):
        """Doc kept."""
        return torch.is_inference_mode_enabled(), x

    assert inside(3) == (True, 3) and not torch.is_inference_mode_enabled()
    assert inside.__doc__ == "Doc kept."


def test_the_parser_is_built_for_the_chosen_command_only():
    from probekit.cli.main import build_parser

    parser = build_parser("runs")
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices["runs"]._actions[1:]  # runs has its own flags
    assert [a.dest for a in sub.choices["bench"]._actions] == ["help"]  # bench: listed by name only
