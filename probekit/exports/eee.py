"""Every Eval Ever (the EvalEval coalition's shared schema for evaluation results), schema version 0.3.0.

Source: https://github.com/evaleval/every_eval_ever (``every_eval_ever/schemas/eval.schema.json`` and
``instance_level_eval.schema.json``, MIT licence; copies with their provenance in ``tests/data/eee/``, which the
tests validate every export against). The layout is the datastore's: an aggregate record ``<uuid>.json`` and, beside
it, its instance-level sidecar ``<uuid>_samples.jsonl``, one line per (query, metric) as the schema asks ("a sample
scored by K aggregate metrics produces K instance records"). ``--out`` is a folder (both files go in it, named by a
UUID4 drawn from the run id, so exporting a run again rewrites the same files) or a ``.json`` file (the sidecar is
``<stem>_samples.jsonl`` beside it).

The record, field by field: ``evaluation_id`` = ``<dataset>/<model>/<run id>`` (stable: never keyed on the export
time); ``model_info`` = the model's Hugging Face id (a local path as ``local/<folder>``) with its source, revision
and probekit's own id in ``additional_details``; ``eval_library`` = probekit and its version, the run's whole
metadata as JSON (``probekit_run``: what :func:`read` rebuilds the run from) and the counting convention;
``evaluation_results`` = every registered metric defined for the method, macro (over relations) and micro (over
items), for the run's set, its hard-in-full block and each relation, each with its metric parameters (k, average,
counting), a 0-1 proportion, its interval (:func:`probekit.metrics.intervals.run_intervals`) and, for a micro
value, its standard error; ``source_data`` = the dataset (its release URL when probekit knows it) with its set, spec
and version (the hash of its files); ``generation_config.additional_details`` = probe, options, vocabulary, k.
Each instance line: the query (``input.raw``), its golds (``input.reference``), the top-k names (``output.raw``),
the query's score, and probekit's whole per-query row (gold ranks, top-k ids and scores, hardness…) as strings in
``metadata``.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from pathlib import Path

from .. import __version__, atomic
from ..bench.frames import Run
from ..datasets.base import HARD_IN_FULL
from ..datasets.fetch import RELEASES
from ..errors import DataFormatError
from ..metrics.compare import run_subsets
from ..metrics.intervals import METHOD, run_intervals
from ..metrics.registry import get_metric
from ..model_registry import ALIASES, REGISTRY
from .base import (
    ExportFormat,
    Imported,
    finite,
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
    slug,
    standard_error,
)

SCHEMA_VERSION = "0.3.0"
SOURCE = "https://github.com/evaleval/every_eval_ever"
CONFIDENCE = 0.95


def hf_model_id(model: str) -> str:
    """The model as a Hugging Face id: a Hub id as it is (probekit's ``default`` as the Hub id it embeds), a local
    folder as ``local/<folder>``.

    >>> hf_model_id("dmis-lab/biobert-v1.1"), hf_model_id("t5-small"), hf_model_id("default")
    ('dmis-lab/biobert-v1.1', 't5-small', 'sentence-transformers/all-MiniLM-L6-v2')
    >>> hf_model_id("/tmp/m/tiny_enc0")
    'local/tiny_enc0'
    """
    model = str(model or "unknown")
    hub = next((alias for alias, name in ALIASES.items() if name == model and "/" in alias), None)
    if hub is not None:
        return hub
    parts = model.split("/")
    if model in REGISTRY or (len(parts) == 2 and all(parts) and not model.startswith((".", "~"))):
        return model
    return f"local/{Path(model).name or 'model'}"


def developer_and_name(model_id: str) -> tuple[str, str]:
    """``org/name`` split; a Hub id without an org (``t5-small``) has developer ``unknown``."""
    org, _, name = model_id.rpartition("/")
    return org or "unknown", name


def file_uuid(run_id: str) -> str:
    """A UUID4 (the datastore's file names) drawn from the run id: the same run, the same file names."""
    return str(uuid.UUID(bytes=hashlib.sha256(str(run_id).encode()).digest()[:16], version=4))


def _strings(d: dict) -> dict[str, str]:
    """``additional_details``: every value a string (JSON for anything but a string), None left out."""
    return {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str) for k, v in d.items()
            if v is not None}


def _source_data(prov: dict) -> dict:
    base = str(prov["dataset"] or "").split(":")[0].rsplit("-", 1)[0] if prov["dataset"] else ""
    details = _strings({"dataset_set": prov["dataset_set"], "dataset_spec": prov["dataset_spec"],
                        "dataset_version": prov["dataset_version"],
                        "dataset_version_is": "a hash of the dataset files' bytes (probekit fingerprint_files)"})
    name = str(prov["dataset"] or "unknown")
    release = RELEASES.get(base)
    if release is not None:
        return {"dataset_name": name, "source_type": "url", "url": [release.page.split(" ")[0]],
                "additional_details": details}
    return {"dataset_name": name, "source_type": "other", "additional_details": details}


def _metric_config(name: str, average: str, counting: str, scope: str) -> dict:
    m = get_metric(name)
    k = m.depth
    metric_id, kind = ("hits_at_k", "accuracy") if name.startswith("acc@") else (
        ("mrr", "mrr") if name == "MRR" else (f"probekit.{name}", name))
    return {
        "evaluation_description": f"{m.description}; {average} average "
                                  f"({'mean over relations' if average == 'macro' else 'over all items'}) on {scope}",
        "metric_id": metric_id, "metric_name": f"{name} ({average})", "metric_kind": kind, "metric_unit": "proportion",
        "metric_parameters": {**({"k": k} if k is not None else {}), "average": average, "counting": counting},
        "lower_is_better": False, "score_type": "continuous", "min_score": 0.0, "max_score": 1.0,
        "additional_details": {"probekit_metric": name},
    }


def _results(run: Run, prov: dict, scores: dict) -> list[dict]:
    summary = run.summary()
    ci = run_intervals(run.rankings(), counting=run.counting, confidence=CONFIDENCE)
    subset = run_subsets(run.hard_set)[0]
    source = _source_data(prov)
    when = prov["finished_at"] or prov["created_at"]
    dataset = str(prov["dataset"] or "unknown")
    blocks: list[tuple[str, str, dict, dict | None]] = [(subset, dataset, summary, ci)]
    if not run.hard_set and summary.get(HARD_IN_FULL):
        blocks.append((HARD_IN_FULL, f"{dataset}.{HARD_IN_FULL}", summary[HARD_IN_FULL], None))
    out = []
    for name in scores:
        for scope, evaluation, block, intervals in blocks:
            for average in ("macro", "micro"):
                score = finite(block[average].get(name))
                if score is None:
                    continue
                uncertainty: dict = {"num_samples": int(block["n_items"])}
                if intervals is not None:
                    lo, hi = intervals[average][name]
                    if finite(lo) is not None:
                        uncertainty["confidence_interval"] = {"lower": lo, "upper": hi, "confidence_level": CONFIDENCE,
                                                              "method": METHOD}
                if scope == subset and average == "micro" and (se := standard_error(scores[name])) is not None:
                    uncertainty["standard_error"] = {"value": se, "method": "analytic (sample sd / sqrt n)"}
                out.append(_result(f"{name}:{average}:{scope}", evaluation, source, when,
                                   _metric_config(name, average, prov["counting"], scope), score, uncertainty,
                                   {"n_queries": block["n_queries"], "subset": scope}, prov))
        for rel, row in summary["relations"].items():
            score = finite(row.get(name))
            if score is not None:
                out.append(_result(f"{name}:relation:{rel}", f"{dataset}.{rel}", source, when,
                                   _metric_config(name, "micro", prov["counting"], f"relation {rel}"), score,
                                   {"num_samples": int(row["n_items"])}, {"n_queries": row["n"], "relation": rel},
                                   prov))
    return out


def _result(rid, evaluation, source, when, config, score, uncertainty, details, prov) -> dict:
    out = {"evaluation_result_id": rid, "evaluation_name": evaluation, "source_data": source, "metric_config": config,
           "score_details": {"score": score, "uncertainty": uncertainty, "details": _strings(details)},
           "generation_config": {"additional_details": _strings({
               "probe": prov["probe"], "options": prov["options"], "vocab": prov["vocab"], "k": prov["k"],
               "answers_per_query": prov["answers_per_query"], "search": prov["search"]})}}
    if when:
        out["evaluation_timestamp"] = when
    return out


def record(run: Run) -> dict:
    """The aggregate record of ``run`` (the module docstring says what goes where), without its sidecar's
    ``detailed_evaluation_results`` (:func:`write` adds it)."""
    prov = provenance(run)
    model = hf_model_id(prov["model"])
    out = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"{slug(prov['dataset'] or 'dataset')}/{model}/{run.run_id}",
        "retrieved_timestamp": f"{time.time():.3f}",
        "source_metadata": {"source_name": "probekit", "source_type": "evaluation_run",
                            "source_organization_name": "unknown", "evaluator_relationship": "other",
                            "additional_details": _strings({"run_id": run.run_id, "label": prov["label"]})},
        "model_info": {"name": str(prov["model"]), "id": model, "developer": developer_and_name(model)[0],
                       "inference_platform": "local", "additional_details": {
                           "deployment_type": "self_deployed", "model_availability": "unknown",
                           **_strings({"probekit_model": prov["model"], "model_source": prov["model_source"],
                                       "model_revision": prov["model_revision"], "device": prov["device"]})}},
        "eval_library": {"name": "probekit", "version": __version__, "additional_details": _strings({
            "computed_with": prov["computed_with"], "counting": prov["counting"],
            "counting_rule": prov["counting_rule"], "probekit_run": run_meta_json(run)})},
        "evaluation_results": _results(run, prov, sample_scores(run)),
    }
    if prov["finished_at"] or prov["created_at"]:
        out["evaluation_timestamp"] = prov["finished_at"] or prov["created_at"]
    return out


def sample_lines(run: Run, evaluation_id: str, model: str) -> list[str]:
    """The instance-level sidecar's lines: per query, one record per metric with a micro result."""
    prov = provenance(run)
    subset = run_subsets(run.hard_set)[0]
    scores = sample_scores(run)
    lines = []
    for i, row in enumerate(result_rows(run)):
        raw, reference = row["query"] or row["query_id"], row["golds"]
        sample_hash = hashlib.sha256(json.dumps({"raw": raw, "reference": reference}, sort_keys=True,
                                                separators=(",", ":")).encode()).hexdigest()
        meta = _strings(row)
        for name, values in scores.items():
            value = values[i]
            if value is None:
                continue
            top = row["top_names"][0] if row["top_names"] else ""
            lines.append(json.dumps({
                "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": model,
                "evaluation_name": str(prov["dataset"] or "unknown"), "evaluation_result_id": f"{name}:micro:{subset}",
                "sample_id": row["query_id"], "sample_hash": sample_hash, "interaction_type": "single_turn",
                "input": {"raw": raw, "reference": reference},
                "output": {"raw": row["top_names"]}, "messages": None,
                "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": top,
                                        "extraction_method": f"probekit {prov['probe']}: ranked candidates",
                                        "is_terminal": True}],
                "evaluation": {"score": value, "is_correct": value == 1.0},
                "metadata": meta,
            }, ensure_ascii=False))
    return lines


def write(run: Run, out: Path, *, library_details: dict[str, str] | None = None,
          extra_results: list[dict] | None = None) -> list[Path]:
    """Write the record and its sidecar (module docstring). ``library_details``: more ``eval_library``
    ``additional_details`` (strings, the schema's rule) and ``extra_results``: more ``evaluation_results``, for an
    export that carries more than the run (a comparison, :mod:`probekit.exports.comparison`)."""
    name = file_uuid(str(run.run_id))
    target = out if out.suffix == ".json" else out / f"{name}.json"
    samples = target.with_name(f"{target.stem}_samples.jsonl")
    atomic.safe_target(target)
    atomic.safe_target(samples)
    prov = provenance(run)
    model = hf_model_id(prov["model"])
    rec = record(run)
    rec["eval_library"]["additional_details"].update(library_details or {})
    rec["evaluation_results"].extend(extra_results or [])
    body = "".join(line + "\n" for line in sample_lines(run, rec["evaluation_id"], model)).encode("utf-8")
    developer, model_name = developer_and_name(model)
    repo_path = f"data/{slug(prov['dataset'] or 'dataset')}/{slug(developer)}/{slug(model_name)}/{name}_samples.jsonl"
    rec["detailed_evaluation_results"] = {"format": "jsonl", "file_path": repo_path, "hash_algorithm": "sha256",
                                          "checksum": hashlib.sha256(body).hexdigest(),
                                          "total_rows": body.count(b"\n")}
    atomic.write_bytes(samples, body)  # the sidecar first: a record never points at a sidecar not yet written
    atomic.write_json(target, rec, indent=2, ensure_ascii=False)
    return [target, samples]


# ---------------------------------------------------------------- reading back
def _record_path(path: Path) -> Path:
    if path.is_dir():
        found = sorted(p for p in path.glob("*.json"))
        if len(found) != 1:
            raise DataFormatError(f"{path}: expected one eee record (*.json) in the folder, found {len(found)}; "
                                  f"name the file")
        return found[0]
    return path


def detect(path: Path) -> bool:
    try:
        head = read_text(_record_path(path))[:4096] if path.exists() else ""
    except Exception:
        return False
    return '"schema_version"' in head and '"evaluation_id"' in head


def read(path: Path) -> Imported:
    """The run of a probekit eee export (its record, or the folder holding it) and its sidecar."""
    rec_path = _record_path(path)
    where = rec_path.name
    rec = loads(read_text(rec_path), where=where)
    if need(rec, "schema_version", where=where) != SCHEMA_VERSION:
        raise DataFormatError(f"{where}: schema_version {rec['schema_version']!r}; probekit reads {SCHEMA_VERSION}")
    if need(rec, "eval_library", "name", where=where) != "probekit":
        raise DataFormatError(f"{where}: made by {rec['eval_library']['name']!r}, not probekit: only probekit's own "
                              f"records carry the per-query rows a run is rebuilt from")
    meta = meta_from_json(need(rec, "eval_library", "additional_details", "probekit_run", where=where), where=where)
    detail = need(rec, "detailed_evaluation_results", where=where)
    samples = rec_path.with_name(f"{rec_path.stem}_samples.jsonl")
    if not samples.exists():
        samples = rec_path.with_name(Path(str(need(detail, "file_path", where=where))).name)
    body = samples.read_bytes() if samples.exists() else None
    if body is None:
        raise DataFormatError(f"{where}: its samples file {samples.name} is not beside it")
    if detail.get("checksum") and hashlib.sha256(body).hexdigest() != detail["checksum"]:
        raise DataFormatError(f"{samples.name}: its SHA-256 is not the record's checksum (changed since export)")
    rows, seen = [], set()
    for i, line in enumerate(read_jsonl(samples), 1):
        md = need(line, "metadata", where=f"{samples.name}, line {i}")
        if not isinstance(md, dict) or md.get("query_id") in seen:
            continue
        seen.add(md.get("query_id"))
        row = {}
        for key, value in md.items():
            row[key] = value if key in ("query_id", "relation", "subject", "template", "query") else loads(
                value, where=f"{samples.name}, line {i}, metadata.{key}")
        rows.append(row)
    return meta, rows_frame(rows, where=samples.name)


FORMAT = ExportFormat("eee", "Every Eval Ever (EvalEval) record + instance-level samples sidecar (schema "
                      f"{SCHEMA_VERSION}); --out: a folder or a .json file", write, folder=True, suffixes=(".json",),
                      read=read, detect=detect)
