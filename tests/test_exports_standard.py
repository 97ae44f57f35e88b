"""Standard exports of a stored run (probekit.exports): every registered format carries the run's provenance; the
Every Eval Ever record validates against the coalition's published schema; the lm-eval folder and the Hub's
``.eval_results/`` YAML hold what those tools read; probekit's own eee and lm-eval exports import back as a run
whose summary equals the original's; bad input is one line and rc 2."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import shared_paths, use_store

from probekit import __version__, cli, exports, models
from probekit.bench import runs
from probekit.datasets import load_dataset, triples
from probekit.errors import ProbekitError
from probekit.metrics.registry import get_metric, metric_names

DATA = Path(__file__).parent / "data" / "eee"
EEE_SCHEMA = json.loads((DATA / "eval.schema.json").read_text())
EEE_INSTANCE_SCHEMA = json.loads((DATA / "instance_level_eval.schema.json").read_text())
FACTS = """subject,relation,object
metformin,may_treat,type 2 diabetes
metformin,may_treat,polycystic ovary syndrome
aspirin,may_treat,pain
ibuprofen,may_treat,pain
insulin,may_treat,type 1 diabetes
aspirin,may_prevent,myocardial infarction
warfarin,may_prevent,stroke
vitamin d,may_prevent,rickets
"""


@pytest.fixture(scope="module")
def _stored(tiny_encoder_dir, tmp_path_factory):
    """One tiny retrieval run (7 queries, two relations) stored once per module."""
    with shared_paths(tmp_path_factory.mktemp("exports_store")) as base:
        model = models.load(str(tiny_encoder_dir), device="cpu")
        ds = triples.parse(FACTS, label="facts.csv", name="facts")
        run = runs.run_benchmark(model, ds, k=5, options={"pooling": "mean"})
    return base, run.run_id


@pytest.fixture
def run(_stored):
    """The stored run, read from this test's own copy of the store."""
    base, run_id = _stored
    use_store(base)
    runs.clear_memo()
    return runs.load_run(run_id)


def _out(tmp_path: Path, fmt: exports.ExportFormat) -> Path:
    return tmp_path / fmt.name if fmt.folder else tmp_path / f"run{fmt.suffixes[0]}"


def _text(path: Path) -> str:
    return pd.read_parquet(path).to_csv() if path.suffix == ".parquet" else path.read_text(encoding="utf-8")


def _same_summary(a: dict, b: dict) -> bool:
    """Equal summaries, NaN equal to NaN (a metric the method does not have)."""
    def norm(x):
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [norm(v) for v in x]
        return "nan" if isinstance(x, float) and math.isnan(x) else x

    return norm(a) == norm(b)


# ---------------------------------------------------------------- the registry's contract
@pytest.mark.parametrize("name", list(exports.FORMATS))
def test_every_format_writes_the_runs_provenance(name, run, tmp_path):
    """Every export carries model id and revision, dataset and the hash of its files, probe, options, counting and
    the probekit version, and is written whole (nothing temporary left beside it)."""
    fmt = exports.get_format(name)
    assert fmt.name == name and fmt.description and (fmt.folder or fmt.suffixes)
    paths = exports.export_run(run.run_id, _out(tmp_path, fmt), fmt=name)
    assert paths and all(p.is_file() and p.stat().st_size > 0 for p in paths)
    text = "\n".join(_text(p) for p in paths)
    m = run.meta
    for value in (m["model"], m["dataset_version"], m["probe"], m["counting"], __version__):
        assert str(value) in text, (name, value)
    if m["model_revision"]:
        assert m["model_revision"] in text
    assert "pooling" in text and "mean" in text  # the options
    assert "owner_host" not in text and "owner_pid" not in text  # not which host and process computed it
    assert not list(tmp_path.rglob("*.tmp"))
    if fmt.importable:  # what it writes, it reads back (by itself, and told from the files)
        target = paths[0]
        assert exports.detect_format(target).name == name
        meta, frame = fmt.read(target)
        assert meta["run_id"] == run.run_id and len(frame) == len(run.frame)


def test_an_unknown_format_names_the_close_ones(run, tmp_path):
    with pytest.raises(ProbekitError, match=r"unknown export format 'lm_eval'; did you mean 'lm-eval'; available: "):
        exports.export_run(run.run_id, tmp_path / "x", fmt="lm_eval")
    with pytest.raises(ProbekitError, match="give --format"):
        exports.export_run(run.run_id, tmp_path / "x.txt")
    with pytest.raises(ProbekitError, match="already registered"):
        exports.register(exports.get_format("eee"))


# ---------------------------------------------------------------- eee
def test_eee_record_and_samples_validate_against_the_published_schema(run, tmp_path):
    """Every Eval Ever 0.3.0 (github.com/evaleval/every_eval_ever, eval.schema.json and
    instance_level_eval.schema.json): the record and each sidecar line validate; the sidecar is linked by
    ``detailed_evaluation_results`` (repository path ``data/<collection>/<developer>/<model>/<uuid>_samples.jsonl``,
    sha256 checksum, row count) and each line by ``evaluation_id``/``evaluation_result_id``, one line per (query,
    metric)."""
    record_path, samples_path = exports.export_run(run.run_id, tmp_path / "eee", fmt="eee")
    record = json.loads(record_path.read_text())
    jsonschema.Draft7Validator(EEE_SCHEMA).validate(record)
    lines = [json.loads(x) for x in samples_path.read_text().splitlines()]
    validator = jsonschema.Draft7Validator(EEE_INSTANCE_SCHEMA)
    for line in lines:
        validator.validate(line)
    detail = record["detailed_evaluation_results"]
    assert detail["checksum"] == hashlib.sha256(samples_path.read_bytes()).hexdigest()
    assert detail["total_rows"] == len(lines) == len(run.frame) * len(metric_names())
    assert detail["file_path"].endswith(samples_path.name) and record_path.stem in samples_path.name
    ids = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
    assert {x["evaluation_result_id"] for x in lines} <= set(ids)
    assert {x["evaluation_id"] for x in lines} == {record["evaluation_id"]}
    summary = run.summary()
    for name in metric_names():
        for avg in ("macro", "micro"):
            assert ids[f"{name}:{avg}:full"]["score_details"]["score"] == pytest.approx(summary[avg][name])
        # a line's score is the query's: the mean of a metric's lines is its micro value (query counting)
        mine = [x["evaluation"]["score"] for x in lines if x["evaluation_result_id"] == f"{name}:micro:full"]
        assert np.mean(mine) == pytest.approx(summary["micro"][name])
    # the same run exported again: the same file names (a UUID4 drawn from the run id)
    again = exports.export_run(run.run_id, tmp_path / "eee", fmt="eee")
    assert [p.name for p in again] == [record_path.name, samples_path.name]
    assert sorted(p.name for p in (tmp_path / "eee").iterdir()) == sorted([record_path.name, samples_path.name])


def test_eee_a_broken_record_fails_the_schema(run, tmp_path):
    """The schema check can fail: a record without its model's deployment details is refused by the validator."""
    record_path, _ = exports.export_run(run.run_id, tmp_path / "eee", fmt="eee")
    record = json.loads(record_path.read_text())
    del record["model_info"]["additional_details"]["deployment_type"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(EEE_SCHEMA).validate(record)


# ---------------------------------------------------------------- lm-eval
def test_lm_eval_folder_mirrors_the_harness(run, tmp_path):
    """lm-evaluation-harness (EvaluationTracker.save_results_aggregated / save_results_samples): results_<date>.json
    with per-task ``"<metric>,none"`` and ``"<metric>_stderr,none"``, samples_<task>_<date>.jsonl with doc_id, doc,
    target, arguments, resps, filtered_resps, the hashes and each metric per sample; a task's value is the mean
    of its samples (the harness's ``mean`` aggregation), checked here against a naive loop over the gold ranks."""
    results_path, samples_path = exports.export_run(run.run_id, tmp_path / "lm", fmt="lm-eval")
    assert re.fullmatch(r"results_\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(\.\d+)?\.json", results_path.name)
    date = results_path.stem[len("results_"):]
    assert samples_path.name == f"samples_facts_{date}.jsonl"
    res = json.loads(results_path.read_text())
    assert {"results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "config", "task_hashes",
            "model_name", "probekit"} <= set(res)
    task = res["results"]["facts"]
    samples = [json.loads(x) for x in samples_path.read_text().splitlines()]
    assert len(samples) == len(run.frame) == res["n-samples"]["facts"]["effective"]
    for s in samples:
        assert {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics", "doc_hash",
                "prompt_hash", "target_hash", "gold_ranks", "top_names", "top_scores"} <= set(s)
        assert s["filtered_resps"] == s["top_scores"] and s["arguments"]["gen_args_0"]["arg_1"] == s["top_names"][0]
    for name in metric_names():  # every registered metric, not a fixed list
        m = get_metric(name)
        naive = []
        for s in samples:
            ranks = [r for r in s["gold_ranks"] if r is not None]
            best = min(ranks) if ranks else None
            naive.append(0.0 if best is None else (1.0 / best if name == "MRR" else float(best <= m.depth)))
        assert [s[name] for s in samples] == pytest.approx(naive)
        assert task[f"{name},none"] == pytest.approx(np.mean(naive))
        assert task[f"{name}_stderr,none"] == pytest.approx(np.std(naive, ddof=1) / math.sqrt(len(naive)))
    assert res["probekit"]["summary"]["macro"] == pytest.approx(run.summary()["macro"])
    assert set(res["probekit"]["intervals"]["micro"]) == set(metric_names())


# ---------------------------------------------------------------- hf-eval-results
def test_hf_eval_results_yaml_has_the_hubs_fields(run, tmp_path):
    """Hub ``.eval_results/*.yaml`` (huggingface.co/docs/hub/eval-results): a list of entries, each with
    ``dataset.id``, ``dataset.task_id`` and ``value`` (required), ``date`` and ``notes`` (optional)."""
    (path,) = exports.export_run(run.run_id, tmp_path / ".eval_results", fmt="hf-eval-results")
    assert path.parent.name == ".eval_results" and path.suffix == ".yaml"
    entries = yaml.safe_load(path.read_text())
    summary = run.summary()
    assert len(entries) == 2 * len(metric_names())
    for e in entries:
        assert set(e) <= {"dataset", "value", "verifyToken", "date", "source", "notes", "evaluation_framework"}
        assert e["dataset"]["id"] == run.meta["dataset_spec"]
        subset, name, avg = e["dataset"]["task_id"].split("-")
        assert subset == "full" and e["value"] == pytest.approx(summary[avg][name])
        assert run.meta["model"] in e["notes"] and f"counting {run.counting}" in e["notes"]


# ---------------------------------------------------------------- import
@pytest.mark.parametrize("fmt", [n for n, f in exports.FORMATS.items() if f.importable])
def test_import_gives_back_the_same_run_once(fmt, run, tmp_path):
    """An imported run's summary equals the original's; it is marked imported (id, label, message), never reopened
    as a computed run (its settings key is its own), and importing it again, or its other format, adds nothing."""
    paths = exports.export_run(run.run_id, tmp_path / fmt, fmt=fmt)
    run_id, new = exports.import_run(paths[0])
    assert new and run_id.startswith("imported-") and run_id != run.run_id
    back = runs.load_run(run_id)
    assert _same_summary(back.summary(), run.summary())
    assert back.meta["label"].startswith("imported · ") and "imported from" in back.meta["message"]
    assert back.meta["status"] == "done" and back.meta["settings_key"] != run.meta["settings_key"]
    assert runs.find_run(run.meta["settings_key"]) == run.run_id
    n = len(runs.list_runs())
    assert exports.import_run(tmp_path / fmt) == (run_id, False)  # the folder, told from the files
    others = [n_ for n_ in exports.FORMATS if exports.FORMATS[n_].importable and n_ != fmt]
    for other in others:
        assert exports.import_run(exports.export_run(run.run_id, tmp_path / other, fmt=other)[0]) == (run_id, False)
    assert len(runs.list_runs()) == n


def test_cli_export_import_and_bad_input(run, tmp_path, capsys):
    """The commands: export and import print what they did; bad input is one line on stderr and rc 2."""
    out = tmp_path / "eee"
    assert cli.main(["runs", "export", run.run_id, "--format", "eee", "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("wrote ") == 2
    assert cli.main(["runs", "import", str(out)]) == 0
    assert "imported" in capsys.readouterr().out
    record = next(out.glob("*.json"))
    bad_json = tmp_path / "bad" / record.name
    bad_json.parent.mkdir()
    bad_json.write_text('{"schema_version": "0.3.0", "evaluation_id": ')
    other_schema = tmp_path / "other" / record.name
    other_schema.parent.mkdir()
    other_schema.write_text(record.read_text().replace('"schema_version": "0.3.0"', '"schema_version": "0.2.2"'))
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / record.name).write_text(record.read_text())
    sidecar = next(out.glob("*_samples.jsonl"))
    (changed / sidecar.name).write_text(sidecar.read_text().replace('"score": 0.0', '"score": 1.0', 1) + "\n")
    csv = tmp_path / "run.csv"
    assert cli.main(["runs", "export", run.run_id, "--out", str(csv)]) == 0
    capsys.readouterr()
    cases = [
        (["runs", "export", "run-nope", "--format", "eee", "--out", str(tmp_path / "n")], "no stored run"),
        (["runs", "export", run.run_id, "--format", "lm_eval", "--out", str(tmp_path / "n")], "did you mean 'lm-eval'"),
        (["runs", "export", run.run_id, "--format", "lm-eval", "--out", str(csv)], "it is a file"),
        (["runs", "import", str(bad_json)], "not JSON"),
        (["runs", "import", str(other_schema)], "schema_version '0.2.2'"),
        (["runs", "import", str(changed / record.name)], "checksum"),
        (["runs", "import", str(csv)], "not a probekit export that can be imported"),
        (["runs", "import", str(csv), "--format", "csv"], "cannot be imported"),
        (["runs", "import", str(tmp_path / "missing")], "no such file"),
    ]
    for argv, message in cases:
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, (argv, err)


# ---------------------------------------------------------------- MedLAMA
@pytest.mark.slow
def test_a_medlama_run_exports_to_a_valid_eee_record(medlama_dir, tiny_encoder, tmp_path, monkeypatch):
    """On the real data: a MedLAMA run (two relations of the full set) as an eee record valid under the schema,
    naming the MedLAMA release and the hash of its files."""
    monkeypatch.setenv("PROBEKIT_MEDLAMA_DIR", str(medlama_dir))
    ds = load_dataset("medlama")
    ds = ds.filter(relations=ds.relations[:2], sample=100)
    run = runs.run_benchmark(tiny_encoder, ds, k=10)
    record_path, samples_path = exports.export_run(run.run_id, tmp_path, fmt="eee")
    record = json.loads(record_path.read_text())
    jsonschema.Draft7Validator(EEE_SCHEMA).validate(record)
    validator = jsonschema.Draft7Validator(EEE_INSTANCE_SCHEMA)
    for line in samples_path.read_text().splitlines()[:500]:
        validator.validate(json.loads(line))
    source = record["evaluation_results"][0]["source_data"]
    assert source["source_type"] == "url" and "cambridgeltl/medlama" in source["url"][0]
    assert source["additional_details"]["dataset_version"] == run.meta["dataset_version"]
