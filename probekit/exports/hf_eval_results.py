"""Hugging Face Hub evaluation results: a YAML file for a model repo's ``.eval_results/`` folder, the form the Hub
documentation describes now (https://huggingface.co/docs/hub/eval-results, "Model Evaluation Results"; the older
form is the ``model-index`` block in a model card's metadata, which this does not write).

The file is a YAML list, one entry per registered metric the method has and per average (macro over relations,
micro over items) on the run's set: ``dataset.id`` (the run's dataset spec), ``dataset.task_id``
(``<set>-<metric>-<average>``, e.g. ``full-acc@1-macro``), ``value`` (a 0-1 proportion), ``date`` (the run's finish
time) and ``notes``, which carry the provenance the Hub has no field for: model id and revision, dataset version (a
hash of its files), probe, options, vocabulary, k, counting and the probekit versions. A comment header says the
same. The Hub only shows a result on a leaderboard when ``dataset.id`` is a registered Benchmark dataset and
``task_id`` one of its ``eval.yaml`` tasks: MedLAMA is none today, so rename both before opening the pull request
if a Benchmark for it exists. ``--out``: a ``.yaml`` file, or a folder (the model repo's ``.eval_results/``) where
the file is ``probekit-<dataset>-<probe>.yaml``. Not importable: the file holds scores, not the per-query rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from .. import atomic
from ..bench.frames import Run
from ..metrics.compare import run_subsets
from .base import ExportFormat, finite, provenance, sample_scores, slug


def notes(prov: dict, name: str, average: str) -> str:
    return (f"{name}, {average} average; model {prov['model']} (source {prov['model_source']}, revision "
            f"{prov['model_revision'] or 'unknown'}); dataset {prov['dataset_spec'] or prov['dataset']} version "
            f"{prov['dataset_version'] or 'unknown'} (hash of its files); probe {prov['probe']} options "
            f"{json.dumps(prov['options'], sort_keys=True, default=str)}; vocab {prov['vocab']}; k {prov['k']}; "
            f"counting {prov['counting']} ({prov['counting_rule']}); run {prov['run_id']}; {prov['computed_with']}, "
            f"{prov['exported_with']}")


def entries(run: Run) -> list[dict]:
    prov = provenance(run)
    summary = run.summary()
    subset = run_subsets(run.hard_set)[0]
    dataset_id = str(prov["dataset_spec"] or prov["dataset"] or "unknown")
    out = []
    for name in sample_scores(run):
        for average in ("macro", "micro"):
            value = finite(summary[average].get(name))
            if value is None:
                continue
            entry: dict = {"dataset": {"id": dataset_id, "task_id": f"{subset}-{name}-{average}"}, "value": value}
            when = prov["finished_at"] or prov["created_at"]
            if when:
                entry["date"] = str(when).replace(" ", "T")
            entry["notes"] = notes(prov, name, average)
            out.append(entry)
    return out


def write(run: Run, out: Path) -> list[Path]:
    prov = provenance(run)
    target = out if out.suffix in (".yaml", ".yml") else out / (
        f"probekit-{slug(prov['dataset'] or 'dataset')}-{slug(prov['probe'] or 'probe')}.yaml")
    atomic.safe_target(target)
    head = "".join(f"# {key}: {json.dumps(prov[key], sort_keys=True, default=str)}\n"
                   for key in ("run_id", "model", "model_source", "model_revision", "dataset", "dataset_set",
                               "dataset_version", "probe", "options", "vocab", "k", "counting", "computed_with",
                               "exported_with"))
    body = yaml.safe_dump(entries(run), sort_keys=False, allow_unicode=True, width=1000)
    return [atomic.write_text(target, "# Hugging Face Hub evaluation results (.eval_results/), written by probekit\n"
                              + head + body)]


FORMAT = ExportFormat("hf-eval-results", "Hugging Face Hub .eval_results/ YAML (one entry per metric and average); "
                      "--out: a .yaml file or a folder", write, folder=True, suffixes=(".yaml", ".yml"))
