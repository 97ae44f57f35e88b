"""CLI with the open-vocabulary probes: flags generated from their options, stored runs with every option."""

from __future__ import annotations

import json

import pytest

from probekit import cli
from probekit.probes import get_probe


@pytest.fixture
def dirs(toy_bert_dir, tiny_t5_dir):
    return {"bert": str(toy_bert_dir), "t5": str(tiny_t5_dir)}


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_lists_the_probe_flags(capsys):
    with pytest.raises(SystemExit):
        cli.main(["probe", "--help"])
    out = capsys.readouterr().out
    for flag in ("--decoding", "--beam", "--n-masks", "--max-iter", "--max-new-tokens"):
        assert flag in out
    assert "order+order" in out


def test_probe_mask_predict_flags_reach_the_probe(capsys, dirs):
    code, out, err = run(capsys, "probe", "--model", dirs["bert"], "--probe", "mask_predict", "--decoding",
                         "confidence+order", "--beam", "2", "--n-masks", "2", "--query", "aspirin may prevent [MASK].",
                         "--gold", "nothing like it", "--k", "3", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    from probekit import models
    from probekit.types import CandidateSet, parse_free_query

    m = models.load(dirs["bert"], device="cpu")
    q = parse_free_query("aspirin may prevent [MASK].", golds=("nothing like it",))
    want = get_probe("mask_predict").rank(m, [q], CandidateSet.from_names(["x"]), k=3, decoding="confidence+order",
                                          beam=2, n_masks=2)[0]
    assert [t["name"] for t in got["top"]] == list(want.names) and got["gold_ranks"] == [None]
    code, out, err = run(capsys, "probe", "--model", dirs["bert"], "--probe", "mask_predict", "--query",
                         "aspirin may prevent [MASK].", "--gold", "x", "--n-masks", "1", "--beam", "1")
    assert code == 0 and "rank not generated" in out


def test_bench_stores_every_option(capsys, dirs):
    code, out, err = run(capsys, "bench", "--model", dirs["t5"], "--probe", "generative", "--max-new-tokens", "3",
                         "--dataset", "demo", "--relation", "may_treat", "--save", "--quiet", "--format", "json")
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    from probekit.bench import runs

    listed = runs.list_runs()
    opts = json.loads(listed[listed.run_id == run_id].options.iloc[0])
    assert opts == {"beam": None, "max_new_tokens": 3, "batch_size": 16, "max_length": 128, "keep_period": False,
                    "exclude_subject": False}


def test_wrong_model_kind_is_one_error_line(capsys, dirs):
    code, out, err = run(capsys, "probe", "--model", dirs["t5"], "--probe", "mask_predict", "--query", "a [MASK].")
    assert code == 2 and err.count("\n") == 1 and "needs a model with an MLM head" in err
    code, out, err = run(capsys, "probe", "--model", dirs["bert"], "--probe", "generative", "--query", "a [MASK].")
    assert code == 2 and err.count("\n") == 1 and "encoder-decoder" in err
