"""``python -m probekit corpus index|list|stats|search|template-free`` end to end; bad input -> one error line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT

from probekit import cli

FACTS = ("subject,relation,object\nmetformin,may_treat,type 2 diabetes\naspirin,may_treat,fever\n"
         "aspirin,may_cause,bleeding\n")


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def setup(tmp_path):
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "n1.txt").write_text("Metformin is used for type 2 diabetes. Aspirin lowers fever.\n\nFever is rare.")
    (docs / "n2.txt").write_text("Aspirin treats fever.")
    facts = tmp_path / "facts.csv"
    facts.write_text(FACTS)
    return docs, facts


def test_index_list_stats_search_template_free(capsys, setup, tmp_path):
    docs, facts = setup
    flags = ["--corpus", str(docs), "--dataset", "triples", "--data-dir", str(facts)]
    code, out, err = run(capsys, "corpus", "index", *flags, "--quiet", "--format", "json")
    assert code == 0, err
    stats = json.loads(out)
    assert (stats["documents"], stats["sentences"], stats["mentions"]) == (2, 4, 7)
    assert (stats["facts"], stats["facts_with_document"], stats["facts_with_sentence"]) == (3, 2, 2)
    fp = stats["fingerprint"]
    code, out, err = run(capsys, "corpus", "index", *flags, "--quiet")
    assert code == 0 and "already indexed as" in err
    code, out, _ = run(capsys, "corpus", "list")
    assert out.startswith(f"{fp}  ok") and "[2 documents, 7 mentions]" in out
    code, out, _ = run(capsys, "corpus", "stats", fp[:6], "--coverage")
    assert "coverage by document: 2/3 facts (66.67 %)" in out and "may_cause" in out
    code, out, _ = run(capsys, "corpus", "search", fp, "--subject", "ASPIRIN", "--object", "fever",
                       "--unit", "sentence")
    assert out.splitlines() == ["[n1.txt:n1] Aspirin lowers fever.", "[n2.txt:n2] Aspirin treats fever."]
    # without naming the index: found from --corpus and --dataset
    code, out, _ = run(capsys, "corpus", "search", *flags, "--subject", "metformin", "--object", "type 2 diabetes",
                       "--format", "json")
    [ctx] = json.loads(out)
    assert ctx["unit"] == "document" and ctx["subject_spans"] == [[0, 9]] and ctx["target_spans"] == [[22, 37]]
    code, out, _ = run(capsys, "corpus", "search", fp, "--relation", "may_treat", "--role", "tail")
    assert len(out.splitlines()) == 4  # type 2 diabetes, fever x2 in n1, fever in n2
    out_file = tmp_path / "tf.csv"
    code, out, _ = run(capsys, "corpus", "template-free", fp, "--role", "tail", "--out", str(out_file))
    assert code == 0 and "4. masked (the entity occurs once)" in out
    assert out_file.read_text().splitlines()[0] == "prompt,object,subject,relation,source"
    assert "[MASK] is rare.,fever,,template_free," in out_file.read_text()


def test_errors_are_one_line(capsys, setup, tmp_path):
    docs, facts = setup
    bad = tmp_path / "notes.csv"
    bad.write_text("ROW_ID,BODY\n1,hello\n")
    for argv, match in [
        (["corpus", "index", "--corpus", str(bad), "--dataset", "triples", "--data-dir", str(facts), "--quiet"],
         "error: notes.csv: no column 'text' (columns: ROW_ID, BODY)"),
        (["corpus", "search", "abc", "--subject", "a", "--object", "b"], "error: no corpus index 'abc'"),
        (["corpus", "index", "--corpus", str(tmp_path / "none")], "error: no corpus at"),
        (["corpus", "search", "--corpus", str(docs), "--dataset", "triples", "--data-dir", str(facts),
          "--subject", "aspirin", "--object", "fever"], "error: this corpus is not indexed with these names yet"),
    ]:
        code, out, err = run(capsys, *argv)
        assert code == 2 and err.startswith(match) and len(err.strip().splitlines()) == 1, (argv, err)


def test_changed_corpus_offers_reindex(capsys, setup):
    docs, facts = setup
    flags = ["--corpus", str(docs), "--dataset", "triples", "--data-dir", str(facts), "--quiet"]
    code, out, _ = run(capsys, "corpus", "index", *flags, "--format", "json")
    fp = json.loads(out)["fingerprint"]
    (docs / "n3.txt").write_text("Metformin and type 2 diabetes again.")
    code, out, err = run(capsys, "corpus", "search", fp, "--subject", "aspirin", "--object", "fever")
    assert code == 2 and "changed since it was indexed (n3.txt added); re-index it" in err
    code, out, err = run(capsys, "corpus", "index", *flags)
    assert code == 0 and "re-indexing now" in err and "documents 3" in out
    code, out, err = run(capsys, "corpus", "remove", fp)
    assert code == 0 and out == f"removed {fp}\n"
    code, out, _ = run(capsys, "corpus", "list")
    assert out.count(" ok ") == 1 and fp not in out


def test_same_size_edit_with_the_time_restored_is_stale(capsys, setup):
    """An edit that keeps a file's size and restores its timestamp, away from the bytes the quick fingerprint
    samples, used to leave the index reading as current."""
    docs, facts = setup
    big = docs / "n4.txt"
    filler = "Filler text without names. " * 8000  # ~216 KB: the middle is not in the sampled bytes
    big.write_text(filler + "Zzzzzzz lowers fever. " + filler)
    flags = ["--corpus", str(docs), "--dataset", "triples", "--data-dir", str(facts), "--quiet"]
    code, out, _ = run(capsys, "corpus", "index", *flags, "--format", "json")
    first = json.loads(out)
    st = big.stat()
    big.write_text(filler + "Aspirin lowers fever. " + filler)  # same size
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (big.stat().st_size, big.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    code, out, err = run(capsys, "corpus", "search", first["fingerprint"], "--subject", "aspirin", "--object",
                         "fever")
    assert code == 2 and "changed since it was indexed (n4.txt content changed (same size and time))" in err
    code, out, _ = run(capsys, "corpus", "list")
    assert "stale: n4.txt content changed" in out
    code, out, err = run(capsys, "corpus", "index", *flags, "--format", "json")
    assert code == 0 and "re-indexing now" in err and json.loads(out)["mentions"] == first["mentions"] + 1
    code, out, err = run(capsys, "corpus", "search", first["fingerprint"], "--subject", "aspirin", "--object",
                         "fever")
    assert code == 0, err


def test_help_does_not_import_torch():
    code = ("import sys; from probekit.cli.main import build_parser; "
            "build_parser('corpus').parse_args(['corpus', 'list']); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False", out.stderr
