"""UCM dataset mode as Yao et al. (2023) define it: the subject is never a pool entity of its own contexts, and
the facts whose object is in the subject's name are flagged (MedLAMA's hardness rule), with every figure also
shown without them and an option to skip them."""

from __future__ import annotations

import math

import pytest

from probekit import context
from probekit.context import CorpusScan
from probekit.context.dataset import kb_context, name_overlap, pool_without_subject
from probekit.datasets.base import Dataset
from probekit.types import Query

QUERIES = [
    Query("q1", "aspirin", "may_treat", "[X] treats [Y].", golds=("pain", "fever")),
    Query("q2", "migraine kit", "may_treat", "[X] treats [Y].", golds=("Aspirin",)),  # S of q1 is a tail
    Query("q3", "eyelid carcinoma", "may_treat", "[X] treats [Y].", golds=("eyelid", "pain")),
    Query("q4", "ibuprofen", "may_treat", "[X] treats [Y].", golds=("cough",)),
]
CORPUS = [
    "aspirin relieves pain before fever and aspirin again",
    "migraine kit holds aspirin and cough drops",
    "eyelid carcinoma spreads from the eyelid with pain",
]


@pytest.fixture
def ds():
    return Dataset("hand", QUERIES, {})


def test_the_subject_is_not_a_pool_entity():
    """"We will target all other entities that have the same entity-type of O_t ... named entity-pool" and
    O_cor / O_incor are entities that do / do not "satisfy the same relation with S": S itself is neither."""
    assert pool_without_subject(["Aspirin", "pain", " ASPIRIN ", "fever"], "aspirin") == ["pain", "fever"]
    seg, golds = kb_context(QUERIES[0], ["Aspirin", "cough", "eyelid", "pain", "fever"], seed=0, n_incor=3)
    assert "aspirin" not in {s.entity.lower() for s in seg.segments}


def test_dataset_mode_never_cuts_at_the_subject(ds, tiny_encoder):
    res = context.run_dataset(tiny_encoder, ds, contexts=CorpusScan(texts=CORPUS), negative=True)
    q1 = [r for r in res.rows if r["query_id"] == "q1"]
    assert q1 and all((r["added"] or "").lower() != "aspirin" for r in q1)
    # "aspirin ... pain ... fever ... aspirin": around pain, only fever (an O_cor) is a pool entity; no O_incor,
    # so the subject can no longer be the negative target either
    assert {r["added"] for r in q1 if r["mode"] == "target" and r["target"] == "pain"} == {None, "pain", "fever"}
    assert not [r for r in q1 if r["mode"] == "negative"]


def test_name_overlap_reuses_medlamas_hardness_rule():
    """MedLAMA keeps a query hard when "avg_match < 0.1 and avg_rouge_l < 0.1"; a fact failing it on its
    own object can be read off the subject's name."""
    assert name_overlap("eyelid carcinoma", "eyelid") and not name_overlap("eyelid carcinoma", "pain")
    assert not name_overlap("aspirin", "fever") and not name_overlap("", "fever")


def test_both_figures_are_shown_and_excluding_is_an_option(ds, tiny_encoder):
    res = context.run_dataset(tiny_encoder, ds, contexts=CorpusScan(texts=CORPUS))
    summ = res.summary["target"]
    assert summ["name_overlap_triples"] == 1  # (eyelid carcinoma, eyelid)
    without = summ["without_name_overlap"]
    assert without["n_triples"] == summ["n_triples"] - 1
    kept = [r for r in res.rows if (r["query_id"], r["target"]) != ("q3", "eyelid")]
    alone = context.summarize(kept)["target"]
    assert _same(without, {k: v for k, v in alone.items() if k not in ("name_overlap_triples",
                                                                          "without_name_overlap")})
    skipped = context.run_dataset(tiny_encoder, ds, contexts=CorpusScan(texts=CORPUS), exclude_name_overlap=True)
    assert skipped.coverage["name_overlap_excluded"] == 1
    assert skipped.coverage["triples"] == res.coverage["triples"] - 1
    assert skipped.summary["target"]["name_overlap_triples"] == 0
    assert _same({k: skipped.summary["target"][k] for k in without}, without)


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN (an undefined UCM share)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b
