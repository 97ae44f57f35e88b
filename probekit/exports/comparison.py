"""A paired comparison of two stored runs (:func:`probekit.bench.paired.compare_runs`) written where other tools
read results, so the evidence for "is A − B real?" travels with both runs' numbers.

:data:`COMPARISON_FORMATS` holds one :class:`ComparisonFormat` per name:

- ``json``: the comparison document alone (``--out`` a ``.json`` file, or a folder that gets ``comparison.json``);
- ``eee``: ``A/`` and ``B/``, each run's own Every Eval Ever export (:mod:`~probekit.exports.eee`), whose records also
  carry the comparison: the document as JSON text in ``eval_library.additional_details.probekit_comparison`` (the
  schema's place for extra details: an object of strings), and in run A's record every row of the test as an
  ``evaluation_results`` entry (``metric_id`` ``probekit.paired_difference``: the score is A − B, its bootstrap
  interval in ``uncertainty.confidence_interval``, the test and the p-values in ``score_details.details``); then
  ``comparison.json`` beside them;
- ``lm-eval``: ``A/`` and ``B/``, each run's lm-evaluation-harness folder (:mod:`~probekit.exports.lm_eval`), as a
  harness run writes one folder per model, and ``comparison.json`` beside them (a harness ``results_*.json`` holds
  one model's tasks: it has no key for two).

``hf-eval-results`` carries no comparison: a Hub ``.eval_results`` entry is a score of the repository's own model
on a benchmark task, with no field for a difference between two runs or its test; it is refused in one line.

The document (:func:`comparison_document`) holds the test's full result (:meth:`PairedComparison.to_dict`: metric,
query set, confidence, resamples, seed, correction, one row per relation then macro and micro with n, A, B,
A − B, its interval, the test, p and the adjusted p), the two summary sentences, the counting (a paired test scores
each query once, by its best gold: ``query``), and per run its id, label, provenance (model, revision, dataset and
the hash of its files, probe, options, probekit versions) and a SHA-256 of its per-query rows; ``comparison.json``
adds each run file's path and SHA-256. The document is written last, so it never names a file not yet there.
:func:`stored_comparison` reads it back (the folder, ``comparison.json`` or an eee record carried alone) as the
same :class:`PairedComparison`, whose sentences are the exported ones; ``probekit runs import OUT/A`` (and ``B``)
brings the runs themselves back.
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .. import __version__, atomic
from ..bench.frames import Run
from ..bench.paired import compare_runs
from ..bench.results import load_run
from ..errors import DataFormatError, ProbekitError, Registry
from ..metrics.accuracy import COUNTINGS
from ..metrics.paired import PairedComparison
from ..metrics.registry import get_metric
from . import eee, lm_eval
from .base import loads, need, provenance, read_text, result_rows

KIND = "probekit paired comparison"
VERSION = 1
DOCUMENT = "comparison.json"
ROLES = ("A", "B")
COLUMNS = ["relation", "n", "A", "B", "diff", "lo", "hi", "test", "p", "p adjusted"]
INTERVAL_METHOD = "paired bootstrap, queries resampled within each relation (percentile interval)"
NOT_CARRIED = {
    "hf-eval-results": "a Hub .eval_results entry is a score of the repository's own model on a benchmark task, "
                       "with no field for the difference between two runs or its test",
    "csv": "a per-query table of one run", "parquet": "a per-query table of one run",
    "table": "the screen's format",
}
"""Names a comparison is not written in, and why (one line instead of an export that drops the test)."""


@dataclass(frozen=True)
class ComparisonFormat:
    """One way to write a comparison: ``write_run(run, folder, document)`` writes one run's own export into
    ``folder`` (None: the format is the document alone)."""

    name: str
    description: str
    write_run: Callable[[Run, Path, dict], list[Path]] | None = None

    @property
    def folder(self) -> bool:
        return self.write_run is not None


def _eee_run(run: Run, out: Path, doc: dict) -> list[Path]:
    details = {"probekit_comparison": json.dumps(doc, sort_keys=True, ensure_ascii=False)}
    extra = difference_results(run, doc) if run.run_id == doc["a"]["run_id"] else []
    return eee.write(run, out, library_details=details, extra_results=extra)


def _lm_eval_run(run: Run, out: Path, doc: dict) -> list[Path]:
    return lm_eval.write(run, out)


COMPARISON_FORMATS: Registry = Registry("comparison format")
"""Name -> :class:`ComparisonFormat`."""
for _fmt in (
    ComparisonFormat("json", "the comparison document alone; --out: a .json file or a folder (comparison.json)"),
    ComparisonFormat("eee", "A/ and B/: each run's Every Eval Ever record + samples, the comparison inside both "
                     "records; comparison.json beside; --out: a folder", _eee_run),
    ComparisonFormat("lm-eval", "A/ and B/: each run's lm-evaluation-harness folder; comparison.json beside; "
                     "--out: a folder", _lm_eval_run),
):
    COMPARISON_FORMATS[_fmt.name] = _fmt


def get_comparison_format(name: str) -> ComparisonFormat:
    """The format ``name``; a format that cannot carry a comparison, or an unknown one, is one line."""
    name = str(name)
    if name in NOT_CARRIED:
        raise ProbekitError(f"a comparison is not exported as {name} ({NOT_CARRIED[name]}); formats that carry a "
                            f"comparison: {', '.join(COMPARISON_FORMATS)}")
    return COMPARISON_FORMATS.get_or_raise(name)


# ---------------------------------------------------------------- the document
def rows_sha256(run: Run) -> str:
    """A SHA-256 of the run's per-query rows (what every number of the comparison is computed from)."""
    return hashlib.sha256(json.dumps(result_rows(run), sort_keys=True).encode("utf-8")).hexdigest()


def _side(run: Run, role: str) -> dict:
    return {"role": role, "run_id": str(run.run_id), "label": run.meta.get("label"), "rows_sha256": rows_sha256(run),
            "provenance": provenance(run)}


def comparison_document(a: Run, b: Run, cmp: PairedComparison) -> dict:
    """The comparison of run ``a`` against run ``b`` (module docstring), plain JSON values."""
    result = json.loads(json.dumps(cmp.to_dict(), default=_plain))
    micro = cmp.row("micro")
    return {
        "kind": KIND, "version": VERSION, "exported_with": f"probekit {__version__}",
        "sentences": {avg: cmp.sentence(avg) for avg in ("micro", "macro")},
        "queries": {"dataset": a.meta.get("dataset"), "subset": cmp.which, "n_paired": int(micro["n"]),
                    "counting": "query", "counting_rule": COUNTINGS["query"] + "; one item per query, scored by "
                                                                             "its best gold"},
        "a": _side(a, "A"), "b": _side(b, "B"),
        "comparison": result,
    }


def _plain(value):
    """numpy numbers as Python's (``json.dumps`` default)."""
    return value.item() if hasattr(value, "item") else str(value)


def difference_results(run: Run, doc: dict) -> list[dict]:
    """Run A's eee ``evaluation_results`` entries for the test: one per row (relations, macro, micro), the score
    A − B with its bootstrap interval, the test, p and adjusted p in ``details``."""
    res = doc["comparison"]
    metric, baseline = res["metric"], doc["b"]["run_id"]
    source = eee._source_data(provenance(run))
    dataset = str(doc["queries"]["dataset"] or "unknown")
    k = get_metric(metric).depth
    out = []
    for r in res["rows"]:
        rel = r["relation"]
        scope = rel if rel in ("macro", "micro") else "relation"
        rid = f"{metric}:{scope}:{res['subset']}" if scope != "relation" else f"{metric}:relation:{rel}"
        part = f"relation {rel}" if scope == "relation" else scope
        config = {
            "evaluation_description": f"{metric} of this run (A) minus run {baseline} (B) on the {r['n']} "
                                      f"{res['subset']} queries both hold ({part}); {r['test']}",
            "metric_id": "probekit.paired_difference", "metric_name": f"{metric} A − B ({scope})",
            "metric_kind": "difference", "metric_unit": "proportion",
            "metric_parameters": {**({"k": k} if k is not None else {}), "metric": metric,
                                  "average": "micro" if scope == "relation" else scope, "counting": "query",
                                  "baseline_run_id": baseline, "resamples": res["n_boot"], "seed": res["seed"],
                                  "correction": res["correction"]},
            "lower_is_better": False, "score_type": "continuous", "min_score": -1.0, "max_score": 1.0,
        }
        details = {"A": r["A"], "B": r["B"], "test": r["test"], "p": r["p"], "p_adjusted": r["p adjusted"],
                   "correction": res["correction_rule"] if scope == "relation" else None,
                   "baseline_run_id": baseline, "n_paired": r["n"]}
        out.append({
            "evaluation_result_id": f"{rid}:minus:{baseline}",
            "evaluation_name": dataset if scope != "relation" else f"{dataset}.{rel}", "source_data": source,
            "metric_config": config,
            "score_details": {"score": r["diff"], "details": eee._strings(details), "uncertainty": {
                "confidence_interval": {"lower": r["lo"], "upper": r["hi"], "confidence_level": res["confidence"],
                                        "method": INTERVAL_METHOD},
                "num_samples": int(r["n"]), "num_bootstrap_samples": int(res["n_boot"])}},
        })
    return out


# ---------------------------------------------------------------- writing
def _target(out: str | Path, fmt: ComparisonFormat) -> Path:
    """Where the document goes; the folder's parent must exist (a typo never grows a tree of folders)."""
    target = Path(out).expanduser()
    if not target.parent.is_dir():
        raise ProbekitError(f"cannot write {target}: its folder {target.parent} does not exist")
    if not fmt.folder and target.suffix.lower() == ".json":
        return target
    if target.exists() and not target.is_dir():
        raise ProbekitError(f"cannot write a {fmt.name} comparison into {target}: it is a file; give a folder")
    return target / DOCUMENT


def _check_reusable(doc_path: Path, fmt: ComparisonFormat, a: str, b: str) -> None:
    """A folder is written into when it is new, empty, or holds this very export (same runs, same format): an
    export never mixes its files with others' (an ``A/`` holding two records would import as neither)."""
    folder = doc_path.parent
    if not fmt.folder or not folder.is_dir() or not any(folder.iterdir()):
        return
    try:
        old = json.loads(doc_path.read_text(encoding="utf-8"))
        same = (old["format"], old["a"]["run_id"], old["b"]["run_id"]) == (fmt.name, a, b)
    except (OSError, ValueError, KeyError, TypeError):
        same = False
    if not same:
        raise ProbekitError(f"{folder} already holds other files: give a new or empty folder for the comparison")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_comparison(run_a: str, run_b: str, out: str | Path, *, fmt: str | None = None, metric: str = "acc@10",
                      which: str | None = None, confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
                      correction: str = "holm") -> list[Path]:
    """Compare stored run ``run_a`` against ``run_b`` (the settings of :func:`compare_runs`) and write the
    comparison under ``out`` in format ``fmt`` (default ``json`` for a ``.json`` path); the files written. The
    arguments are checked, and the test computed (runs sharing no query are refused), before anything is
    written."""
    if not isinstance(out, (str, Path)) or not str(out).strip():
        raise ProbekitError("give the output path (--out)")
    if fmt is None and Path(out).suffix.lower() != ".json":
        raise ProbekitError(f"give --format: {str(out)!r} is not a .json file; formats that carry a comparison: "
                            f"{', '.join(COMPARISON_FORMATS)}")
    chosen = get_comparison_format(fmt or "json")
    doc_path = _target(out, chosen)
    a, b = load_run(str(run_a)), load_run(str(run_b))
    for run in (a, b):
        if run.meta.get("status") not in (None, "done"):
            raise ProbekitError(f"run {run.run_id} is {run.meta.get('status')}: only a finished run is exported")
    _check_reusable(doc_path, chosen, str(a.run_id), str(b.run_id))
    cmp = compare_runs(str(a.run_id), str(b.run_id), metric=metric, which=which, confidence=confidence,
                       resamples=resamples, seed=seed, correction=correction)
    doc = comparison_document(a, b, cmp)
    written: list[Path] = []
    files: dict[str, list[dict]] = {}
    if chosen.write_run is not None:
        for role, run in zip(ROLES, (a, b)):
            paths = chosen.write_run(run, doc_path.parent / role, doc)
            written += paths
            files[role] = [{"path": p.relative_to(doc_path.parent).as_posix(), "sha256": _sha256(p)} for p in paths]
    full = {**doc, "format": chosen.name, **({"files": files} if files else {})}
    written.append(atomic.write_json(doc_path, full, indent=2, ensure_ascii=False))
    return written


def comparison_bytes(run_a: str, run_b: str, *, fmt: str = "json", **settings) -> bytes:
    """The export of :func:`export_comparison` as one download: the document for ``json``, else a zip of the
    folder (its files under ``comparison/``, dated 1980-01-01 as zip's epoch so equal files give equal bytes)."""
    chosen = get_comparison_format(fmt)
    with tempfile.TemporaryDirectory(prefix="probekit-comparison-") as tmp:
        base = Path(tmp) / "comparison"
        paths = export_comparison(run_a, run_b, base if chosen.folder else Path(tmp) / DOCUMENT, fmt=chosen.name,
                                  **settings)
        if not chosen.folder:
            return paths[-1].read_bytes()
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(paths):
                info = zipfile.ZipInfo(path.relative_to(Path(tmp)).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, path.read_bytes())
        return buf.getvalue()


# ---------------------------------------------------------------- reading back
def read_comparison(path: str | Path) -> dict:
    """The comparison document at ``path``: an export's folder, its ``comparison.json``, or an eee record of a
    comparison export (which carries the document alone); one line when there is none."""
    path = Path(path).expanduser()
    if path.is_dir():
        path = path / DOCUMENT
    if not path.exists():
        raise ProbekitError(f"no such file: {path} (give a comparison export's folder, its {DOCUMENT} or an eee "
                            "record of one)")
    obj = loads(read_text(path), where=path.name)
    if isinstance(obj, dict) and isinstance(obj.get("eval_library"), dict):
        text = (obj["eval_library"].get("additional_details") or {}).get("probekit_comparison")
        if not isinstance(text, str):
            raise DataFormatError(f"{path.name}: an eee record without a comparison (probekit_comparison); "
                                  "`runs import` reads a run's record")
        obj = loads(text, where=f"{path.name}, probekit_comparison")
    if not isinstance(obj, dict) or obj.get("kind") != KIND:
        raise DataFormatError(f"{path.name}: not a probekit comparison (kind {KIND!r})")
    if obj.get("version") != VERSION:
        raise DataFormatError(f"{path.name}: comparison version {obj.get('version')!r}; probekit reads {VERSION}")
    return obj


def comparison_from_document(doc: dict, *, where: str = "comparison") -> PairedComparison:
    """The :class:`PairedComparison` a document was written from (its table, settings and so its sentences)."""
    res = need(doc, "comparison", where=where)
    rows = need(res, "rows", where=where)
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise DataFormatError(f"{where}: comparison.rows must be a non-empty list of objects")
    missing = [c for c in COLUMNS if any(c not in r for r in rows)]
    if missing:
        raise DataFormatError(f"{where}: a comparison row has no {', '.join(missing)}")
    table = pd.DataFrame([{c: (float("nan") if r[c] is None else r[c]) for c in COLUMNS} for r in rows],
                         columns=COLUMNS)
    try:
        return PairedComparison(table=table, metric=str(need(res, "metric", where=where)),
                                which=str(need(res, "subset", where=where)),
                                confidence=float(need(res, "confidence", where=where)),
                                n_boot=int(need(res, "n_boot", where=where)),
                                n_perm=int(need(res, "n_perm", where=where)), seed=int(need(res, "seed", where=where)),
                                correction=str(need(res, "correction", where=where)))
    except (TypeError, ValueError) as e:
        raise DataFormatError(f"{where}: a comparison setting is not a number ({e})") from None


def stored_comparison(path: str | Path) -> tuple[dict, PairedComparison]:
    """The document at ``path`` (:func:`read_comparison`) and the comparison it holds."""
    doc = read_comparison(path)
    return doc, comparison_from_document(doc, where=Path(path).name)


__all__ = ["COMPARISON_FORMATS", "ComparisonFormat", "comparison_bytes", "comparison_document",
           "comparison_from_document", "difference_results", "export_comparison", "get_comparison_format",
           "read_comparison", "rows_sha256", "stored_comparison"]
