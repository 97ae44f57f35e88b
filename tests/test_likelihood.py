"""The likelihood probe against an independent reference: BEAR's definition (Wiland, Ploner & Akbik 2024) written
here one statement at a time, with no batching, no shared prefix and the model's full output.

BEAR: the score of an answer is the log-likelihood of the statement with the answer filled in; for a causal LM
the sum over its tokens of log P(w_t | w_<t) (a BOS the tokenizer does not add itself is put first), for a masked
LM the pseudo-log-likelihood (each token masked in turn, Salazar et al. 2020), special tokens never scored;
``mean`` divides by the number of scored tokens; ``answer`` scores only the tokens overlapping the answer.
The probe's rule is ``scores within 1e-4`` of the reference and the same ranking (ties: the shared tie rule).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _tiny_causal import save_tiny_gpt2, save_tiny_llama, save_tiny_mistral
from _tiny_seq2seq import save_tiny_bart

from probekit import models
from probekit.datasets import load_dataset
from probekit.errors import ModelLoadError, ProbekitError
from probekit.probes import get_probe
from probekit.probes.likelihood import statement
from probekit.probes.likelihood_scoring import Encoded, causal_logprobs, causal_logprobs_many
from probekit.types import CandidateSet, Query

TOL = 1e-4
PROBE = get_probe("likelihood")



@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return models.load(str(save_tiny_gpt2(tmp_path_factory.mktemp("lk_gpt2"))), device="cpu")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    return models.load(str(save_tiny_llama(tmp_path_factory.mktemp("lk_llama"))), device="cpu")


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory):
    return models.load(str(save_tiny_bart(tmp_path_factory.mktemp("lk_bart"))), device="cpu")


@pytest.fixture(scope="module")
def demo():
    return load_dataset("demo")


def fifty(demo) -> list[tuple[Query, CandidateSet]]:
    """50 demo queries (every relation), each with its relation's answer set (BEAR's multiple choice)."""
    qs = demo.queries[::2][:50]
    assert len(qs) == 50
    return [(q, demo.candidates("relation", q.relation)) for q in qs]


# ---------------------------------------------------------------- the reference, one statement at a time
def _tokens(model, text: str, answer: tuple[int, int], span: str) -> tuple[list[int], list[bool]]:
    tok = model.tokenizer
    enc = tok(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    ids, offsets, special = enc["input_ids"], enc["offset_mapping"], enc["special_tokens_mask"]
    if model.is_causal and tok.bos_token_id is not None and ids[0] != tok.bos_token_id:
        ids, offsets, special = [tok.bos_token_id] + ids, [(0, 0)] + offsets, [1] + special
    a, b = answer
    keep = [not s and (span == "statement" or (e > a and s0 < b and e > s0)) for (s0, e), s in zip(offsets, special)]
    return ids, keep


def naive_score(model, query: Query, answer: str, *, reduction="sum", span="statement") -> float:
    text, where = statement(query, answer)
    ids, keep = _tokens(model, text, where, span)
    logps = []
    with torch.no_grad():
        if model.is_causal:
            logp = model.causal(input_ids=torch.tensor([ids])).logits[0].log_softmax(-1)  # (seq, vocab)
            logps = [float(logp[t - 1, ids[t]]) for t in range(1, len(ids)) if keep[t]]
        else:  # this statement's masked copies (one per scored token) in one forward, full logits, no padding
            where = [t for t in range(len(ids)) if keep[t]]
            copies = torch.tensor([ids] * len(where))  # (copies, seq)
            copies[range(len(where)), where] = model.tokenizer.mask_token_id
            logits = model.mlm(input_ids=copies).logits  # (copies, seq, vocab)
            logps = [float(logits[c, t].log_softmax(-1)[ids[t]]) for c, t in enumerate(where)]
    if not logps:
        return float("-inf")
    return float(np.sum(logps) if reduction == "sum" else np.mean(logps))


def check_against_reference(model, cases, batch_size=7, **opts):
    """``batch_size`` 7: several padded batches per query (masked LMs: per statement's copies)."""
    for q, cands in cases:
        ref = np.array([naive_score(model, q, n, **opts) for n in cands.names])
        r = PROBE.rank(model, [q], cands, k=len(cands), batch_size=batch_size, **opts)[0]
        got = dict(zip(r.ids, r.scores))
        assert np.allclose([got[i] for i in range(len(cands))], ref, atol=TOL, rtol=0), q.id
        # the same ranking: best first by the reference's scores, ties within TOL in either order
        ordered = ref[list(r.ids)]
        assert all(a >= b - TOL for a, b in zip(ordered, ordered[1:])), q.id
        for g, rank in zip(q.golds, r.gold_ranks):
            gi = cands.index_of(g)
            assert rank is None if gi is None else (
                1 + np.sum(ref > ref[gi] + TOL) <= rank <= 1 + np.sum(ref > ref[gi] - TOL) - 0), (q.id, g)


@pytest.mark.parametrize("opts", [{}, {"reduction": "mean"}, {"span": "answer"}])
def test_causal_scores_are_the_chain_rule_one_statement_at_a_time(tiny_gpt2, demo, opts):
    check_against_reference(tiny_gpt2, fifty(demo), **opts)


def test_llama_whose_tokenizer_adds_bos_scores_like_the_reference(tiny_llama, demo):
    check_against_reference(tiny_llama, fifty(demo)[:10])
    check_against_reference(tiny_llama, fifty(demo)[:10], span="answer", reduction="mean")


@pytest.mark.parametrize("window", [6, 250])
def test_a_sliding_window_model_scores_like_the_reference(window, tmp_path, demo):
    """Mistral-style sliding-window attention: with a window shorter than every statement (6 positions) the
    statements are scored whole, since the cache keeps only the window's last keys; with one longer than every
    statement (250) the shared-prefix cache is used. Either way each token sees what it sees in the statement
    run alone."""
    from probekit.probes.likelihood_scoring import attention_window

    model = models.load(str(save_tiny_mistral(tmp_path / "mistral", sliding_window=window)), device="cpu")
    assert attention_window(model.causal) == window
    cases = fifty(demo)[:12]
    lengths = [len(model.tokenizer(statement(q, n)[0])["input_ids"]) for q, c in cases for n in c.names]
    assert min(lengths) > window if window == 6 else max(lengths) <= window
    check_against_reference(model, cases)


@pytest.mark.heavy
def test_masked_scores_are_the_pseudo_log_likelihood_one_copy_at_a_time(tiny_mlm, demo):
    check_against_reference(tiny_mlm, fifty(demo), batch_size=64)


def test_masked_answer_span_and_mean(tiny_mlm, demo):
    check_against_reference(tiny_mlm, fifty(demo)[:8], span="answer", reduction="mean")


def test_without_a_shared_prefix_the_first_token_is_context(tiny_gpt2):
    """Statements sharing no token (no BOS) are scored whole: the first token is never a target."""
    rows = [[5, 6, 7, 8], [9, 6, 7], [10, 11, 12, 13, 14]]
    enc = [Encoded(tuple(r), (False,) + (True,) * (len(r) - 1)) for r in rows]
    got = causal_logprobs(tiny_gpt2.causal, enc, batch_size=2)
    with torch.no_grad():
        for r, lp in zip(rows, got):
            ref = tiny_gpt2.causal(input_ids=torch.tensor([r])).logits[0].log_softmax(-1)
            assert np.isnan(lp[0])
            assert np.allclose(lp[1:], [float(ref[t - 1, r[t]]) for t in range(1, len(r))], atol=TOL)


@pytest.mark.parametrize("model_name", ["tiny_gpt2", "tiny_llama"])
def test_queries_ranked_together_score_like_the_reference(model_name, demo, request):
    """Many queries per call (several per forward pass, prefixes of different lengths left-padded in one batch):
    each query's scores and ranking as the one-statement-at-a-time reference's."""
    model = request.getfixturevalue(model_name)
    by_relation: dict[str, list[Query]] = {}
    for q in demo.queries[:60 if model_name == "tiny_gpt2" else 16]:
        by_relation.setdefault(q.relation, []).append(q)
    for rel, qs in by_relation.items():
        cands = demo.candidates("relation", rel)
        rankings = PROBE.rank(model, qs, cands, k=len(cands), batch_size=7)
        for q, r in zip(qs, rankings):
            ref = np.array([naive_score(model, q, n) for n in cands.names])
            got = dict(zip(r.ids, r.scores))
            assert np.allclose([got[i] for i in range(len(cands))], ref, atol=TOL, rtol=0), q.id
            ordered = ref[list(r.ids)]
            assert all(a >= b - TOL for a, b in zip(ordered, ordered[1:])), q.id


def test_one_batch_mixes_queries_with_different_prefixes_and_one_without(tiny_gpt2):
    """Queries whose shared prefixes differ in length share a batch; a query with no shared prefix is scored
    whole; every token's log-prob equals a full forward over that statement alone."""
    groups = [[[50, 5, 6, 7, 8], [50, 5, 6, 9]],
              [[50, 11, 12, 13, 14, 15, 16, 17], [50, 11, 12, 13, 14, 15, 18], [50, 11, 12, 13, 19, 20, 21, 22, 23]],
              [[30, 31], [32, 33, 34]]]
    enc = [[Encoded(tuple(r), (False,) + (True,) * (len(r) - 1)) for r in g] for g in groups]
    got = causal_logprobs_many(tiny_gpt2.causal, enc, batch_size=4)
    with torch.no_grad():
        for g, lps in zip(groups, got):
            for r, lp in zip(g, lps):
                ref = tiny_gpt2.causal(input_ids=torch.tensor([r])).logits[0].log_softmax(-1)
                assert np.isnan(lp[0])
                assert np.allclose(lp[1:], [float(ref[t - 1, r[t]]) for t in range(1, len(r))], atol=TOL), r


def test_seq2seq_scores_the_statement_given_the_masked_query(tiny_bart):
    """The decoder's likelihood of the statement, the encoder reading the query with BART's <mask>: one statement
    at a time through the model's own loss equals the probe's batched scores."""
    q = Query("q", "aspirin", "may_prevent", "[X] may prevent [Y].", golds=("stroke",))
    cands = CandidateSet.from_names(["stroke", "heart attack", "pain", "type 2 diabetes"])
    r = PROBE.rank(tiny_bart, [q], cands, k=4, batch_size=3)[0]
    tok, s2s = tiny_bart.tokenizer, tiny_bart.seq2seq
    src = tok([q.text("<mask>")], return_tensors="pt")
    for name, score in zip(r.names, r.scores):
        labels = tok([statement(q, name)[0]], return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = s2s(**src, labels=labels).logits[0].log_softmax(-1)  # (len, vocab)
        special = set(tok.all_special_ids)
        ref = sum(float(logits[t, i]) for t, i in enumerate(labels[0].tolist()) if i not in special)
        assert score == pytest.approx(ref, abs=TOL), name


# ---------------------------------------------------------------- bad input
def test_a_model_without_an_lm_head_gets_one_line_naming_its_probes(tiny_encoder):
    q = Query("q", "aspirin", "r", "[X] may prevent [Y].")
    with pytest.raises(ProbekitError) as e:
        PROBE.rank(tiny_encoder, [q], CandidateSet.from_names(["stroke"]), k=1)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("probe 'likelihood' needs") and "it supports 'retrieval'" in msg


def test_a_statement_longer_than_the_context_is_refused_with_its_length(tiny_gpt2):
    q = Query("long", "aspirin", "r", "[X] " + "may prevent " * 200 + "[Y].")
    with pytest.raises(ProbekitError, match=r"query 'long' with the answer 'stroke' is \d+ tokens long, more than "
                                            r"the model's context of 256"):
        PROBE.rank(tiny_gpt2, [q], CandidateSet.from_names(["stroke", "pain"]), k=1)


# ---------------------------------------------------------------- retrieve-then-rerank
def test_rerank_scores_only_the_first_stage_top_n_and_reports_a_dropped_gold(tiny_gpt2, tiny_encoder_dir, demo):
    """Gold ranks are exact within the scored set; a gold the first stage dropped ranks top_n + 1."""
    cands = demo.candidates("heads+tails")
    qs = demo.queries[:6]
    n = 20
    first = get_probe("retrieval").rank(models.load(str(tiny_encoder_dir), device="cpu"), qs, cands, k=n)
    full = PROBE.rank(tiny_gpt2, qs, cands, k=len(cands))
    rr = PROBE.rank(tiny_gpt2, qs, cands, k=n, first_stage="retrieval", first_stage_model=str(tiny_encoder_dir),
                    top_n=n)
    dropped = 0
    for q, f, whole, r in zip(qs, first, full, rr):
        kept = set(f.ids)
        assert set(r.ids) == kept
        score = dict(zip(whole.ids, whole.scores))
        assert [score[i] for i in r.ids] == pytest.approx(list(r.scores), abs=TOL)  # the same scores
        own = dict(zip(r.ids, r.scores))
        for g, rank in zip(q.golds, r.gold_ranks):
            gi = cands.index_of(g)
            if gi not in kept:
                dropped += 1
                assert rank == n + 1
            else:  # the shared tie rule, within the scored set
                assert rank == 1 + sum(own[i] > own[gi] for i in kept)
    assert dropped  # the case is exercised


def _models_held_by_modules() -> list[str]:
    """probekit module globals holding a loaded model (directly or in a dict, list, tuple or set)."""
    import sys

    held = []
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] != "probekit":
            continue
        for attr, value in list(vars(module).items()):
            values = value.values() if isinstance(value, dict) else value if isinstance(
                value, (list, tuple, set, frozenset)) else (value,)
            if any(isinstance(v, models.LoadedModel) for v in values):
                held.append(f"{name}.{attr}")
    return held


def test_the_first_stage_model_is_held_by_the_probed_model_and_released_with_it(tmp_path, tiny_encoder_dir,
                                                                                tiny_mlm_dir, demo):
    """No module keeps a model: the first stage's model is the probed model's companion, so whoever holds the
    probed model accounts for it (``in_memory``), a second first-stage model replaces it, and a switch
    (``models.release``) frees it."""
    m = models.load(str(save_tiny_gpt2(tmp_path / "g")), device="cpu")
    qs, cands = demo.queries[:2], demo.candidates("heads+tails")

    def rerank(first):
        return PROBE.rank(m, qs, cands, k=3, first_stage="retrieval", first_stage_model=first, top_n=3)

    rerank(str(tiny_encoder_dir))
    (stage,) = m.companions.values()
    assert stage.id == str(tiny_encoder_dir) and stage.encoder is not None and m.in_memory() == [m, stage]
    rerank(str(tiny_encoder_dir))
    assert m.companion(str(tiny_encoder_dir)) is stage  # loaded once
    assert not _models_held_by_modules()
    rerank(str(tiny_mlm_dir))  # one first stage at a time: the previous one is released
    (other,) = m.companions.values()
    assert other.id == str(tiny_mlm_dir) and stage.encoder is None and m.in_memory() == [m, other]
    assert m.companion(m.id) is m and len(m.companions) == 1  # the probed model itself is no companion
    models.release(m)  # the holder's switch
    assert other.encoder is None and m.companions == {} and m.in_memory() == [m] and m.causal is None


# ---------------------------------------------------------------- models
def test_causal_lm_loads_through_models_load_and_is_released(tmp_path):
    m = models.load(str(save_tiny_gpt2(tmp_path / "g")), device="cpu")
    assert m.is_causal and not m.has_mlm and not m.is_seq2seq and m.describe()["causal"] is True
    assert get_probe("likelihood").usable_with(m) and not get_probe("mask_average").usable_with(m)
    with pytest.raises(ModelLoadError, match="causal .* no MLM head"):
        models.load(str(tmp_path / "g"), device="cpu", mlm=True)
    models.release(m)
    assert m.causal is None and m.encoder is None


def test_registry_names_the_decoder_llms_with_kind_and_size():
    for mid in ("microsoft/biogpt", "stanford-crfm/BioMedLM", "BioMistral/BioMistral-7B", "epfl-llm/meditron-7b",
                "Qwen/Qwen2.5-0.5B"):
        spec = models.REGISTRY[mid]
        assert spec.kind == "causal" and spec.params_b and spec.params_b > 0.1


def test_a_model_that_does_not_fit_is_refused_in_one_line_before_loading():
    with pytest.raises(ModelLoadError) as e:
        models.check_memory("BioMistral/BioMistral-7B", 7.24e9, "float16", torch.device("cuda"), free=12e9)
    assert str(e.value) == ("model 'BioMistral/BioMistral-7B' needs ~17.4 GB in float16; this GPU has 12.0 GB "
                            "free; try PROBEKIT_DTYPE=int8 or a smaller model")
    models.check_memory("m", 1e9, "float16", torch.device("cuda"), free=12e9)  # fits: no error


# ---------------------------------------------------------------- BEAR's own package, where it is installed
@pytest.mark.heavy
@pytest.mark.parametrize("kind", ["CLM", "MLM"])
def test_same_scores_as_lm_pub_quiz(kind, tiny_gpt2, tiny_mlm, demo):
    """BEAR's reference implementation (``lm-pub-quiz``, a dev dependency that is optional here): its ``sum``
    reduction, no capitalisation, the ``original`` PLL for masked LMs (its default is ``within_word_l2r``)."""
    lpq = pytest.importorskip("lm_pub_quiz")
    model = tiny_gpt2 if kind == "CLM" else tiny_mlm
    kw = {"pll_metric": "original"} if kind == "MLM" else {}
    ev = lpq.Evaluator.from_model(model.causal if kind == "CLM" else model.mlm, model_type=kind,
                                  tokenizer=model.tokenizer, device="cpu", capitalize=False, **kw)
    for q, cands in fifty(demo):
        ref = np.array(ev.evaluate_instance(template=q.template, answers=list(cands.names), subject=q.subject,
                                            reduction="sum", batch_size=16))
        r = PROBE.rank(model, [q], cands, k=len(cands))[0]
        got = dict(zip(r.ids, r.scores))
        assert np.allclose([got[i] for i in range(len(cands))], ref, atol=TOL, rtol=0), q.id
        ordered = ref[list(r.ids)]
        assert all(a >= b - TOL for a, b in zip(ordered, ordered[1:])), q.id


# ---------------------------------------------------------------- the Probe page
def test_probe_page_ranks_with_a_causal_lm_and_shows_per_token_log_probs(tmp_path):
    from apptest_utils import errors, open_app

    folder = str(save_tiny_gpt2(tmp_path / "page_gpt2"))
    at = open_app(model=folder)
    assert "likelihood" in at.selectbox(key="pk_probe").options
    at.selectbox(key="pk_probe").set_value("likelihood").run()
    at.slider(key="pk_k").set_value(4)
    at.button(key="pk_run").click().run()
    assert errors(at) == []
    top = at.dataframe[0].value
    assert len(top) == 4 and top["score"].is_monotonic_decreasing
    tokens = at.dataframe[-1].value  # the top answer's statement, token by token
    assert {"token", "log-prob", "scored"} <= set(tokens.columns)
    assert tokens["log-prob"].dropna().sum() == pytest.approx(top["score"].iloc[0], abs=TOL)


def test_cli_defaults_to_the_probes_own_vocabulary(tmp_path, tiny_encoder_dir, demo, capsys):
    """No --vocab: likelihood ranks each relation's answers (BEAR's multiple choice, its ``default_vocab``);
    a probe without one, and a typed query with no relation, get heads+tails; --vocab still wins."""
    import json

    from probekit import cli

    gpt2 = str(save_tiny_gpt2(tmp_path / "gpt2"))

    def run(*argv):
        assert cli.main([*argv, "--dataset", "demo", "--format", "json"]) == 0
        return json.loads(capsys.readouterr().out)

    assert run("bench", "--model", gpt2, "--probe", "likelihood", "--quiet")["vocab"] == "relation"
    assert run("bench", "--model", gpt2, "--probe", "likelihood", "--vocab", "tails", "--quiet")["vocab"] == "tails"
    assert run("bench", "--model", str(tiny_encoder_dir), "--probe", "retrieval", "--quiet")["vocab"] == "heads+tails"
    q = demo.queries[0]
    by_id = run("probe", "--model", gpt2, "--probe", "likelihood", "--query-id", q.id)
    assert by_id["n_candidates"] == len(demo.candidates("relation", q.relation))
    typed = run("probe", "--model", gpt2, "--probe", "likelihood", "--query", "Metformin might treat [MASK].")
    assert typed["n_candidates"] == len(demo.candidates("heads+tails"))


def test_pages_open_on_the_probes_own_vocabulary(tiny_mlm_dir):
    """The Probe and Benchmark pages' Candidates follow the probe as the CLI does (:meth:`Probe.vocab`): picking
    likelihood switches them to each relation's answers (BEAR's multiple choice), switching back to a probe without
    a default gives heads+tails, and a choice the user makes stands until the probe changes."""
    from apptest_utils import errors, open_app

    folder = str(tiny_mlm_dir)  # an MLM takes likelihood and probes without a default vocabulary
    for page, probe_key, vocab_key in ((None, "pk_probe", "pk_vocab"), ("benchmark", "bm_probe", "bm_vocab")):
        at = open_app(page, model=folder)
        names = at.selectbox(key=probe_key).options
        other = next(n for n in names if PROBE.name != n and get_probe(n).default_vocab is None)
        at.selectbox(key=probe_key).set_value(other).run()
        assert at.radio(key=vocab_key).value == "heads+tails", page
        at.selectbox(key=probe_key).set_value(PROBE.name).run()
        assert at.radio(key=vocab_key).value == PROBE.vocab() == "relation", page
        at.radio(key=vocab_key).set_value("tails").run()
        assert at.radio(key=vocab_key).value == "tails", page  # the user's choice stands while the probe does
        at.selectbox(key=probe_key).set_value(other).run()
        assert at.radio(key=vocab_key).value == "heads+tails", page
        assert errors(at) == [], page


def test_a_shared_link_keeps_its_vocabulary():
    """A link that names the candidates opens on them, whatever the probe's default."""
    from apptest_utils import open_app

    at = open_app(query_params={"probe": "retrieval", "vocab": "tails"})
    assert get_probe("retrieval").vocab() == "heads+tails"
    assert at.selectbox(key="pk_probe").value == "retrieval"
    assert at.radio(key="pk_vocab").value == "tails"
