"""The likelihood probe's ``lm-pub-quiz`` preset against BEAR's own package, ``lm-pub-quiz`` (Wiland, Ploner & Akbik
2024), driven with its defaults on the same models and the same filled-in statements.

lm-pub-quiz's defaults (its 0.3.3 source, ``lm_pub_quiz/evaluators/``): "reduction ``sum``" of the token
log-probabilities (``base.py`` ``default_reduction = "sum"``); the whole statement scored
(``conditional_score=False``), special tokens never; the filled-in text's first character upper-cased
(``capitalize=True``: ``text[0].upper() + text[1:]``); causal LMs read a BOS first (``ensure_bos_token_added=True``);
masked LMs score the ``within_word_l2r`` pseudo-log-likelihood (``pll_metric="within_word_l2r"``: each scored
token is masked together with the later tokens of its own word). The rule checked here: with
``preset='lm-pub-quiz'`` every answer's score is within 1e-4 of lm-pub-quiz's and the ranking is identical; and
without the preset the scores differ (so the preset's options are what makes them agree).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from _tiny_causal import save_tiny_gpt2

from probekit import cli, models
from probekit.errors import ProbekitError
from probekit.probes import get_probe
from probekit.probes.likelihood import PRESETS, apply_preset
from probekit.types import CandidateSet, Query

TOL = 1e-4
PROBE = get_probe("likelihood")

# A small BEAR-like set: lower-case statements (capitalisation changes their first token) and answers that a
# WordPiece vocabulary splits into several pieces ("statins" = statin ##s: within_word_l2r differs from original).
BEAR_LIKE = [
    (Query("prevents:0", "aspirin", "prevents", "[X] may prevent [Y].", ("stroke",)),
     ["stroke", "strokes", "heart attack", "rickets", "fever"]),
    (Query("treated_by:0", "statins", "treated_by", "[Y] can treat [X].", ("hypertension",)),
     ["hypertension", "kidney disease", "asthma", "infections", "statins"]),
    (Query("causes:0", "vitamin d lack", "causes", "[X] causes [Y].", ("rickets",)),
     ["rickets", "fever", "pain", "lung cancer", "kidneys"]),
]


@pytest.fixture(scope="module")
def lpq():
    return pytest.importorskip("lm_pub_quiz", reason="lm-pub-quiz (BEAR's package) is not installed")


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return models.load(str(save_tiny_gpt2(tmp_path_factory.mktemp("lmpq_gpt2"))), device="cpu")


@pytest.fixture(scope="module")
def toy_bert(toy_bert_dir):
    return models.load(str(toy_bert_dir), device="cpu")


def lmpq_scores(lpq, model, kind: str) -> list[np.ndarray]:
    """lm-pub-quiz's scores of :data:`BEAR_LIKE` with its defaults (nothing but the model, its tokenizer and the
    device passed; ``evaluate_instance`` needs a reduction: its default, ``sum``)."""
    net = model.causal if kind == "CLM" else model.mlm
    ev = lpq.Evaluator.from_model(net, model_type=kind, tokenizer=model.tokenizer, device="cpu")
    reduction = ev.default_reduction
    return [np.array(ev.evaluate_instance(template=q.template, answers=names, subject=q.subject,
                                          reduction=reduction, batch_size=8)) for q, names in BEAR_LIKE]


@pytest.mark.parametrize("kind", ["CLM", "MLM"])
def test_preset_scores_and_ranks_as_lm_pub_quiz_defaults(lpq, kind, tiny_gpt2, toy_bert):
    model = tiny_gpt2 if kind == "CLM" else toy_bert
    refs = lmpq_scores(lpq, model, kind)
    differ = 0.0
    for (q, names), ref in zip(BEAR_LIKE, refs):
        cands = CandidateSet.from_names(names)
        assert list(cands.names) == names
        gaps = np.diff(np.sort(ref))
        assert gaps.min() > 2 * TOL, (q.id, ref)  # no near-ties: the ranking is one order
        r = PROBE.rank(model, [q], cands, k=len(names), preset="lm-pub-quiz", batch_size=3)[0]
        got = dict(zip(r.ids, r.scores))
        np.testing.assert_allclose([got[i] for i in range(len(names))], ref, atol=TOL, rtol=0, err_msg=q.id)
        assert list(r.ids) == list(np.argsort(-ref, kind="stable")), q.id
        plain = PROBE.rank(model, [q], cands, k=len(names))[0]
        plain_scores = dict(zip(plain.ids, plain.scores))
        differ = max(differ, max(abs(plain_scores[i] - ref[i]) for i in range(len(names))))
    assert differ > 100 * TOL  # probekit's defaults (no capitalisation, the original PLL) are another reading


def test_preset_replaces_the_options_it_names_and_is_stored_with_them():
    """A preset's values replace the options it names, the others are kept; an unknown preset is one line."""
    assert set(PRESETS["lm-pub-quiz"]) <= {o.name for o in PROBE.options}
    assert PROBE.resolve(PROBE.checked_options({"preset": "lm-pub-quiz", "reduction": "mean", "pll": "original",
                                                 "batch_size": 4})) == {
        **PROBE.checked_options({}), "preset": "lm-pub-quiz", "reduction": "sum", "span": "statement",
        "capitalize": True, "pll": "within_word_l2r", "batch_size": 4}
    assert apply_preset({"reduction": "mean"}) == {"reduction": "mean"}
    with pytest.raises(ProbekitError, match=r"unknown preset 'lm-pub-qiuz'; did you mean 'lm-pub-quiz'"):
        apply_preset({"preset": "lm-pub-qiuz"})


def test_cli_takes_the_preset_and_a_run_records_what_it_set(tiny_gpt2, tiny_dataset, tmp_path, capsys):
    """``--preset lm-pub-quiz`` is a flag of ``probekit bench`` (generated from the options; its help lists it); a
    run's options record the preset and the values it set; another probe refuses it in one line (rc 2)."""
    from conftest import TINY_TRIPLES

    from probekit.bench.runner import run_benchmark

    run = run_benchmark(tiny_gpt2, tiny_dataset, probe="likelihood", options={"preset": "lm-pub-quiz"},
                        vocab="heads+tails", k=3, save=False, reuse=False)
    assert {k: run.meta["options"][k] for k in ("preset", "capitalize", "pll", "reduction", "span")} == {
        "preset": "lm-pub-quiz", "capitalize": True, "pll": "within_word_l2r", "reduction": "sum",
        "span": "statement"}
    path = tmp_path / "facts.csv"
    path.write_text(TINY_TRIPLES)
    common = ["bench", "--model", tiny_gpt2.source, "--dataset", "triples", "--data-dir", str(path),
              "--format", "json", "--quiet", "--k", "3", "--vocab", "heads+tails", "--probe"]
    assert cli.main([*common, "likelihood", "--preset", "lm-pub-quiz"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["options"] == {"preset": "lm-pub-quiz"}
    assert out["micro"] == {m: v for m, v in run.summary()["micro"].items() if m in out["micro"]}
    assert cli.main([*common, "retrieval", "--preset", "lm-pub-quiz"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "preset" in err[0] and "lm-pub-quiz" in err[0], err
    with pytest.raises(SystemExit):
        cli.main(["bench", "--help"])
    assert "lm-pub-quiz" in capsys.readouterr().out
