"""The README's Layout section lists every module of ``probekit/`` with its docstring's first sentence, never cut
mid-word (``python tests/readme_layout.py --update`` regenerates it)."""

from readme_layout import ROOT, block, current, first_sentence


def test_readme_layout_is_the_tree():
    assert current() == block(), "the README's Layout is stale: run python tests/readme_layout.py --update"


def test_every_module_is_listed_whole():
    shown = block()
    for f in (ROOT / "probekit").rglob("*.py"):
        if f.name in ("__init__.py", "__main__.py"):
            continue
        assert f" {f.name}" in shown, f
        sentence = first_sentence(f)
        assert sentence and " ".join(sentence.split()[-2:]) in " ".join(shown.split()), f  # its end is shown too
