"""MedLAMA hardness measures: hand-worked values, the ``rouge`` package on random text, the real columns."""

from __future__ import annotations

import random

import pytest

from probekit.datasets import hardness as H
from probekit.errors import DataFormatError, ProbekitError


def f_score(llcs: int, n_hyp: int, m_ref: int) -> float:
    """The package's F from hand-counted words: distinct hypothesis/reference words and LCS words."""
    p, r = llcs / n_hyp, llcs / m_ref
    return 2.0 * ((p * r) / (p + r + 1e-8))


# ---------------------------------------------------------------- ROUGE-L by hand

@pytest.mark.parametrize("hyp, ref, llcs, n, m", [
    ("inner ear disorder", "inner ear", 2, 3, 2),       # plain subsequence
    ("a b c", "a b c", 3, 3, 3),                         # identical: 0.999999995, not 1
    ("a a b", "a", 1, 2, 1),                             # words are counted once (distinct)
    ("st. john's wort", "john's wort", 2, 3, 2),         # '.' cuts sentences: hyp = [st], [john's wort]
    ("a b. c d", "a d", 2, 4, 2),                        # union of the LCS of (a d, a b) and (a d, c d)
    ("b a", "a b. a", 2, 2, 2),                          # trace-back keeps 'b' for (a b, b a): union {a, b}
    ("a. .b", "a b", 2, 3, 2),                           # the blank piece ' ' becomes the word ''
    ("x y", "z", 0, 2, 1),                               # nothing shared
])
def test_rouge_l_hand_worked(hyp, ref, llcs, n, m):
    assert H.rouge_l(hyp, ref) == pytest.approx(f_score(llcs, n, m), abs=1e-15)


def test_rouge_l_keeps_case_and_identical_is_not_one():
    assert H.rouge_l("Asthma", "asthma") == 0.0
    assert H.rouge_l("asthma", "asthma") == pytest.approx(0.999999995, abs=1e-15)


# ---------------------------------------------------------------- avg_match / avg_rouge_l by hand

def test_avg_match_pads_golds_like_the_reference():
    # Tested strings: "ear ", " inner ear ", " head and neck" -> only "ear " is in "inner ear disorder".
    assert H.avg_match("Inner Ear Disorder", ["Ear", "Inner Ear", "Head and Neck"]) == 1 / 3
    # "eye " is not in "... eyelid ...", " eyelid" is.
    assert H.avg_match("Stage IB Eyelid Carcinoma AJCC v8", ["Eye", "Eyelid"]) == 0.5
    # A gold equal to the head counts when alone, not when it is first of two ("lymphangiomatosis ").
    assert H.avg_match("Lymphangiomatosis", ["Lymphangiomatosis"]) == 1.0
    assert H.avg_match("Lymphangiomatosis", ["Lymphangiomatosis", "Systemic lymphangiomatosis"]) == 0.0
    # ... but as a middle or last gold the leading space must be in the head.
    assert H.avg_match("Acute heart failure", ["Edema", "Heart failure"]) == 0.5
    assert H.avg_match("Metformin", ["type 2 diabetes mellitus"]) == 0.0


def test_avg_match_case_and_duplicates():
    assert H.avg_match("ASTHMA attack", ["asthma"]) == 1.0
    assert H.avg_match("Asthma", ["Asthma", "Asthma"]) == 1.0  # deduplicated, as tail_names


def test_avg_rouge_l_is_mean_over_distinct_golds():
    # "aspirin" vs "aspirin" -> 0.999999995, vs "pain" -> 0; duplicates do not count twice.
    expected = (f_score(1, 1, 1) + 0.0) / 2
    assert H.avg_rouge_l("Aspirin", ["Aspirin", "pain", "pain"]) == pytest.approx(expected, abs=1e-15)
    # lower-cased before scoring: inner ear disorder / inner ear -> P 2/3, R 1
    assert H.avg_rouge_l("Inner Ear Disorder", ["INNER EAR"]) == pytest.approx(f_score(2, 3, 2), abs=1e-15)


def test_scores_and_is_hard():
    assert H.scores("Inner Ear Disorder", ["Inner Ear"]) == (1.0, pytest.approx(f_score(2, 3, 2)))
    assert H.is_hard("Metformin", ["Type 2 diabetes mellitus", "Polycystic ovary syndrome"])
    assert not H.is_hard("Inner Ear Disorder", ["Inner Ear"])
    # avg_match 0 but ROUGE-L 0.8 -> not hard; both measures must be low
    assert not H.is_hard("Inner Ear Disorder", ["Inner Ear", "Skull"])
    # the rule is a strict "<": both measures are 0 here, which is hard for 0.01 but not for 0
    assert H.is_hard("aspirin tablet", ["pain", "headache"], threshold=0.0) is False
    assert H.is_hard("aspirin tablet", ["pain", "headache"], threshold=0.01)
    # " aspirin" (second gold, padded) is not in "aspirin": match 0; rouge (0 + 0.999999995) / 2
    assert H.scores("aspirin", ["pain", "aspirin"]) == (0.0, pytest.approx(0.4999999975, abs=1e-15))
    assert H.is_hard("aspirin", ["pain", "aspirin"], threshold=0.5)
    assert not H.is_hard("aspirin", ["pain", "aspirin"], threshold=0.4)


@pytest.mark.parametrize("head, golds, msg", [
    ("Aspirin", [], "golds is empty"),
    ("Aspirin", "pain", "list of names"),
    ("Aspirin", None, "list of names"),
    ("Aspirin", ["pain", 3], "gold name #2 must be a string"),
    ("Aspirin", ["pain", "  "], "gold name #2 is empty"),
    ("Aspirin", [". ."], "gold name #1 is empty"),
    ("", ["pain"], "head name is empty"),
    (None, ["pain"], "head name must be a string"),
])
def test_bad_input_is_a_probekit_error(head, golds, msg):
    for fn in (H.avg_match, H.avg_rouge_l, H.is_hard, H.scores):
        with pytest.raises(ProbekitError, match=msg):
            fn(head, golds)


@pytest.mark.parametrize("threshold", [-0.1, 1.5, "0.1", None, True])
def test_bad_threshold(threshold):
    with pytest.raises(ProbekitError, match="threshold"):
        H.is_hard("a", ["b"], threshold=threshold)


def test_recompute_and_hard_rows_on_a_small_frame():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"head_name": ["Inner Ear Disorder", "Metformin"],
                       "tail_names_list": ["['Ear', 'Inner Ear', 'Head and Neck']", ["Type 2 diabetes mellitus"]]})
    out = H.recompute(df)
    assert out["avg_match"].tolist() == [1 / 3, 0.0]
    assert out["avg_rouge_l"].iloc[1] == 0.0
    assert "avg_match" not in df.columns  # a copy
    assert H.hard_rows(out)["head_name"].tolist() == ["Metformin"]


def test_recompute_errors_name_line_and_column(tmp_path):
    pd = pytest.importorskip("pandas")
    with pytest.raises(DataFormatError, match=r"x\.csv, line 1: missing column 'tail_names_list'"):
        H.recompute(pd.DataFrame({"head_name": ["a"]}), label="x.csv")
    bad = tmp_path / "rel_2.csv"
    bad.write_text("head_name,tail_names_list\nAspirin,['pain']\nIbuprofen,['pain'\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"rel_2\.csv, line 3: column 'tail_names_list'"):
        H.score_file(bad)
    bad.write_text("head_name,tail_names_list\nAspirin,\"['pain', '']\"\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"rel_2\.csv, line 2: gold name #2 is empty"):
        H.score_file(bad)
    with pytest.raises(ProbekitError, match="not found"):
        H.score_file(tmp_path / "missing.csv")


# ---------------------------------------------------------------- against the rouge package

WORDS = ["a", "b", "c", "ab", "heart", "failure", "type", "2", "x.y", "e", "", " "]


def _random_text(rng: random.Random) -> str:
    parts = [rng.choice(WORDS) for _ in range(rng.randint(1, 7))]
    text = rng.choice([" ", "  ", ". ", ".", " . "]).join(parts) if len(parts) > 1 else parts[0]
    text = rng.choice(["", " ", "."]) + text + rng.choice(["", " ", ".", ". "])
    return text if text.replace(".", " ").split() else "z"


def test_rouge_l_equals_the_rouge_package_on_random_text():
    rouge = pytest.importorskip("rouge")
    pkg = rouge.Rouge(metrics=["rouge-l"], stats=["f"])
    rng = random.Random(7)
    for _ in range(3000):
        hyp, ref = _random_text(rng), _random_text(rng)
        expected = pkg.get_scores(hyp, ref)[0]["rouge-l"]["f"]
        assert H.rouge_l(hyp, ref) == pytest.approx(expected, abs=1e-12), (hyp, ref)


def test_avg_rouge_l_equals_the_reference_recipe_on_random_text():
    """The MedLAMA recipe written with the package: split ' || '-joined names on '||', lower-case, mean F."""
    rouge = pytest.importorskip("rouge")
    pkg = rouge.Rouge()
    rng = random.Random(11)
    for _ in range(500):
        head = _random_text(rng).title()
        golds = list(dict.fromkeys(_random_text(rng).upper() for _ in range(rng.randint(1, 4))))
        refs = " || ".join(golds).split("||")
        expected = sum(pkg.get_scores(head.lower(), r.lower())[0]["rouge-l"]["f"] for r in refs) / len(refs)
        match = sum(r.lower() in head.lower() for r in refs) / len(refs)
        assert H.avg_rouge_l(head, golds) == pytest.approx(expected, abs=1e-12), (head, golds)
        assert H.avg_match(head, golds) == match


# ---------------------------------------------------------------- the published MedLAMA columns

def test_reproduces_medlama_columns_and_hard_sets(medlama_dir):
    pd = pytest.importorskip("pandas")
    full_files = sorted((medlama_dir / "2021AA").glob("*_1000.csv"))
    assert len(full_files) == 19
    rows = hard = 0
    worst = {"avg_match": 0.0, "avg_rouge_l": 0.0}
    for path in full_files:
        published = pd.read_csv(path, dtype=str, keep_default_na=False)
        ours = H.score_file(path)
        for col in worst:
            diff = (ours[col] - published[col].astype(float)).abs().max()
            worst[col] = max(worst[col], float(diff))
        (hard_file,) = (medlama_dir / "2021AA").glob(path.stem.replace("_1000", "_*_hard") + ".csv")
        expected = pd.read_csv(hard_file, dtype=str, keep_default_na=False)
        kept = published.loc[H.hard_rows(ours).index].reset_index(drop=True)
        pd.testing.assert_frame_equal(kept, expected)  # same rows, same order, same text
        rows += len(ours)
        hard += len(kept)
    assert rows == 19_000
    assert hard == 15_329
    assert worst["avg_match"] <= 1e-6 and worst["avg_rouge_l"] <= 1e-6, worst
