"""cli: ``templates compare``, ``templates parallel`` and ``perplexity`` end to end on tiny models; bad input ->
one error line."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from probekit.cli.main import main
from probekit.templates.perplexity import pseudo_perplexity

TRIPLES = """subject,relation,object,template
Aspirin,may_prevent,Stroke,[X] may help to prevent [Y] .
Aspirin,may_prevent,Myocardial infarction,[X] may help to prevent [Y] .
Folic acid,may_prevent,Neural tube defects,[X] may help to prevent [Y] .
Levodopa,may_treat,Parkinson disease,[X] might treat [Y] .
"""
FREE = """prompt,object,subject,relation,source
aspirin lowers the risk of [MASK] in adults,myocardial infarction,aspirin,may_prevent,pubmed_0:12
prevention of [MASK] by folic acid,neural tube defects,folic acid,may_prevent,pubmed_1:7
levodopa remains the best drug for [MASK],parkinson disease,levodopa,may_treat,pubmed_2:9
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.csv").write_text(TRIPLES)
    (tmp_path / "f.csv").write_text(FREE)
    return str(tmp_path / "t.csv"), str(tmp_path / "f.csv")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code, err, match):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    assert match in lines[0], lines[0]


def test_perplexity_of_texts(capsys, tiny_mlm, tiny_mlm_dir):
    texts = ["metformin treats diabetes", "aspirin"]
    code, out, _ = run(capsys, "perplexity", "--model", str(tiny_mlm_dir), "--text", texts[0], "--text", texts[1],
                       "--format", "json")
    assert code == 0
    got = [r["perplexity"] for r in json.loads(out)["texts"]]
    np.testing.assert_allclose(got, pseudo_perplexity(tiny_mlm.mlm, tiny_mlm.tokenizer, texts).perplexity, rtol=1e-6)


def test_a_text_longer_than_the_input_limit_is_scored_on_its_head_with_a_warning(capsys, tiny_mlm_dir):
    """A 10,000-token text used to be scored on its first 126 tokens without a word (the score then reads as the
    whole text's): the cut is said on stderr and in the JSON."""
    long_text = "metformin treats diabetes " * 3400
    code, out, err = run(capsys, "perplexity", "--model", str(tiny_mlm_dir), "--text", long_text, "--text",
                         "aspirin", "--format", "json")
    res = json.loads(out)
    assert code == 0 and [r["n_tokens"] for r in res["texts"]][0] == 126  # 128 with [CLS] and [SEP]
    [note] = res["cut"]
    said = re.match(r"text 0 has ([\d,]+) tokens; only its first 128 were read and scored", note)
    assert said and int(said.group(1).replace(",", "")) > 10_000  # the count depends on the tokenizer's pieces
    assert err.strip().splitlines() == [f"warning: {note}"]


def test_perplexity_bad_input(capsys, tiny_mlm_dir, tiny_encoder_dir):
    one_error(*run(capsys, "perplexity", "--model", str(tiny_encoder_dir), "--text", "x")[::2], "has no MLM head")
    one_error(*run(capsys, "perplexity", "--model", str(tiny_mlm_dir))[::2], "give exactly one of --run")
    one_error(*run(capsys, "perplexity", "--model", str(tiny_mlm_dir), "--run", "run-nope")[::2], "no stored run")
    one_error(*run(capsys, "perplexity", "--model", str(tiny_mlm_dir), "--text", " ")[::2], "text 0 is empty")


def test_bench_free_text_then_perplexity_then_compare(capsys, tiny_mlm_dir, files):
    tpath, fpath = files
    ids = []
    for ds, path in (("triples", tpath), ("freetext", fpath)):
        code, out, err = run(capsys, "bench", "--model", str(tiny_mlm_dir), "--dataset", ds, "--data-dir", path,
                             "--probe", "mask_average", "--k", "3", "--save", "--format", "json", "--quiet")
        assert code == 0, err
        ids.append(json.loads(out)["run_id"])
    code, out, err = run(capsys, "perplexity", "--model", str(tiny_mlm_dir), "--run", ids[1], "--quiet")
    assert code == 0, err
    assert "pseudo perplexity" in out and "all prompts" in out and "(stored)" in out
    code, out, err = run(capsys, "templates", "compare", "--runs", *ids, "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    kinds = {r["run_id"]: r["kind"] for r in data["runs"]}
    assert kinds == {ids[0]: "template-based", ids[1]: "template-free"}
    assert [r["scorer"] is not None for r in data["runs"]] == [False, True]
    assert len(data["rankings"]) == 1 and data["correlation"]["kendall_tau"] is None  # one model: undefined
    code, out, err = run(capsys, "templates", "compare", "--runs", *ids)
    assert code == 0 and "Kendall's tau -" in out and "template-free" in out
    one_error(*run(capsys, "templates", "compare", "--runs", "run-nope")[::2], "no stored run 'run-nope'")


def test_templates_parallel(capsys, tiny_encoder_dir, files, tmp_path):
    tpath, fpath = files
    out_file = tmp_path / "pairs.jsonl"
    code, out, err = run(capsys, "templates", "parallel", "--model", str(tiny_encoder_dir), "--dataset", "triples",
                         "--data-dir", tpath, "--free", fpath, "--k", "3", "--format", "json", "--quiet",
                         "--out", str(out_file))
    assert code == 0, err
    data = json.loads(out.split("\n", 1)[1])  # after the "wrote FILE" line
    assert data["pairs"]["pairs"] == 3
    rows = {r["relation"]: r for r in data["per_relation"]}
    assert rows["may_prevent"]["pairs"] == 2 and rows["micro"]["pairs"] == 3
    assert rows["may_treat"]["template acc@3"] == 1.0  # three candidates, k = 3: always a hit
    pairs = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert pairs[0]["prompt"] == "aspirin lowers the risk of [MASK] in adults"
    one_error(*run(capsys, "templates", "parallel", "--model", str(tiny_encoder_dir), "--dataset", "triples",
                   "--data-dir", tpath, "--free", str(tmp_path / "none.csv"))[::2], "file not found")
