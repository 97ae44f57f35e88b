"""Every file probekit writes on a user's path goes through the one safe writer (:mod:`probekit.atomic`): each
``--out`` exporter refuses a FIFO, a device node and a link to a FIFO with one line and leaves them as they were,
and a scan of the package finds no writer that bypasses it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import ROOT

from probekit import cli

REFUSAL = "it is not a regular file"


def _special_targets(tmp_path: Path, suffix: str) -> list[Path]:
    fifo = tmp_path / f"pipe{suffix}"
    os.mkfifo(fifo)
    link = tmp_path / f"link{suffix}"
    link.symlink_to(fifo)
    return [fifo, link, Path("/dev/null")]


def _assert_refused(capsys, argv: list[str]) -> None:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, err)
    assert err.startswith("error: ") and REFUSAL in err and len(err.strip().splitlines()) == 1, err
    assert Path("/dev/null").is_char_device()


def test_diskne_build_out_refuses_fifo_device_and_link(capsys, tmp_path):
    targets = _special_targets(tmp_path, ".json")
    for target in targets:
        _assert_refused(capsys, ["diskne", "build", "--source", "demo", "--out", str(target)])
    assert (tmp_path / "pipe.json").is_fifo() and (tmp_path / "link.json").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "pipe.json"]  # no temp file left
    assert cli.main(["diskne", "build", "--source", "demo", "--out", str(tmp_path / "set.json")]) == 0
    assert (tmp_path / "set.json").read_text().startswith("{")


def test_corpus_template_free_out_refuses_fifo_device_and_link(capsys, tmp_path):
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "n1.txt").write_text("Aspirin lowers fever.\n\nFever is rare.")
    facts = tmp_path / "facts.csv"
    facts.write_text("subject,relation,object\naspirin,may_treat,fever\n")
    assert cli.main(["corpus", "index", "--corpus", str(docs), "--dataset", "triples", "--data-dir", str(facts),
                     "--quiet"]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    out.mkdir()
    from probekit.corpus.index import list_indexes

    fp = list_indexes()[0]["fingerprint"]
    for target in _special_targets(out, ".csv"):
        _assert_refused(capsys, ["corpus", "template-free", fp, "--role", "tail", "--out", str(target)])
    assert (out / "pipe.csv").is_fifo() and (out / "link.csv").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["link.csv", "pipe.csv"]


# ---------------------------------------------------------------- no writer bypasses the safe writer
WRITES = re.compile(
    r"""open\([^)]*["'][wax]b?\+?["']"""  # open(..., "w"), "a", "x", "wb", ...
    r"""|open\([^)]*\"ab\" if"""
    r"""|(?<!atomic)\.write_(text|bytes)\("""  # Path.write_text / write_bytes
    r"""|\.to_(csv|parquet|json|pickle|feather|excel)\((?!\)|index=|fh|buf|orient)"""  # pandas to a path
    r"""|\bnp\.save[z]?\((?!fh)|\btorch\.save\((?![^)]*,\s*fh\))|\.save_pretrained\(|\bjson\.dump\((?!.*sys\.stdout)"""
    r"""|\bos\.(replace|rename)\(|\bshutil\.(copy|copyfile|copy2|copytree|move)\(|\bCOPY\b.*\bTO\b""")

ALLOWED = {
    # Writers to probekit's own cache/data folders that cannot be one file's atomic replace, each with its reason.
    ("probekit/vocab/search.py", "np.savez(buf,"):
        "into an in-memory buffer, which probekit.atomic then writes (not a file)",
    ("probekit/datasets/fetch.py", 'open(part, "ab" if offset else "wb")'):
        "a resumable download appends to its .part file, renamed into place only once its checksum matches",
    ("probekit/datasets/fetch.py", "os.replace(part, dest)"): "the verified download takes its name",
    ("probekit/datasets/fetch.py", 'open(target, "wb") as dst'):
        "extraction into a private staging folder, which is renamed into place whole",
    ("probekit/datasets/fetch.py", 'os.replace(target, old / "x")'): "the staged folder swap",
    ("probekit/datasets/fetch.py", "os.replace(staging, target)"): "the staged folder swap",
    ("probekit/corpus/build.py", "os.rename(final, old)"): "an index folder is published by renaming it whole",
    ("probekit/corpus/build.py", "os.rename(tmp, final)"): "an index folder is published by renaming it whole",
    ("probekit/rewire/train.py", "model.encoder.save_pretrained(tmp"):
        "a checkpoint is written into a hidden folder that is renamed into place whole",
    ("probekit/rewire/train.py", "model.tokenizer.save_pretrained(tmp)"): "the same hidden checkpoint folder",
    ("probekit/rewire/train.py", "os.replace(tmp, folder)"): "the checkpoint folder's rename",
    ("probekit/rewire/train.py", 'open(folder / LOG_FILE, "a")'):
        "the loss log is appended line by line (a torn last line is skipped by its reader)",
}


def bypassing_writers() -> tuple[list[str], set]:
    found, used = [], set()
    for path in sorted((ROOT / "probekit").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "probekit/atomic.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#")[0]
            if not WRITES.search(code):
                continue
            allowed = next((key for key in ALLOWED if key[0] == rel and key[1] in code), None)
            if allowed is None:
                found.append(f"{rel}:{n}: {line.strip()}")
            else:
                used.add(allowed)
    return found, used


def test_every_writer_goes_through_the_safe_writer():
    found, used = bypassing_writers()
    assert found == [], "write through probekit.atomic (or store.export.write_table):\n" + "\n".join(found)
    assert set(ALLOWED) - used == set(), "an allowed writer is gone: drop it from ALLOWED"


@pytest.mark.parametrize("line", [
    'with open(path, "w") as fh:', "out.write_text(text)", "frame.to_csv(path, index=False)",
    "np.save(path, vec)", "torch.save(state, path)", "shutil.copy(src, dst)", "os.replace(a, b)",
    "json.dump(obj, open(p, 'w'))", "frame.to_parquet(args.out)"])
def test_the_scan_finds_a_hand_made_writer(line):
    assert WRITES.search(line)


@pytest.mark.parametrize("line", [
    "atomic.write_text(path, text)", "frame.to_csv(index=False).encode()", "result.frame().to_csv(fh, index=False)",
    "atomic.write(path, lambda fh: np.save(fh, vec, allow_pickle=False))", 'open(path, "rb")',
    "atomic.write(path, lambda fh: torch.save(state, fh))",
    "json.dump(obj, sys.stdout, indent=2)"])
def test_the_scan_leaves_safe_writes_alone(line):
    assert not WRITES.search(line)
