"""Built vocabularies: the registry on disk, staleness, the CLI round trip, and probing with --vocab NAME."""

from __future__ import annotations

import json
import re

import pytest
from _umls import write_umls

from probekit.errors import ProbekitError, UnknownNameError


@pytest.fixture(autouse=True)
def _vocab_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PROBEKIT_VOCAB_DIR", str(tmp_path / "vocabularies"))


def _build(name, path, tiny_encoder, **kw):
    from probekit.vocab.build import build
    from probekit.vocab.sources import open_source

    return build(name, open_source("umls", path), model=tiny_encoder, shard_size=2, **kw)


def test_build_records_sizes_and_times_and_is_listed(tmp_path, tiny_encoder):
    from probekit.vocab.store import listing, open_vocabulary, record

    conso, _ = write_umls(tmp_path / "umls")
    out = _build("mini", conso, tiny_encoder)
    assert (out["names"], out["shards"], out["index"]) == (4, 2, "exact")
    assert out["vector_bytes"] > 0 and out["encode_s"] >= 0 and out["peak_rss_bytes"] > 0
    rec = record("mini")
    assert rec["has_cuis"] and rec["builds"][rec["default"]]["dim"] == tiny_encoder.hidden_size
    [row] = listing()
    assert row["name"] == "mini" and row["status"] == "ok" and row["names"] == 4
    cands = open_vocabulary("mini").candidates()
    assert cands.names == ("Myocardial infarction", "Aspirin", "Headache", "Metformin")
    assert cands.cuis == ("C0000001", "C0000002", "C0000003", "C0000004")


def test_a_changed_source_is_stale_and_never_used(tmp_path, tiny_encoder):
    from probekit.vocab.store import listing, open_vocabulary

    conso, _ = write_umls(tmp_path / "umls")
    _build("mini", conso, tiny_encoder)
    conso.write_text(conso.read_text().replace("Aspirin", "Aspirine"))
    assert listing()[0]["status"] == "stale"
    with pytest.raises(ProbekitError, match=r"vocabulary 'mini' is stale: its source .*MRCONSO.RRF changed"):
        open_vocabulary("mini")
    with pytest.raises(UnknownNameError, match="unknown vocabulary 'mnii'; did you mean 'mini'"):
        open_vocabulary("mnii")


def test_approximate_index_recall_is_measured(tmp_path, tiny_encoder):
    from probekit.vocab.store import record

    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"term {i} of {j}" for i in range(40) for j in ("a", "b")) + "\n")
    from probekit.vocab.build import build
    from probekit.vocab.sources import open_source

    out = build("flat", open_source("names", names), model=tiny_encoder, shard_size=32, index="ivf-flat",
                index_params={"nlist": 4, "nprobe": 1})
    assert 0.0 <= out["recall_at_10"] <= 1.0
    assert record("flat")["builds"][record("flat")["default"]]["recall_at_10"] == out["recall_at_10"]


def test_probing_with_a_built_vocabulary_by_string_and_by_concept(tmp_path, tiny_encoder, monkeypatch):
    """The retrieval probe ranks a dataset's queries among a built vocabulary; its gold ranks equal those of the
    same names as an ordinary candidate set (exact ranks), and match=concept counts synonyms."""
    from probekit.probes import get_probe
    from probekit.types import CandidateSet, Query
    from probekit.vocab.store import open_vocabulary

    conso, _ = write_umls(tmp_path / "umls")
    from probekit.vocab.build import build
    from probekit.vocab.sources import open_source

    build("syn", open_source("umls", conso, names="all"), model=tiny_encoder, shard_size=3)
    cands = open_vocabulary("syn").candidates()
    q = Query("q1", "aspirin", "may_prevent", "[X] may prevent [Y].", golds=("Myocardial infarction",),
              gold_ids=("C0000001",))
    probe = get_probe("retrieval")
    by_string = probe.rank(tiny_encoder, [q], cands, k=3)[0]
    plain = probe.rank(tiny_encoder, [q], CandidateSet(cands.names, "plain-copy"), k=3)[0]
    assert by_string.gold_ranks == plain.gold_ranks and by_string.ids == plain.ids
    by_concept = probe.rank(tiny_encoder, [q], cands, k=3, match="concept")[0]
    synonyms = [i for i, c in enumerate(cands.cuis) if c == "C0000001"]
    assert len(synonyms) == 3 and by_concept.gold_ranks[0] <= by_string.gold_ranks[0]
    # every synonym of the gold concept in the top-k is flagged gold (as the probe counted it), not the spelling alone
    assert by_concept.gold_flags() == tuple(cands.cuis[i] == "C0000001" for i in by_concept.ids)
    assert by_string.gold_flags() == tuple(n == "Myocardial infarction" for n in by_string.names)
    assert [t["gold"] for t in by_concept.to_dict()["top"]] == list(by_concept.gold_flags())
    with pytest.raises(ProbekitError, match="match 'concept' needs a built vocabulary"):
        probe.rank(tiny_encoder, [q], CandidateSet(cands.names, "plain-copy"), k=3, match="concept")


def test_cli_build_list_info_and_bench_with_vocab(tmp_path, tiny_encoder_dir, capsys, tiny_dataset):
    from probekit.cli import main

    conso, sty = write_umls(tmp_path / "umls")
    assert main(["vocab", "build", "mini", "--source", "umls", "--file", str(conso), "--mrsty", str(sty),
                 "--tui", "T121,T047", "--model", str(tiny_encoder_dir), "--shard-size", "2", "--quiet",
                 "--format", "json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["names"] == 3 and built["shards"] == 2
    assert main(["vocab", "list"]) == 0
    assert "mini" in capsys.readouterr().out
    assert main(["vocab", "info", "mini"]) == 0
    out = capsys.readouterr().out
    assert "tui=['T047', 'T121']" in out and "3 names with CUIs" in out
    with pytest.raises(SystemExit) as refused:  # a sibling action's flag is refused by the action itself
        main(["vocab", "list", "--tui", "T047"])
    assert refused.value.code == 2 and "unrecognized arguments: --tui" in capsys.readouterr().err
    assert main(["vocab", "build", "x", "--source", "names", "--file", str(conso), "--sab", "MSH"]) == 2
    assert "--sab is a UMLS filter" in capsys.readouterr().err
    assert main(["vocab", "info", "nope"]) == 2
    assert "unknown vocabulary 'nope'" in capsys.readouterr().err

    # a MedLAMA-layout set whose gold is a synonym ("heart attack") of the vocabulary's preferred name
    medlama = tmp_path / "ml"
    (medlama / "2021AA").mkdir(parents=True)
    (medlama / "prompts.csv").write_text("pid,default_prompt,human_prompt\nmay_prevent,[X] prevents [Y].,"
                                         "[X] may prevent [Y].\n")
    (medlama / "2021AA" / "may_prevent_1000.csv").write_text(
        "head_cui,head_name,rel,tail_cuis_list,tail_names_list\n"
        "C0000002,Aspirin,may_prevent,['C0000001'],['heart attack']\n")
    base = ["bench", "--model", str(tiny_encoder_dir), "--dataset", "medlama", "--data-dir", str(medlama),
            "--vocab", "mini", "--probe", "retrieval", "--format", "json", "--quiet", "--save"]
    assert main(base) == 0
    by_string = json.loads(capsys.readouterr().out)
    assert main([*base, "--match", "concept"]) == 0
    by_concept = json.loads(capsys.readouterr().out)
    assert by_string["micro"]["acc@10"] == 0.0 and by_concept["micro"]["acc@10"] == 1.0
    from probekit.bench import runs

    stored = {r["run_id"]: r for r in runs.list_runs().to_dict(orient="records")}
    assert by_concept["run_id"] in stored and by_string["run_id"] in stored
    assert main(["runs", "show", by_concept["run_id"], "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    options = shown["run"]["options"]
    options = json.loads(options) if isinstance(options, str) else options
    assert options["match"] == "concept" and shown["run"]["vocab"] == "mini"  # the stored run records the rule
    assert shown["run"]["search"] is None  # an exact index scores every candidate: nothing to record


def test_a_run_served_by_an_approximate_index_records_it(tmp_path, tiny_encoder, tiny_dataset):
    """The rule (probekit.types.Ranking.search): when an approximate index served the top-k, each ranking says
    so, with the index's parameters and its recall measured against exact search, and the stored run records it
    (runs show prints it); gold ranks stay exact, so they equal those of the exact index."""
    from probekit.bench import runner, runs
    from probekit.vocab.build import build
    from probekit.vocab.sources import open_source

    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"term {i} of {j}" for i in range(40) for j in ("a", "b")) + "\n")
    out = build("flat", open_source("names", names), model=tiny_encoder, shard_size=32, index="ivf-flat",
                index_params={"nlist": 4, "nprobe": 1, "target_recall": None})
    build("exact", open_source("names", names), model=tiny_encoder, shard_size=32)
    approx = runner.run_benchmark(tiny_encoder, tiny_dataset, probe="retrieval", vocab="flat", k=5)
    exact = runner.run_benchmark(tiny_encoder, tiny_dataset, probe="retrieval", vocab="exact", k=5)
    line = runs.get_run(approx.run_id)["search"]
    assert line.startswith("approximate top-k: ivf-flat (") and "nprobe 1" in line and "nlist 4" in line
    shown = re.search(r"recall@10 (\d\.\d{3}) against exact search on 80 queries", line)
    # the same measurement as the build's record (which keeps 4 places; the line shows 3)
    assert shown and abs(float(shown[1]) - out["recall_at_10"]) <= 0.0005 + 1e-9
    assert runs.get_run(exact.run_id)["search"] is None
    assert list(approx.frame.gold_ranks) == list(exact.frame.gold_ranks)


def test_probing_with_another_pooling_is_refused_in_one_line(tmp_path, tiny_encoder, monkeypatch):
    """Another pooling means other vectors: every name encoded again and the built index unused. Refused with the
    vocabulary's pooling named, nothing encoded; after a second build for that pooling both builds serve."""
    from probekit.probes import get_probe
    from probekit.types import Query
    from probekit.vocab import shards
    from probekit.vocab.store import open_vocabulary, record

    count_encodes: list[int] = []
    real = shards.encode_shard
    monkeypatch.setattr(shards, "encode_shard", lambda *a, **kw: count_encodes.append(1) or real(*a, **kw))
    conso, _ = write_umls(tmp_path / "umls")
    built_with = tiny_encoder.spec.pooling
    other = "cls" if built_with == "mean" else "mean"
    _build("pool", conso, tiny_encoder, index="ivf-flat", index_params={"nlist": 2, "nprobe": 1})
    cands = open_vocabulary("pool").candidates()
    q = Query("q1", "aspirin", "may_prevent", "[X] may prevent [Y].", golds=("Myocardial infarction",))
    probe = get_probe("retrieval")
    before = len(count_encodes)
    with pytest.raises(ProbekitError) as refused:
        probe.rank(tiny_encoder, [q], cands, k=2, pooling=other)
    line = str(refused.value)
    assert "\n" not in line and f"built with pooling {built_with!r}, not {other!r}" in line
    assert "its ivf-flat index" in line and f"--pooling {other}" in line
    assert len(count_encodes) == before  # nothing was encoded
    assert probe.rank(tiny_encoder, [q], cands, k=2, pooling=built_with)[0].search  # its approximate index
    _build("pool", conso, tiny_encoder, pooling=other)
    assert len(record("pool")["builds"]) == 2
    assert probe.rank(tiny_encoder, [q], open_vocabulary("pool").candidates(), k=2, pooling=other)[0].gold_ranks
