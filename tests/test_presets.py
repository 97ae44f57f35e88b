"""The retrieval probe's ``medlama-reference`` preset against an independent implementation."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from probekit import cli
from probekit.probes import get_probe
from probekit.probes.retrieval import PRESETS, apply_preset


def _reference_ranks(model, queries, names, *, layer):
    """Ranks straight from transformers: [CLS] of hidden_states[layer], squared L2 on raw vectors."""
    tok, enc = model.tokenizer, model.encoder

    def cls(texts, max_length):
        batch = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.inference_mode():
            out = enc(**batch, output_hidden_states=True)
        return out.hidden_states[layer][:, 0].float().numpy()  # (n, dim), not normalised

    qv, nv = cls([q.text(tok.mask_token) for q in queries], 50), cls(list(names), 25)
    dist = ((qv[:, None, :] - nv[None, :, :]) ** 2).sum(-1)  # (n_queries, n_names)
    return dist


def test_preset_is_an_option_with_its_choices():
    """The rule: "add it as a probe Option (`preset`, choices (None, "medlama-reference")) whose values
    override pooling/similarity/max lengths"; the recipe: "[CLS] of `hidden_states[layer]`, L2 distance on raw
    (unnormalised) vectors, names max 25 tokens, queries max 50"."""
    opt = {o.name: o for o in get_probe("retrieval").options}["preset"]
    assert opt.default is None and opt.choices == (None, "medlama-reference")
    assert PRESETS["medlama-reference"] == {"pooling": "cls", "similarity": "l2", "max_length": 50}
    # precedence: the preset's values replace the options it names, the others are kept
    assert apply_preset({"preset": "medlama-reference", "pooling": "mean", "similarity": "dot", "layer": 1,
                         "max_length": 8}) == {"preset": "medlama-reference", "pooling": "cls",
                                               "similarity": "l2", "layer": 1, "max_length": 50}


@pytest.mark.parametrize("layer", [1, 2])
def test_preset_ranks_as_the_reference_recipe(tiny_encoder, tiny_dataset, layer):
    """The rule: "[CLS] of `hidden_states[layer]`, L2 distance on raw (unnormalised) vectors, names max
    25 tokens, queries max 50" - checked against transformers + numpy, and whatever pooling, similarity and
    max_length say (the preset wins)."""
    probe, cands = get_probe("retrieval"), tiny_dataset.candidates()
    queries = tiny_dataset.queries
    got = probe.rank(tiny_encoder, queries, cands, k=len(cands), layer=layer, preset="medlama-reference",
                     pooling="mean", similarity="cosine", max_length=6)
    dist = _reference_ranks(tiny_encoder, queries, cands.names, layer=layer)
    for r, row in zip(got, dist):
        np.testing.assert_allclose(-np.array(r.scores), row[list(r.ids)], rtol=1e-4, atol=1e-4)
        assert np.all(np.diff(row[list(r.ids)]) >= -1e-4)  # nearest first (up to the rounding of faiss's expanded L2)
        for g, rank in zip(r.query.golds, r.gold_ranks):
            d = row[cands.index_of(g)]  # the gold's rank: 1 + names nearer, up to float rounding
            assert 1 + np.sum(row < d - 1e-4) <= rank <= 1 + np.sum(row < d + 1e-4)
    plain = probe.rank(tiny_encoder, queries, cands, k=5, layer=layer, pooling="cls", similarity="l2")
    assert [r.ids for r in plain] == [r.ids[:5] for r in got]


def test_cli_preset_flag_records_the_preset(capsys, tiny_encoder_dir, tmp_path):
    from conftest import TINY_TRIPLES

    path = tmp_path / "facts.csv"
    path.write_text(TINY_TRIPLES)
    common = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", str(path),
              "--format", "json", "--quiet"]
    assert cli.main([*common, "--preset", "medlama-reference", "--similarity", "cosine"]) == 0
    with_preset = json.loads(capsys.readouterr().out)
    assert with_preset["options"]["preset"] == "medlama-reference"
    assert cli.main([*common, "--pooling", "cls", "--similarity", "l2"]) == 0
    spelled_out = json.loads(capsys.readouterr().out)
    assert with_preset["relations"] == spelled_out["relations"] and with_preset["micro"] == spelled_out["micro"]
    with pytest.raises(SystemExit) as exit_:
        cli.main([*common, "--preset", "nope"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
