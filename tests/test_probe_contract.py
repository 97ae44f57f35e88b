"""The probe contract, checked for every probe in the registry (huggingface/evaluate's habit): nothing here names a
probe, so a newly registered probe is held to the same rules with no change to this file.

The rules (``probekit.probes.base``):
- ``rank`` returns one :class:`~probekit.types.Ranking` per query, in order, at most k answers, best first, a gold
  rank per gold; a ranked probe lists candidates (``names == candidates.names[ids]``), and a gold's rank is
  1 + the number of candidates scoring higher, near-ties settled for the gold (so a listed gold's rank is at most
  its position);
- every common option is honoured by every probe: with ``exclude_subject`` a query is ranked as if its subject
  (every spelling of it) were not a candidate, and open-vocabulary probes drop answers that spell it;
- bad input (k, empty sets, mask-less or empty queries, unknown options, values an option refuses, a model the
  probe cannot probe) is refused with a :class:`~probekit.errors.ProbekitError`;
- ``explain`` gives the same ranking as ``rank``;
- a new probe is one module plus one registration: it gets CLI flags, page widgets and Grid pick entries, and an
  option named like a command's flag is refused with a message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _tiny_causal import save_tiny_gpt2

from probekit import models
from probekit.errors import ProbekitError
from probekit.probes import (
    PROBES,
    Call,
    Excluded,
    Option,
    Probe,
    get_probe,
    probes_for,
    ranking_from_scores,
    register,
    unregister,
)
from probekit.probes.generated import answer_keys
from probekit.types import CandidateSet, Query, normalize_name

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["pain", "fever", "type 2 diabetes", "myocardial infarction", "stroke", "heart attack", "Stroke",
         "polycystic ovary syndrome", "rickets", "insulin", "hypertension", "asthma", "metformin", "aspirin"]
CANDS = CandidateSet.from_names(NAMES)
QUERIES = [
    Query("q1", "metformin", "may_treat", "[X] might treat [Y].", golds=("type 2 diabetes", "not a candidate")),
    Query("q2", "aspirin", "may_prevent", "[X] may prevent [Y] .", golds=("stroke", "heart attack")),
    Query("q3", "", "free", "Vitamin D lack causes [Y].", golds=("rickets",)),
]
TOL = 1e-5
"""Bound on the float noise between two computations of one score (the probes' own tie tolerance is smaller:
``probekit.index.TIE_TOLERANCE`` is 2 float32 ulps of the score's scale)."""
# small settings where a probe has them: the contract does not depend on them, the suite's time does
SMALL = {"n_masks": 2, "beam": 3, "max_new_tokens": 6}



@pytest.fixture(scope="module")
def tiny_t5(tiny_t5_dir):
    return models.load(str(tiny_t5_dir), device="cpu")


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return models.load(str(save_tiny_gpt2(tmp_path_factory.mktemp("contract_gpt2"))), device="cpu")


@pytest.fixture(scope="module")
def test_models(tiny_encoder, tiny_gpt2, tiny_mlm, tiny_t5):
    """One model of each kind the tests build: an encoder, a causal LM, a masked LM, an encoder-decoder."""
    return [tiny_encoder, tiny_gpt2, tiny_mlm, tiny_t5]


def model_for(probe: Probe, test_models):
    found = [m for m in test_models if probe.usable_with(m)]
    assert found, f"no test model can run probe {probe.name!r}: add one of its kind to test_models"
    # a probe that needs a head gets a model with it; else the plainest model that serves
    return found[-1] if (probe.requires_mlm or probe.requires_seq2seq) else found[0]


def small(probe: Probe) -> dict:
    names = {o.name for o in probe.options}
    return {k: v for k, v in SMALL.items() if k in names}


def keys_of(model, names) -> list[str]:
    return answer_keys(model.tokenizer, list(names))


# ---------------------------------------------------------------- the shared Ranking
@pytest.mark.parametrize("name", list(PROBES))
def test_rank_returns_the_shared_ranking(name, test_models):
    probe = get_probe(name)
    model = model_for(probe, test_models)
    k = len(NAMES)
    rankings = probe.rank(model, QUERIES, CANDS, k=k, **small(probe))
    assert len(rankings) == len(QUERIES)
    for q, r in zip(QUERIES, rankings):
        assert r.query == q and 0 < r.k <= k and len(r.names) == len(r.scores) == r.k
        assert len(r.gold_ranks) == len(q.golds) and r.n_candidates >= r.k
        assert all(a >= b - TOL for a, b in zip(r.scores, r.scores[1:])), "best first"
        assert all(rank is None or 1 <= rank <= r.n_candidates for rank in r.gold_ranks)
        if r.generated:  # answers the model wrote: ids point at the candidate with the same key, or -1
            cand_keys = keys_of(model, NAMES)
            for i, key in zip(r.ids, keys_of(model, r.names)):
                assert (i == -1 and key not in cand_keys) or cand_keys[i] == key
            assert len(set(keys_of(model, r.names))) == r.k  # merged by answer key
            continue
        assert list(r.names) == [NAMES[i] for i in r.ids] and len(set(r.ids)) == r.k == len(NAMES)
        score = dict(zip(r.names, r.scores))
        for gold, rank in zip(q.golds, r.gold_ranks):
            if gold not in NAMES:
                assert rank is None
                continue
            assert rank <= list(r.names).index(gold) + 1  # ties favour the gold
            assert rank >= 1 + sum(s > score[gold] + TOL for s in r.scores)  # everything clearly better is above


@pytest.mark.parametrize("name", list(PROBES))
def test_k_cuts_the_list_and_keeps_the_gold_ranks(name, test_models):
    probe = get_probe(name)
    model = model_for(probe, test_models)
    full = probe.rank(model, QUERIES, CANDS, k=len(NAMES), **small(probe))
    top2 = probe.rank(model, QUERIES, CANDS, k=2, **small(probe))
    for a, b in zip(full, top2):
        assert b.k <= 2
        if not b.generated:  # (an open-vocabulary probe may search differently for another k, e.g. a beam of k)
            assert b.k == 2 and b.gold_ranks == a.gold_ranks
            assert b.scores == pytest.approx(a.scores[:2], abs=TOL)


# ---------------------------------------------------------------- common options, honoured by every probe
def _subject_the_model_answers(probe, model, query):
    """``query`` rewritten so that its subject is the answer the model ranks first, with the prompt unchanged
    (the subject written into the template): whatever the model, its favourite answer is the subject."""
    top = probe.rank(model, [query], CANDS, k=len(NAMES), **small(probe))[0]
    assert top.names, "the probe gave no answer to exclude"
    favourite, runner_up = top.names[0], (top.names[1] if top.k > 1 else "no such answer")
    template = query.template.replace("[X]", query.subject)
    return Query("subj", favourite, query.relation, template, golds=(favourite, runner_up))


@pytest.mark.parametrize("name", list(PROBES))
def test_exclude_subject_is_honoured(name, test_models):
    """exclude_subject=True ranks a query as if its subject were not a candidate: off, the model answers its subject
    first; on, the subject and every spelling of it are gone, the other answers keep their order, a gold that is
    the subject has no rank and another gold moves up by at most the number of spellings removed."""
    probe = get_probe(name)
    model = model_for(probe, test_models)
    q = _subject_the_model_answers(probe, model, QUERIES[1])
    k = len(NAMES)
    off = probe.rank(model, [q], CANDS, k=k, exclude_subject=False, **small(probe))[0]
    on = probe.rank(model, [q], CANDS, k=k, exclude_subject=True, **small(probe))[0]
    assert probe.rank(model, [q], CANDS, k=k, **small(probe))[0].names == off.names  # off is the default
    assert off.names[0] == q.subject and off.gold_ranks[0] == 1
    gone = {normalize_name(q.subject)} | {normalize_name(n) for n in NAMES if normalize_name(n) ==
                                          normalize_name(q.subject)}
    gone_keys = set(keys_of(model, [q.subject]))
    spells = (lambda n: normalize_name(n) in gone) if not off.generated else (
        lambda n: keys_of(model, [n])[0] in gone_keys)
    assert on.names != off.names and not any(spells(n) for n in on.names)
    kept = [n for n in off.names if not spells(n)]
    assert list(on.names[:len(kept)]) == kept  # the others keep their order
    removed = off.k - len(kept)
    assert on.gold_ranks[0] is None
    if off.gold_ranks[1] is not None:
        assert off.gold_ranks[1] - removed <= on.gold_ranks[1] <= off.gold_ranks[1]
    if not off.generated:
        assert on.n_candidates == len(NAMES) - removed


def test_exclude_subject_when_an_mlm_predicts_the_subject(tiny_mlm_dir, tmp_path):
    """A masked LM whose output bias favours the subject's word piece answers 'stroke' to 'Stroke may cause [MASK].'
    with every MLM probe; exclude_subject=True leaves every spelling of it out of the answers."""
    import shutil

    from transformers import BertForMaskedLM

    mlm = BertForMaskedLM.from_pretrained(tiny_mlm_dir)
    tok_files = [p for p in Path(tiny_mlm_dir).iterdir() if "tok" in p.name or p.name == "vocab.txt" or
                 "special" in p.name]
    with torch.no_grad():
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tiny_mlm_dir)
        mlm.cls.predictions.bias[tok.convert_tokens_to_ids("stroke")] += 50.0
    mlm.save_pretrained(tmp_path)
    for p in tok_files:
        shutil.copy(p, tmp_path / p.name)
    model = models.load(str(tmp_path), device="cpu")
    q = Query("s", "Stroke", "may_cause", "[X] may cause [Y].", golds=("stroke", "heart attack"))
    mlm_probes = [n for n in probes_for(model) if get_probe(n).requires_mlm]
    assert mlm_probes
    for name in mlm_probes:
        probe = get_probe(name)
        off = probe.rank(model, [q], CANDS, k=5, **small(probe))[0]
        on = probe.rank(model, [q], CANDS, k=5, exclude_subject=True, **small(probe))[0]
        assert normalize_name(off.names[0]) == "stroke", name
        assert "stroke" not in {normalize_name(n) for n in on.names} and on.gold_ranks[0] is None, name


# ---------------------------------------------------------------- bad input
BAD_CALLS = [
    (dict(k=0), "k must be a positive integer"),
    (dict(k=-2), "k must be a positive integer"),
    (dict(k=2.5), "k must be a positive integer"),
    (dict(k=True), "k must be a positive integer"),
    (dict(queries=[Query("e", "", "r", "[Y]")]), "empty apart from the mask"),
    (dict(queries=[Query("e", "", "r", " [Y] . ")]), "empty apart from the mask"),
    (dict(queries=[Query("m", "aspirin", "r", "[X] treats pain")]), "no object slot"),
    (dict(queries=[]), "no query given"),
    (dict(candidates=CandidateSet.from_names([])), "candidate set is empty"),
    (dict(options={"colour": "red"}), "unknown option 'colour'"),
    (dict(options={"exclude_subject": "yes"}), "exclude_subject"),
]


@pytest.mark.parametrize("call, match", BAD_CALLS, ids=[m for _, m in BAD_CALLS])
@pytest.mark.parametrize("name", list(PROBES))
def test_bad_input_is_refused_with_a_message(name, test_models, call, match):
    probe = get_probe(name)
    model = model_for(probe, test_models)
    args = {"queries": QUERIES[:1], "candidates": CANDS, "k": 3, "options": {}, **call}
    with pytest.raises(ProbekitError, match=match):
        probe.rank(model, args["queries"], args["candidates"], k=args["k"], **args["options"])


def _refused_values(o: Option) -> list:
    """Values ``o`` must refuse, from its own declaration: outside its choices, of another type, below its minimum."""
    if o.choices:
        return ["not a choice", 12345]
    out: list = [object()]
    if o.value_type is int:
        out += ["3", 2.5, True] + ([o.minimum - 1] if o.minimum is not None else [])
    elif o.value_type is bool:
        out += ["yes", 1]
    return out


@pytest.mark.parametrize("name", list(PROBES))
def test_every_option_refuses_what_it_does_not_take(name, test_models):
    probe = get_probe(name)
    model = model_for(probe, test_models)
    for o in probe.options:
        for value in _refused_values(o):
            with pytest.raises(ProbekitError, match=o.name):
                probe.rank(model, QUERIES[:1], CANDS, k=3, **{o.name: value})


@pytest.mark.parametrize("name", list(PROBES))
def test_a_model_the_probe_cannot_probe_is_refused(name, test_models):
    probe = get_probe(name)
    for model in test_models:
        assert probe.usable_with(model) == (name in probes_for(model))
        if not probe.usable_with(model):
            with pytest.raises(ProbekitError, match=f"probe {name!r} needs"):
                probe.rank(model, QUERIES[:1], CANDS, k=3)


# ---------------------------------------------------------------- explain
@pytest.mark.parametrize("name", list(PROBES))
def test_explain_gives_the_ranking_rank_gives(name, test_models):
    probe = get_probe(name)
    model = model_for(probe, test_models)
    for exclude in (False, True):
        ranked = probe.rank(model, QUERIES[1:2], CANDS, k=4, exclude_subject=exclude, **small(probe))[0]
        explained, explanation = probe.explain(model, QUERIES[1], CANDS, k=4, exclude_subject=exclude,
                                               **small(probe))
        assert explained.names == ranked.names and explained.gold_ranks == ranked.gold_ranks
        assert explained.scores == pytest.approx(ranked.scores, abs=TOL)
        if explanation is not None:  # tables any page can draw
            assert explanation.title and explanation.default in explanation.views
            assert all(isinstance(row, dict) for rows in explanation.views.values() for row in rows)


# ---------------------------------------------------------------- the runner's hooks
@pytest.mark.parametrize("name", list(PROBES))
def test_resolve_and_answers_per_query_describe_the_rankings(name, test_models):
    """The runner's hooks are methods of every probe: ``resolve`` gives every option back (idempotent, its input
    untouched), and ``answers_per_query`` (recorded with a stored run) is the ``depth`` of the rankings ``rank``
    returns with those options, for every choice of every option (ranked once per distinct depth)."""
    probe = get_probe(name)
    model = model_for(probe, test_models)
    variants = [{}] + [{o.name: c} for o in probe.options for c in o.choices if c != o.default]
    ranked: set = set()
    for extra in variants:
        opts = probe.checked_options({**small(probe), **extra})
        given = dict(opts)
        resolved = probe.resolve(opts)
        assert opts == given and set(resolved) == set(opts) and probe.resolve(resolved) == resolved
        depth = probe.answers_per_query(opts)
        assert depth is None or (isinstance(depth, int) and depth >= 1), depth
        if depth in ranked:
            continue
        ranked.add(depth)
        r = probe.rank(model, QUERIES[:1], CANDS, k=len(NAMES), **{**small(probe), **extra})[0]
        assert r.depth == depth and (depth is None or r.k <= depth), (extra, r.depth, depth)


def test_the_hooks_default_to_options_unchanged_and_no_limit():
    probe = Probe(name="plain", requires_mlm=False)
    opts = {"exclude_subject": True}
    assert probe.resolve(opts) == opts and probe.resolve(opts) is not opts
    assert probe.answers_per_query(opts) is None


# ---------------------------------------------------------------- a new probe is one module
class ToyProbe(Probe):
    """Ranks names by length: short (or long) first, plus a bonus for names starting with ``letter``."""

    def _rank(self, model, queries, candidates, call: Call, *, longest, letter, bonus, chunk, memo):
        lengths = np.array([len(n) for n in candidates.names], dtype=np.float32)
        scores = (lengths if longest else -lengths) + np.array(
            [bonus if n.startswith(letter) else 0 for n in candidates.names], dtype=np.float32)
        out = [ranking_from_scores(q, candidates, scores, call.k, excluded=ex) for q, ex in zip(queries, call.excluded)]
        if call.progress:
            call.progress(len(queries), len(queries), "scoring")
        return out


TOY = ToyProbe(name="toy", requires_mlm=False, description="names by length (a test probe)", options=(
    Option("longest", True, (False, True), "long names first"),
    Option("letter", "a", ("a", "p", "s"), "names starting with this letter get the bonus"),
    Option("bonus", 3, (), "score bonus", type=int, minimum=0),
    Option("chunk", 7, (), "an advanced knob", advanced=True, minimum=1),
    Option("memo", None, (), "free text", type=str),
))


@pytest.fixture
def toy_probe():
    """What probes/__init__.py does for a new probe: one registration."""
    register(TOY)
    yield TOY
    unregister(TOY.name)


def test_new_probe_gets_cli_flags_and_runs_through_the_runner(toy_probe, capsys, tiny_encoder_dir, tmp_path):
    import json

    from conftest import TINY_TRIPLES

    from probekit import cli
    from probekit.bench import runs
    from probekit.cli.main import build_parser
    from probekit.datasets import triples

    args = build_parser("bench").parse_args(["bench", "--probe", "toy", "--no-longest", "--letter", "p",
                                             "--bonus", "5", "--chunk", "2"])
    assert (args.longest, args.letter, args.bonus, args.chunk) == (False, "p", 5, 2)  # a True default switched off
    facts = tmp_path / "facts.csv"
    facts.write_text(TINY_TRIPLES)
    base = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(facts), "--quiet",
            "--format", "json", "--probe", "toy", "--save", "--k", "3"]
    assert cli.main([*base, "--no-longest", "--bonus", "0"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["probe"] == "toy" and out["options"] == {"longest": False, "bonus": 0} and out["n_queries"] == 8
    meta = runs.get_run(out["run_id"])
    assert meta["probe"] == "toy" and meta["options"]["longest"] is False and meta["options"]["letter"] == "a"
    shortest = min(runs.load_run(out["run_id"]).frame.top_names[0], key=len)
    assert len(runs.load_run(out["run_id"]).frame.top_names[0][0]) == len(shortest)
    with pytest.raises(SystemExit):  # argparse refuses a value outside the Option's choices
        cli.main([*base, "--letter", "x"])
    model = models.load(str(tiny_encoder_dir), device="cpu")
    with pytest.raises(ProbekitError, match="must be one of"):  # and so does the runner, before any work
        runs.run_benchmark(model, triples.load(str(facts)), probe="toy", options={"letter": "x"})


def test_new_probe_widgets_render_on_the_pages(toy_probe, tiny_encoder_dir):
    from apptest_utils import errors, open_app

    at = open_app(model=str(tiny_encoder_dir))
    at.selectbox(key="pk_probe").set_value("toy").run()
    assert errors(at) == []
    assert at.checkbox(key="pk_opt_longest").value is True
    assert at.selectbox(key="pk_opt_letter").options == ["a", "p", "s"]
    assert at.number_input(key="pk_opt_bonus").value == 3
    assert at.number_input(key="pk_opt_toy_chunk").value == 7  # advanced: inside the expander
    assert at.checkbox(key="pk_opt_exclude_subject").value is True  # the Probe page's default
    at.checkbox(key="pk_opt_longest").uncheck().run()
    at.button(key="pk_run").click().run()
    assert errors(at) == []
    top = at.dataframe[0].value
    assert top["entity"].str.len().is_monotonic_increasing
    bench = open_app("benchmark", model=str(tiny_encoder_dir))
    bench.selectbox(key="bm_probe").set_value("toy").run()
    assert errors(bench) == []
    assert bench.selectbox(key="bm_letter").options == ["a", "p", "s"]
    assert bench.checkbox(key="bm_exclude_subject").value is False  # runs keep the reference behaviour


def test_new_probe_is_a_grid_pick_entry(toy_probe):
    from apptest_utils import errors, open_app

    at = open_app("grid")
    assert "toy" in at.multiselect(key="gr_probes").options
    at.multiselect(key="gr_probes").set_value(["toy"]).run()
    assert errors(at) == []
    letters = at.multiselect(key="gr_opt_toy_letter")
    assert letters.options == ["a", "p", "s"] and letters.value == ["a"]
    letters.set_value(["a", "s"]).run()
    at.multiselect(key="gr_opt_toy_longest").set_value([False, True]).run()
    assert errors(at) == []
    assert any("4 cells" in c.value for c in at.caption)  # 2 letters x 2 orders, one model, one dataset


def test_an_option_named_like_a_commands_flag_is_refused(tiny_encoder_dir):
    """Registration refuses it once the command line is in use; a probe registered before is refused when a
    command's parser is built: one line, exit 2, never an argparse traceback."""
    from probekit.cli.main import build_parser

    build_parser("context")  # the CLI is in use in this process: the check runs at registration
    clash = ToyProbe(name="clash", requires_mlm=False, options=(Option("seed", 1, (), "clashes with --seed"),))
    with pytest.raises(ProbekitError, match="option 'seed' of probe 'clash' clashes with '--seed' of command"):
        register(clash)
    assert "clash" not in PROBES
    code = ("import sys\n"
            "from probekit.probes import Option, Probe, register\n"
            "register(Probe(name='clash', requires_mlm=False, options=(Option('seed', 1),)))\n"
            "from probekit.cli.main import main\n"
            "sys.exit(main(['context', 'single', '--help']))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "seed" in res.stderr and "rename the option" in res.stderr


def test_registry_rules():
    with pytest.raises(ProbekitError, match="registered under another name"):
        PROBES["other"] = TOY
    with pytest.raises(ProbekitError, match="must be a probekit.probes.Probe"):
        PROBES["x"] = object()
    shared = next(o for p in PROBES.values() for o in p.options if o.value_type is int)
    wrong = ToyProbe(name="wrongtype", requires_mlm=False, options=(Option(shared.name, "text"),))
    with pytest.raises(ProbekitError, match=f"option {shared.name!r} of probe 'wrongtype' is a str"):
        register(wrong)
    assert "wrongtype" not in PROBES and "x" not in PROBES


def test_a_probe_that_breaks_the_contract_fails_loudly(tiny_encoder):
    """A probe that ignores the call's exclusions is caught by Probe.rank, not silently trusted."""
    from probekit.probes import ProbeContractError

    class Forgetful(ToyProbe):
        def _rank(self, model, queries, candidates, call, **opts):
            return super()._rank(model, queries, candidates, Call(k=call.k, excluded=tuple(
                Excluded() for _ in queries)), **opts)

    probe = Forgetful(name="forgetful", requires_mlm=False, options=TOY.options)
    q = Query("s", "stroke", "r", "[X] may cause [Y].", golds=("pain",))
    assert probe.rank(tiny_encoder, [q], CANDS, k=len(NAMES))[0].names  # off: nothing to forget
    with pytest.raises(ProbeContractError, match="excluded"):
        probe.rank(tiny_encoder, [q], CANDS, k=len(NAMES), exclude_subject=True)
