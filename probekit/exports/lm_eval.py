"""lm-evaluation-harness's output layout: ``results_<date>.json`` and ``samples_<task>_<date>.jsonl`` in the folder
``--out`` names, as the harness's ``EvaluationTracker`` writes them under ``output_path/<model_name_sanitized>/``
(``save_results_aggregated``, ``save_results_samples``), so tools that read the harness's folders read a probekit
run. The task is the dataset (``medlama-full`` as ``medlama_full``), one sample per query; ``<date>`` is the run's
finish time, so exporting a run again rewrites the same files.

``results_<date>.json`` keeps the harness's keys where they mean the same thing: ``results`` (per task, each
registered metric as ``"<metric>,none"``: the micro average, the mean of the samples' values under ``query``
counting, with ``"<metric>_stderr,none"``), ``configs`` (dataset path/name, the prompt field, ``metric_list``),
``versions`` (the dataset's version: a hash of its files), ``n-shot``, ``higher_is_better``, ``n-samples``,
``config`` (``model_args`` with the model id and revision, ``model_revision``, ``device``), ``task_hashes``
(sha256 over the samples' doc/prompt/target hashes), ``model_name``, ``model_source``, ``date``,
``total_evaluation_time_seconds``. What the harness has no key for is under ``probekit``: the exporting version,
the provenance, the run's whole metadata, :meth:`~probekit.bench.results.Run.summary` (macro and micro of every
metric, per relation, the hard block) and its intervals.

Each sample keeps the harness's ``doc_id``, ``doc`` (query id, relation, subject, template, query, golds, hardness),
``target`` (the golds), ``arguments`` (``gen_args_i``: the prompt and the i-th ranked candidate, as a
multiple-choice task lists its choices), ``resps``/``filtered_resps`` (the candidates' scores), ``filter``,
``metrics``, ``doc_hash``/``prompt_hash``/``target_hash`` and one key per metric (the query's score); then
probekit's own ``gold_ranks``, ``best_gold_rank``, ``top_ids``, ``top_names``, ``top_scores`` and
``n_candidates``, what a run is rebuilt from.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from .. import __version__, atomic
from ..bench.frames import Run
from ..errors import DataFormatError
from ..metrics.intervals import run_intervals
from .base import (
    ExportFormat,
    Imported,
    clean,
    loads,
    meta_from_json,
    need,
    provenance,
    read_jsonl,
    read_text,
    result_rows,
    rows_frame,
    run_meta_json,
    sample_scores,
    sha256_text,
    slug,
    standard_error,
)

DOC_KEYS = ("query_id", "relation", "subject", "template", "query", "golds", "gold_length", "hard")
RANKING_KEYS = ("gold_ranks", "best_gold_rank", "top_ids", "top_names", "top_scores", "n_candidates")


def task_name(run: Run) -> str:
    return slug(str(run.meta.get("dataset") or "probekit"), keep="").replace("-", "_").lower()


def _when(run: Run) -> datetime:
    when = run.meta.get("finished_at") or run.meta.get("created_at")
    return datetime.fromisoformat(when) if isinstance(when, str) else (when or datetime(1970, 1, 1))


def date_id(run: Run) -> str:
    """The harness's file date (``datetime.isoformat()`` with ``-`` for ``:``) of the run's finish time."""
    return _when(run).isoformat().replace(":", "-")


def samples(run: Run) -> list[dict]:
    scores = sample_scores(run)
    out = []
    for i, row in enumerate(result_rows(run)):
        doc = {k: row[k] for k in DOC_KEYS}
        prompt = row["query"] or ""
        target = row["golds"]
        sample = {
            "doc_id": i, "doc": doc, "target": target,
            "arguments": {f"gen_args_{j}": {"arg_0": prompt, "arg_1": name} for j, name in enumerate(row["top_names"])},
            "resps": [[s] for s in row["top_scores"]], "filtered_resps": list(row["top_scores"]), "filter": "none",
            "metrics": list(scores),
            "doc_hash": sha256_text(json.dumps(doc, indent=2, ensure_ascii=False)),
            "prompt_hash": sha256_text(prompt), "target_hash": sha256_text(json.dumps(target, ensure_ascii=False)),
            **{name: values[i] for name, values in scores.items()},
            **{k: row[k] for k in RANKING_KEYS},
        }
        out.append(sample)
    return out


def results(run: Run, task: str, sample_list: list[dict]) -> dict:
    prov = provenance(run)
    summary = run.summary()
    scores = sample_scores(run)
    stderr = run.counting == "query"  # then micro is the samples' mean, and its stderr theirs
    per_task: dict = {"alias": task}
    for name in scores:
        per_task[f"{name},none"] = summary["micro"].get(name)
        se = standard_error(scores[name]) if stderr else None
        per_task[f"{name}_stderr,none"] = "N/A" if se is None else se
    model, revision = prov["model"], prov["model_revision"]
    return clean({
        "results": {task: per_task},
        "group_subtasks": {task: []},
        "configs": {task: {
            "task": task, "dataset_path": prov["dataset_spec"] or prov["dataset"], "dataset_name": prov["dataset_set"],
            "test_split": prov["dataset_set"] or "test", "doc_to_text": "{{query}}", "doc_to_target": "{{golds}}",
            "doc_to_choice": "the candidate vocabulary, ranked (arguments: the top k)",
            "output_type": f"probekit:{prov['probe']}", "num_fewshot": 0,
            "metric_list": [{"metric": n, "aggregation": "mean", "higher_is_better": True} for n in scores],
            "metadata": {"version": prov["dataset_version"], "probe": prov["probe"], "options": prov["options"],
                         "vocab": prov["vocab"], "k": prov["k"], "counting": prov["counting"]},
        }},
        "versions": {task: prov["dataset_version"]},
        "n-shot": {task: 0},
        "higher_is_better": {task: {n: True for n in scores}},
        "n-samples": {task: {"original": run.meta.get("n_queries") or len(sample_list), "effective": len(sample_list)}},
        "config": {"model": prov["model_source"], "model_args": f"pretrained={model},revision={revision}",
                   "model_revision": revision, "model_sha": revision, "batch_size": None, "device": prov["device"],
                   "limit": None, "bootstrap_iters": 1000, "random_seed": 0},
        "git_hash": None,
        "date": _when(run).replace(tzinfo=UTC).timestamp(),  # stored times are UTC
        "task_hashes": {task: sha256_text("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"]
                                                  for s in sample_list))},
        "model_source": prov["model_source"], "model_name": model,
        "model_name_sanitized": str(model).replace("/", "__"),
        "total_evaluation_time_seconds": None if run.meta.get("seconds") is None else str(run.meta["seconds"]),
        "probekit": {"version": __version__, "provenance": prov, "probekit_run": run_meta_json(run),
                     "summary": summary, "intervals": run_intervals(run.rankings(), counting=run.counting)},
    })


def write(run: Run, out: Path) -> list[Path]:
    task, date = task_name(run), date_id(run)
    res_path, samples_path = out / f"results_{date}.json", out / f"samples_{task}_{date}.jsonl"
    atomic.safe_target(res_path)
    atomic.safe_target(samples_path)
    sample_list = samples(run)
    body = "".join(json.dumps(clean(s), ensure_ascii=False) + "\n" for s in sample_list)
    atomic.write_text(samples_path, body)  # the samples first: results never name samples not yet written
    atomic.write_json(res_path, results(run, task, sample_list), indent=2, ensure_ascii=False)
    return [res_path, samples_path]


# ---------------------------------------------------------------- reading back
def _results_path(path: Path) -> Path:
    if path.is_dir():
        found = sorted(path.glob("results_*.json"))
        if len(found) != 1:
            raise DataFormatError(f"{path}: expected one results_*.json in the folder, found {len(found)}; name it")
        return found[0]
    return path


def detect(path: Path) -> bool:
    try:
        target = _results_path(path)
        head = read_text(target)[:4096] if target.name.startswith("results_") else ""
    except Exception:
        return False
    return '"results"' in head


def read(path: Path) -> Imported:
    """The run of a probekit lm-eval export (its ``results_*.json`` or the folder holding it) and its samples."""
    res_path = _results_path(path)
    where = res_path.name
    res = loads(read_text(res_path), where=where)
    meta = meta_from_json(need(res, "probekit", "probekit_run", where=where), where=where)
    tasks = list(need(res, "results", where=where))
    if len(tasks) != 1:
        raise DataFormatError(f"{where}: {len(tasks)} tasks; a probekit export has one")
    date = res_path.stem[len("results_"):]
    samples_path = res_path.with_name(f"samples_{tasks[0]}_{date}.jsonl")
    if not samples_path.exists():
        raise DataFormatError(f"{where}: its samples file {samples_path.name} is not beside it")
    rows = []
    for i, s in enumerate(read_jsonl(samples_path), 1):
        doc = need(s, "doc", where=f"{samples_path.name}, line {i}")
        rows.append({**{k: doc.get(k) for k in DOC_KEYS},
                     **{k: need(s, k, where=f"{samples_path.name}, line {i}") if k != "n_candidates" else s.get(k)
                        for k in RANKING_KEYS}})
    return meta, rows_frame(rows, where=samples_path.name)


FORMAT = ExportFormat("lm-eval", "lm-evaluation-harness results_<date>.json + samples_<task>_<date>.jsonl; --out: "
                      "a folder", write, folder=True, read=read, detect=detect)
