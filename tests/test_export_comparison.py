"""Exports of a comparison (probekit.exports.comparison): the paired test between two stored runs written beside
both runs' own standard exports. The written numbers are ``compare_runs(...).to_dict()`` of the same runs and seed;
the Every Eval Ever records that carry it still validate against the coalition's published schema
(github.com/evaleval/every_eval_ever, eval.schema.json 0.3.0: ``additional_details`` values are strings); reading
the export back gives the same summary sentences; bad input is one line and rc 2, with nothing written."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import jsonschema
import pytest
from conftest import shared_paths, use_store

from probekit import cli, exports, models
from probekit.bench import paired as paired_runs
from probekit.bench import runs
from probekit.datasets import freetext, load_dataset
from probekit.errors import ProbekitError
from probekit.exports import comparison
from probekit.types import Ranking

DATA = Path(__file__).parent / "data" / "eee"
EEE_SCHEMA = json.loads((DATA / "eval.schema.json").read_text())
EEE_INSTANCE_SCHEMA = json.loads((DATA / "instance_level_eval.schema.json").read_text())
SETTINGS = {"metric": "acc@1", "resamples": 200, "seed": 7}


def _rankings(queries, shift: int) -> list[Ranking]:
    """One ranking per query whose gold ranks cycle 1..7 (shifted per run): runs that differ on some queries."""
    return [Ranking(q, (0,), ("x",), (1.0,), tuple(1 + (i + shift) % 7 for i, _ in enumerate(q.golds)))
            for q in queries]


@pytest.fixture(scope="module")
def _stored(tiny_encoder_dir, tmp_path_factory):
    """Two stored runs over the same 60 demo queries and one free-text run sharing none, stored once per module
    (rankings made up, no model call: the comparison only reads the stored rows)."""
    with shared_paths(tmp_path_factory.mktemp("cmp_export_store")) as base:
        model = models.load(str(tiny_encoder_dir), device="cpu")
        ds = load_dataset("demo")
        queries = list(ds.queries[:60])
        ids = [runs.save_run(_rankings(queries, shift), model=model, dataset=ds, probe="retrieval", k=10,
                             options={"pooling": "mean"}, label=f"shift {shift}") for shift in (0, 3)]
        notes = freetext.parse("prompt,object\nAspirin treats [MASK].,pain\n", name="notes")
        ids.append(runs.save_run(_rankings(notes.queries, 0), model=model, dataset=notes, probe="retrieval", k=10))
    return base, ids


@pytest.fixture
def stored(_stored):
    """(run A, run B, a run sharing no query with them), in this test's own copy of the store."""
    base, ids = _stored
    use_store(base)
    return ids


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


# ---------------------------------------------------------------- the registry's contract
@pytest.mark.parametrize("name", list(comparison.COMPARISON_FORMATS))
def test_every_format_writes_the_test_as_compare_runs_gives_it(name, stored, tmp_path):
    """The written comparison is compare_runs' result for the same runs and seed, with both runs' ids, labels,
    provenance and row hashes; a folder format also holds each run's own export (the registered single-run
    format, byte-checked by the SHA-256 it lists) and is written whole (nothing temporary beside it)."""
    a, b, _ = stored
    fmt = comparison.get_comparison_format(name)
    assert fmt.name == name and fmt.description
    out = tmp_path / name if fmt.folder else tmp_path / "cmp.json"
    paths = comparison.export_comparison(a, b, out, fmt=name, **SETTINGS)
    doc_path = paths[-1]
    assert doc_path.name == ("comparison.json" if fmt.folder else "cmp.json")
    doc = json.loads(doc_path.read_text())
    expected = paired_runs.compare_runs(a, b, metric="acc@1", resamples=200, seed=7)
    assert doc["comparison"] == json.loads(json.dumps(expected.to_dict()))
    assert doc["sentences"] == {"micro": expected.sentence("micro"), "macro": expected.sentence("macro")}
    assert doc["comparison"]["n_boot"] == 200 and doc["comparison"]["seed"] == 7
    assert doc["comparison"]["rows"][-1]["relation"] == "micro"
    assert doc["queries"]["n_paired"] == 60 and doc["queries"]["counting"] == "query"
    for side, run_id in (("a", a), ("b", b)):
        run = runs.load_run(run_id)
        assert doc[side]["run_id"] == run_id and doc[side]["label"] == run.meta["label"]
        prov = doc[side]["provenance"]
        assert prov["dataset_version"] == run.meta["dataset_version"] and prov["options"]["pooling"] == "mean"
        assert doc[side]["rows_sha256"] == comparison.rows_sha256(run)
    assert doc["format"] == name
    assert not list(tmp_path.rglob("*.tmp"))
    if not fmt.folder:
        assert paths == [doc_path] and "files" not in doc
        return
    listed = [f for role in ("A", "B") for f in doc["files"][role]]
    assert sorted(f["path"] for f in listed) == [f for f in _files(out) if f != "comparison.json"]
    for f in listed:
        assert hashlib.sha256((out / f["path"]).read_bytes()).hexdigest() == f["sha256"]
    for role, run_id in (("A", a), ("B", b)):  # each run's own export: what `runs import` reads
        meta, frame = exports.detect_format(out / role).read(out / role)
        assert meta["run_id"] == run_id and len(frame) == 60


def test_unknown_and_refused_format_names():
    with pytest.raises(ProbekitError, match=r"unknown comparison format 'lm_eval'; did you mean 'lm-eval'; "
                                            r"available: "):
        comparison.get_comparison_format("lm_eval")
    with pytest.raises(ProbekitError, match=r"not exported as hf-eval-results \(a Hub .* no field for the difference "
                                            r"between two runs or its test\); formats that carry a comparison: json, "
                                            r"eee, lm-eval$"):
        comparison.get_comparison_format("hf-eval-results")


# ---------------------------------------------------------------- eee
def test_eee_records_carry_the_comparison_and_validate(stored, tmp_path):
    """Both records validate against eval.schema.json with the comparison in
    ``eval_library.additional_details.probekit_comparison`` (a string, the schema's rule for additional details);
    run A's record lists each row of the test as a result whose score is A − B with its bootstrap interval and
    whose details hold the test, p and the adjusted p; each record alone reads back as the comparison."""
    a, b, _ = stored
    comparison.export_comparison(a, b, tmp_path / "eee", fmt="eee", **SETTINGS)
    doc = json.loads((tmp_path / "eee" / "comparison.json").read_text())
    validator = jsonschema.Draft7Validator(EEE_SCHEMA)
    records = {}
    for role in ("A", "B"):
        (path,) = (tmp_path / "eee" / role).glob("*.json")
        record = json.loads(path.read_text())
        validator.validate(record)
        for line in (tmp_path / "eee" / role).glob("*_samples.jsonl").__next__().read_text().splitlines()[:20]:
            jsonschema.Draft7Validator(EEE_INSTANCE_SCHEMA).validate(json.loads(line))
        inner = json.loads(record["eval_library"]["additional_details"]["probekit_comparison"])
        assert inner == {k: v for k, v in doc.items() if k not in ("files", "format")}
        assert comparison.read_comparison(path)["comparison"] == doc["comparison"]
        records[role] = record
    diffs = [r for r in records["A"]["evaluation_results"] if r["metric_config"]["metric_id"] ==
             "probekit.paired_difference"]
    assert not [r for r in records["B"]["evaluation_results"] if r["metric_config"]["metric_id"] ==
                "probekit.paired_difference"]
    rows = doc["comparison"]["rows"]
    assert len(diffs) == len(rows)
    for r, row in zip(diffs, rows):
        s = r["score_details"]
        assert s["score"] == row["diff"] and r["evaluation_result_id"].endswith(f":minus:{b}")
        ci = s["uncertainty"]["confidence_interval"]
        assert (ci["lower"], ci["upper"], ci["confidence_level"]) == (row["lo"], row["hi"], 0.95)
        assert s["uncertainty"]["num_bootstrap_samples"] == 200 and s["uncertainty"]["num_samples"] == row["n"]
        assert s["details"]["p"] == json.dumps(row["p"]) and s["details"]["test"] == row["test"]
        assert ("p_adjusted" in s["details"]) == (row["p adjusted"] is not None)
    assert len({r["evaluation_result_id"] for r in records["A"]["evaluation_results"]}) == len(
        records["A"]["evaluation_results"])  # ids stay unique within the record
    details = records["B"]["eval_library"]["additional_details"]  # the check can fail: the comparison as an
    details["probekit_comparison"] = json.loads(details["probekit_comparison"])  # object, not the string asked
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(records["B"])


# ---------------------------------------------------------------- round trip
def test_read_back_gives_the_same_sentences_and_import_recomputes_them(stored, tmp_path):
    """`runs compare --from` reads the written test back (its sentences are the exported ones, table equal);
    the runs themselves come back with `runs import` and, compared again with the same seed, say the same."""
    a, b, _ = stored
    comparison.export_comparison(a, b, tmp_path / "lm", fmt="lm-eval", **SETTINGS)
    expected = paired_runs.compare_runs(a, b, metric="acc@1", resamples=200, seed=7)
    doc, back = comparison.stored_comparison(tmp_path / "lm")
    for avg in ("micro", "macro"):
        assert back.sentence(avg) == expected.sentence(avg) == doc["sentences"][avg]
    assert back.table.drop(columns="p adjusted").equals(expected.table.drop(columns="p adjusted"))
    ia, _ = exports.import_run(tmp_path / "lm" / "A")
    ib, _ = exports.import_run(tmp_path / "lm" / "B")
    again = paired_runs.compare_runs(ia, ib, metric="acc@1", resamples=200, seed=7)
    assert [again.sentence(avg) for avg in ("micro", "macro")] == [expected.sentence(avg) for avg in ("micro", "macro")]


def test_download_bytes_are_the_export(stored):
    """The page's one call: the document for json, a zip of the folder otherwise, holding the same test."""
    a, b, _ = stored
    doc = json.loads(comparison.comparison_bytes(a, b, fmt="json", **SETTINGS))
    with zipfile.ZipFile(io.BytesIO(comparison.comparison_bytes(a, b, fmt="lm-eval", **SETTINGS))) as zf:
        names = zf.namelist()
        zipped = json.loads(zf.read("comparison/comparison.json"))
    assert zipped["comparison"] == doc["comparison"] and zipped["format"] == "lm-eval"
    assert sorted(names) == sorted(["comparison/comparison.json", *(f"comparison/{f['path']}" for role in "AB"
                                                                   for f in zipped["files"][role])])


# ---------------------------------------------------------------- the command
def test_cli_out_from_and_bad_input(stored, tmp_path, capsys):
    """`runs compare A B --out` writes and says what; `runs compare --from` shows the same sentences as the live
    command; bad input is one line on stderr, rc 2, and writes nothing."""
    a, b, other = stored
    flags = ["--metric", "acc@1", "--resamples", "200", "--seed", "7"]
    assert cli.main(["runs", "compare", a, b, *flags]) == 0
    live = capsys.readouterr().out.splitlines()
    out = tmp_path / "lm"
    assert cli.main(["runs", "compare", a, b, *flags, "--out", str(out), "--format", "lm-eval"]) == 0
    assert capsys.readouterr().out.count("wrote ") == 5  # two files per run, then comparison.json
    assert cli.main(["runs", "compare", "--from", str(out)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[:-1] == live and "A − B = " in shown[2]  # A, B, both sentences, the table and its footer
    assert cli.main(["runs", "compare", "--from", str(out / "comparison.json"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["a"]["run_id"] == a
    assert cli.main(["runs", "compare", a, b, *flags, "--out", str(out), "--format", "lm-eval"]) == 0  # rewritten
    capsys.readouterr()
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "notes.txt").write_text("mine")
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    record = next((out / "A").glob("results_*.json"))
    before = _files(tmp_path)
    cases = [
        ([a, other, "--out", str(tmp_path / "n"), "--format", "eee"], "share no full query"),
        ([a, b, "--out", str(tmp_path / "n"), "--format", "eeee"], "unknown comparison format 'eeee'; did you mean "
                                                                   "'eee'"),
        ([a, b, "--out", str(tmp_path / "n"), "--format", "hf-eval-results"], "formats that carry a comparison: "
                                                                              "json, eee, lm-eval"),
        ([a, b, "--out", str(tmp_path / "no" / "such" / "x"), "--format", "eee"], "does not exist"),
        ([a, b, "--out", str(a_file), "--format", "lm-eval"], "it is a file"),
        ([a, b, "--out", str(stray), "--format", "eee"], "already holds other files"),
        ([a, b, "--out", str(tmp_path / "n")], "give --format"),
        ([a, b, "--format", "eee"], "give --out"),
        ([a, "--format", "json"], "give runs A and B"),
        (["--from", str(tmp_path / "missing")], "no such file"),
        (["--from", str(record.with_name("nope.json"))], "no such file"),
        (["--from", str(stray / "notes.txt")], "not JSON"),
        (["--from", str(out), a], "give no run ids"),
    ]
    for argv, message in cases:
        assert cli.main(["runs", "compare", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)
    assert _files(tmp_path) == before  # nothing written by a refusal
    assert cli.main(["runs", "compare", "--from", str(record)]) == 2  # a run's own results: no comparison
    assert "not a probekit comparison" in capsys.readouterr().err
