"""LIPID as the paper writes it (Shaier et al. 2024, §3.2.3; no code released: Shaier/probing_template_based_
template_free@31a861e holds only the data): the keyword list read literally as substrings by default, and a
built file that always loads as a template-free dataset."""

from __future__ import annotations

import pytest

from probekit.corpus import build_index, build_template_free, from_names, open_source, write_template_free
from probekit.corpus.lipid import KEYWORD_READINGS, LIPID_KEYWORDS, substring_filter
from probekit.datasets import freetext
from probekit.errors import ProbekitError

CORPUS = [
    "Penicillin is used to treat certain infections.",      # the paper's example of a fact: kept by both
    "We examine the effect penicillin has on infections.",  # the paper's example of what the list removes
    "Between doses, metformin were given there.",           # "we" and "here" inside words: substrings only
    "Four patients received aspirin.",                      # "our" inside "Four": substrings only
    "Metformin",                                            # the sentence is the entity: a bare [MASK]
    "Insulin .",                                            # nothing but the mask and a full stop
    "Insulin lowers glucose.",                              # "we" inside "lowers": substrings only
]


def test_the_keyword_list_is_the_papers():
    """"The simple list of keywords is: “here”, “we”, “investigate”, “study”, “propose”, “outline”, “(”, “our”,
    “performed”, “suggest”, and “However.”" (the final full stop read as the sentence's own)."""
    assert LIPID_KEYWORDS == ("here", "we", "investigate", "study", "propose", "outline", "(", "our", "performed",
                              "suggest", "However")


@pytest.mark.parametrize("reading", sorted(KEYWORD_READINGS))
def test_every_reading_removes_the_papers_example_and_keeps_its_fact(reading):
    """"we care about sentences that are facts (e.g., “Penicillin is used to treat certain infections”) rather
    than hypotheses ... (e.g., “We examine the effect penicillin has on infections”)"; "we remove all sentences
    that contain parentheses"."""
    keep = KEYWORD_READINGS[reading]()
    assert keep(CORPUS[0]) and not keep(CORPUS[1]) and not keep("penicillin (PCN) is used")


def test_substring_reading_is_the_default_and_both_counts_are_reported(tmp_path):
    """Read literally ("we remove all sentences that contain" a keyword), "we" also removes "were"."""
    keep = substring_filter()
    assert [keep(s) for s in CORPUS[2:4] + CORPUS[6:]] == [False, False, False]
    assert [KEYWORD_READINGS["whole-word"]()(s) for s in CORPUS[2:4] + CORPUS[6:]] == [True, True, True]
    f = tmp_path / "c.txt"
    f.write_text("\n".join(CORPUS))
    idx = build_index(open_source(f), from_names(["penicillin", "metformin", "aspirin", "insulin"]))
    default = build_template_free(idx)
    assert default.reading == "substring"
    assert default.kept_by_reading == {"substring": 3, "whole-word": 6}
    words = build_template_free(idx, keyword_reading="whole-word")
    assert words.kept_by_reading == default.kept_by_reading
    assert [r["object"] for r in default.rows] == ["penicillin"]
    assert [r["object"] for r in words.rows] == ["penicillin", "metformin", "aspirin", "insulin"]
    with pytest.raises(ProbekitError, match="unknown keyword reading 'substrings'; did you mean 'substring'"):
        build_template_free(idx, keyword_reading="substrings")


@pytest.mark.parametrize("reading", sorted(KEYWORD_READINGS))
def test_the_builder_never_writes_a_prompt_the_loader_refuses(tmp_path, reading):
    """The template-free loader refuses a prompt that is "nothing but the mask"; the builder drops such
    sentences (a corpus line that is the entity alone) and counts them, so its file always loads."""
    f = tmp_path / "c.txt"
    f.write_text("\n".join(CORPUS))
    idx = build_index(open_source(f), from_names(["penicillin", "metformin", "aspirin", "insulin"]))
    result = build_template_free(idx, keyword_reading=reading)
    masked, loadable = result.steps[-2][1], result.steps[-1][1]
    assert masked - loadable == 2  # "Metformin" and "Insulin ."
    assert all(freetext.prompt_problem(r["prompt"]) is None for r in result.rows)
    for fmt in ("jsonl", "csv"):
        ds = freetext.load(write_template_free(result, tmp_path / f"tf.{fmt}"))
        assert len(ds.queries) == loadable
