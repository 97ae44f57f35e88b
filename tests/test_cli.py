"""cli: ``probe`` and ``bench`` end to end on tiny models and a tiny triples file; bad input -> one error line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TINY_TRIPLES

from probekit import cli, metrics
from probekit.datasets import triples
from probekit.probes import get_probe


@pytest.fixture
def triples_file(tmp_path):
    path = tmp_path / "facts.csv"
    path.write_text(TINY_TRIPLES)
    return str(path)


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code, err, match):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert match in lines[0], lines[0]


def test_probe_json(capsys, tiny_encoder_dir, triples_file):
    code, out, _ = run(capsys, "probe", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       triples_file, "--query", "Metformin may treat [MASK] .", "--gold", "type 2 diabetes",
                       "--gold", "no such thing", "--k", "3", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["probe"] == "retrieval" and data["model"]["layers"] == 2
    assert data["n_candidates"] == 16  # 7 distinct subjects + 9 distinct objects
    assert [row["rank"] for row in data["top"]] == [1, 2, 3]
    assert data["golds"] == ["type 2 diabetes", "no such thing"]
    assert isinstance(data["gold_ranks"][0], int) and data["gold_ranks"][1] is None
    scores = [row["score"] for row in data["top"]]
    assert scores == sorted(scores, reverse=True)


def test_probe_leaves_a_typed_querys_own_subject_out_as_the_probe_page_does(capsys, tiny_encoder_dir, triples_file):
    """One default for one query, on the page and in the shell (ONE_QUERY_DEFAULTS): the candidates a typed query
    names are left out ("Metformin might treat [MASK]." must not answer metformin); --no-exclude-subject keeps them."""
    from probekit.probes import ONE_QUERY_DEFAULTS

    base = ["probe", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", triples_file,
            "--query", "metformin may treat [MASK] .", "--k", "16", "--format", "json"]
    code, out, _ = run(capsys, *base)
    data = json.loads(out)
    assert code == 0 and data["options"]["exclude_subject"] is ONE_QUERY_DEFAULTS["exclude_subject"] is True
    assert "metformin" not in [row["name"] for row in data["top"]] and len(data["top"]) == 15
    code, out, _ = run(capsys, *base, "--no-exclude-subject")
    assert code == 0 and "metformin" in [row["name"] for row in json.loads(out)["top"]]
    code, out, _ = run(capsys, *base[:-2])
    assert "its own subject left out (--no-exclude-subject keeps it)" in out.splitlines()[0]


def test_probe_table_and_query_id(capsys, tiny_mlm_dir, triples_file):
    code, out, _ = run(capsys, "probe", "--model", str(tiny_mlm_dir), "--dataset", "triples", "--data-dir",
                       triples_file, "--query-id", "may_treat:0000", "--probe", "mask_average", "--k", "4")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("metformin may treat [MASK] .") and "mask_average" in lines[0]
    assert [ln.split()[0] for ln in lines[1:5]] == ["1", "2", "3", "4"]
    assert lines[5].startswith("gold: 'type 2 diabetes' rank") and lines[6].startswith("gold: 'polycystic")


def test_probe_relation_vocab(capsys, tiny_encoder_dir, triples_file):
    code, out, _ = run(capsys, "probe", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       triples_file, "--query", "aspirin may prevent [MASK] .", "--relation", "may_prevent",
                       "--vocab", "relation", "--k", "10", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["relation"] == "may_prevent"
    assert {row["name"] for row in data["top"]} == {"myocardial infarction", "stroke", "rickets", "heart attack"}


def test_probe_default_model(capsys, triples_file):
    code, out, _ = run(capsys, "probe", "--model", "default", "--dataset", "triples", "--data-dir", triples_file,
                       "--query", "metformin may treat [MASK] .", "--k", "2", "--format", "json")
    assert code == 0 and json.loads(out)["model"]["hidden"] == 384


def test_bench_json_matches_library(capsys, tiny_encoder_dir, triples_file):
    code, out, _ = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       triples_file, "--probe", "retrieval", "--pooling", "cls", "--similarity", "l2", "--layer",
                       "1", "--format", "json", "--quiet")
    assert code == 0
    data = json.loads(out)
    assert data["n_queries"] == 8 and set(data["relations"]) == {"may_treat", "may_prevent"}
    assert data["options"] == {"pooling": "cls", "similarity": "l2", "layer": 1}
    for avg in ("macro", "micro"):
        assert list(data[avg]) == data["metrics"] == metrics.metric_names(depth=10)  # every metric a top-10 shows
    assert data["relations"]["may_treat"]["n"] == 4
    # the same numbers as calling the library directly
    from probekit import models

    ds = triples.load(triples_file)
    rankings = get_probe("retrieval").rank(models.load(str(tiny_encoder_dir), device="cpu"), ds.queries,
                                           ds.candidates(), k=10, pooling="cls", similarity="l2", layer=1)
    want = metrics.summary(rankings)
    assert data["macro"] == pytest.approx(want["macro"]) and data["micro"] == pytest.approx(want["micro"])
    for rel, row in want["relations"].items():
        assert data["relations"][rel] == pytest.approx(row)


def test_bench_table_relation_vocab(capsys, tiny_mlm_dir, triples_file):
    code, out, err = run(capsys, "bench", "--model", str(tiny_mlm_dir), "--dataset", "triples", "--data-dir",
                         triples_file, "--probe", "mask_average", "--vocab", "relation", "--k", "5")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[1].split() == ["relation", *metrics.metric_names(depth=5)]  # no acc@10 from a top-5
    assert [ln.split()[0] for ln in lines[2:6]] == ["may_prevent", "may_treat", "macro", "micro"]
    assert lines[6].startswith("95 % interval, macro: acc@1 [") and lines[7].startswith("95 % interval, micro:")
    assert lines[-1].startswith("counting: query (")  # every acc@k is labelled with its counting
    assert "scoring" in err  # progress goes to stderr


def test_bench_one_relation(capsys, tiny_encoder_dir, triples_file):
    code, out, _ = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       triples_file, "--relation", "may_prevent", "--format", "json", "--quiet")
    data = json.loads(out)
    assert code == 0 and list(data["relations"]) == ["may_prevent"] and data["n_queries"] == 4


@pytest.mark.parametrize("args, match", [
    (["--query", "metformin may treat ."], "exactly one [MASK]"),
    (["--query", ""], "the query is empty"),
    (["--query", "[MASK] ."], "empty apart from the mask"),
    (["--query", "x [MASK]", "--k", "0"], "k must be an integer from 1 to 1000, got 0"),
    (["--query", "x [MASK]", "--k", str(10**20)], f"k must be an integer from 1 to 1000, got {10**20}"),
    (["--query", "x [MASK]", "--probe", "retreival"], "did you mean 'retrieval'"),
    (["--query", "x [MASK]", "--probe", "mask_average"], "needs a model with an MLM head"),
    (["--query", "x [MASK]", "--vocab", "relation"], "--vocab relation needs --relation"),
    (["--query", "x [MASK]", "--relation", "may_cure"], "unknown relation 'may_cure'"),
    (["--query-id", "nope:0001"], "no query 'nope:0001'"),
    (["--query", "x [MASK]", "--layer", "9"], "layer 9 out of range"),
])
def test_probe_bad_input(capsys, tiny_encoder_dir, triples_file, args, match):
    code, out, err = run(capsys, "probe", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                         triples_file, *args)
    assert_one_error_line(code, err, match)
    assert out == ""


def test_bad_model_and_files(capsys, tmp_path, tiny_encoder_dir, triples_file):
    code, _, err = run(capsys, "probe", "--model", str(tmp_path / "missing"), "--query", "x [MASK]")
    assert_one_error_line(code, err, "does not exist")
    code, _, err = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       str(tmp_path / "nope.csv"))
    assert_one_error_line(code, err, "file not found")
    bad = tmp_path / "bad.csv"
    bad.write_text("subject,relation\naspirin,may_treat\n")
    code, _, err = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       str(bad))
    assert_one_error_line(code, err, "missing column 'object'")
    code, _, err = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "medlama", "--data-dir",
                       str(tmp_path))
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                         triples_file, "--save", "--format", "json", "--quiet")
    assert code == 0 and json.loads(out)["run_id"]


def test_argparse_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["probe", "--format", "xml"])
    assert info.value.code == 2 and "invalid choice: 'xml'" in capsys.readouterr().err


def test_unexpected_error_is_one_line(capsys, monkeypatch, tiny_encoder_dir, triples_file):
    def boom(*a, **kw):
        raise ValueError("something internal\nsecond line")

    monkeypatch.setattr(type(get_probe("retrieval")), "_rank", boom)
    argv = ["probe", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir", triples_file,
            "--query", "x [MASK]"]
    code, _, err = run(capsys, *argv)
    assert code == 1 and err.strip() == ("error: unexpected ValueError: something internal (a bug in probekit; "
                                         "run with PROBEKIT_DEBUG=1 for the traceback)")
    monkeypatch.setenv("PROBEKIT_DEBUG", "1")
    with pytest.raises(ValueError):
        cli.main(argv)


def test_module_entry_point(tmp_path):
    env = {**os.environ, "PROBEKIT_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "probekit", "probe", "--model", "default", "--query", "no mask"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("error: the query needs exactly one [MASK]")
    assert "Traceback" not in res.stderr


def test_bench_fast_flag(capsys, tiny_encoder_dir, triples_file):
    code, out, _ = run(capsys, "bench", "--model", str(tiny_encoder_dir), "--dataset", "triples", "--data-dir",
                       triples_file, "--fast", "--format", "json", "--quiet")
    opts = json.loads(out)["options"]
    assert code == 0 and opts["fast"] is True and opts.get("similarity", "cosine") == "cosine"


def test_hints_name_the_command_the_user_ran(monkeypatch, capsys):
    """A pipx user has `probekit`, not `python -m probekit`: a message's hint names how this process was started."""
    import probekit
    from probekit.errors import command

    monkeypatch.setattr(sys, "argv", [str(Path(probekit.__file__).parent / "__main__.py"), "runs"])
    assert command() == "python -m probekit"
    monkeypatch.setattr(sys, "argv", ["/home/u/.local/bin/probekit", "runs"])
    assert command() == "probekit"
    code, _, err = run(capsys, "runs", "show", "run-nope")
    assert code == 2 and "(see `probekit runs list`)" in err and "python -m" not in err
