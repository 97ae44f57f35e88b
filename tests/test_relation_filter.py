"""`--relation` (any query filter) never shrinks the candidate vocabulary."""

from __future__ import annotations

import argparse
import json

import pytest
from conftest import TINY_TRIPLES

from probekit import cli
from probekit.cli.common import load_dataset_from_args
from probekit.errors import UnknownNameError


@pytest.fixture
def triples_file(tmp_path):
    path = tmp_path / "facts.csv"
    path.write_text(TINY_TRIPLES)
    return str(path)


def _args(**kw):
    base = dict(dataset="triples", data_dir=None, which="full", relation=None)
    return argparse.Namespace(**{**base, **kw})


def test_relation_flag_keeps_the_whole_sets_vocabulary(triples_file):
    """The rule: "Filtering queries must never change the candidates unless the user picks the `relation`
    vocabulary" ("Filtering which queries run (one relation, a sample) never changes the
    vocabulary")."""
    whole = load_dataset_from_args(_args(data_dir=triples_file))
    one = load_dataset_from_args(_args(data_dir=triples_file, relation=["may_prevent"]))
    assert one.relations == ["may_prevent"] and len(one) < len(whole)
    for vocab in ("heads+tails", "tails"):
        assert one.candidates(vocab).names == whole.candidates(vocab).names
    assert one.candidates("relation", "may_prevent").names == whole.candidates("relation", "may_prevent").names
    with pytest.raises(UnknownNameError, match="unknown relation 'may_prevnt'"):
        load_dataset_from_args(_args(data_dir=triples_file, relation=["may_prevnt"]))


def test_shared_medlama_may_treat_alone_keeps_the_set_vocabulary(medlama_dir):
    """Once a defect: "`bench --relation may_treat` searches 1,765 names instead of the set's vocabulary";
    may_treat alone must get the same vocabulary size as the whole set (22,923 full, 17,532 hard)."""
    for which, size in (("full", 22_923), ("hard", 17_532)):
        ds = load_dataset_from_args(_args(dataset="medlama", data_dir=str(medlama_dir), which=which,
                                          relation=["may_treat"]))
        assert ds.relations == ["may_treat"]
        assert len(ds.candidates("heads+tails")) == size
        assert len(ds.candidates("relation", "may_treat")) < size  # only the relation vocabulary narrows


def test_bench_one_relation_scores_as_in_the_whole_run(capsys, tiny_encoder_dir, triples_file):
    """A relation's accuracy is the same whether it runs alone (--relation) or with the whole set: the
    candidates do not change."""
    common = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", triples_file,
              "--format", "json", "--quiet", "--k", "5"]
    assert cli.main(common) == 0
    whole = json.loads(capsys.readouterr().out)
    assert cli.main([*common, "--relation", "may_prevent"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert list(alone["relations"]) == ["may_prevent"]
    assert alone["relations"]["may_prevent"] == whole["relations"]["may_prevent"]
    assert alone["dataset"]["vocab_queries"] == whole["dataset"]["queries"]
