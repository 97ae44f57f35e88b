"""Commands with actions (``runs``, ``corpus``, ``annotations``, ``grid``): each action takes only its own flags, and
the CLI's one progress bar (stderr, cleared before an error line, silent with ``--quiet``)."""

from __future__ import annotations

import argparse
import json

import pytest

from probekit import cli
from probekit.cli.main import build_parser
from probekit.errors import ProbekitError

ACTION_COMMANDS = ("runs", "corpus", "annotations", "grid", "tour")


def _actions(command: str) -> dict[str, argparse.ArgumentParser]:
    """``command``'s action parsers by name, read off the real parser."""
    top = build_parser(command)
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    sub = commands.choices[command]
    return next(a for a in sub._actions if isinstance(a, argparse._SubParsersAction)).choices


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions if not isinstance(a, argparse._HelpAction) for s in a.option_strings}


def _value(action: argparse.Action) -> list[str]:
    """A value ``action`` accepts (none for a switch)."""
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(next(iter(action.choices)))]
    return ["1" if action.type in (int, float) else "x"]


def _minimal_argv(command: str, name: str, parser: argparse.ArgumentParser) -> list[str]:
    """``command name`` with its required positionals and options given: a command line that parses."""
    argv = [command, name]
    for a in parser._actions:
        if not a.option_strings and a.nargs not in ("?", "*"):
            argv += _value(a)
        elif a.option_strings and a.required:
            argv += [a.option_strings[0], *_value(a)]
    return argv


CASES = [(command, name) for command in ACTION_COMMANDS for name in _actions(command)]


@pytest.mark.parametrize("command,name", CASES, ids=[f"{c} {n}" for c, n in CASES])
def test_an_action_refuses_a_flag_only_its_siblings_take(command, name, capsys):
    actions = _actions(command)
    own = actions[name]
    base = _minimal_argv(command, name, own)
    build_parser(command).parse_args(base)  # without the sibling's flag the command line is valid
    by_flag = {s: a for p in actions.values() for a in p._actions for s in a.option_strings}
    siblings = set().union(*(_flags(p) for n, p in actions.items() if n != name)) - _flags(own)
    for flag in sorted(siblings):
        with pytest.raises(SystemExit) as e:
            cli.main([*base, flag, *_value(by_flag[flag])])
        err = capsys.readouterr().err
        lines = err.strip().splitlines()
        assert e.value.code == 2, (flag, err)
        assert len(lines) == 2 and lines[0].startswith(f"usage: probekit {command} {name}"), err
        assert lines[1].startswith(f"probekit {command} {name}: error: unrecognized arguments: {flag}"), err
        assert "Traceback" not in err


@pytest.mark.parametrize("command,name", CASES, ids=[f"{c} {n}" for c, n in CASES])
def test_an_actions_help_lists_its_own_flags_only(command, name, capsys):
    actions = _actions(command)
    with pytest.raises(SystemExit) as e:
        cli.main([command, name, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith(f"usage: probekit {command} {name}")
    words = {w.strip("[],") for w in out.split()}
    assert _flags(actions[name]) <= words
    siblings = set().union(*(_flags(p) for n, p in actions.items() if n != name)) - _flags(actions[name])
    assert not siblings & words


def test_probe_flags_only_on_the_actions_that_probe():
    """An action gets the probe flags (``--probe`` and one per probe option) only if it probes a model: of these
    commands, only ``annotations create`` does (the other actions read what is stored)."""
    probing = {(c, n) for c, n in CASES
               if any(getattr(a, "probe_option", False) for a in _actions(c)[n]._actions)}
    with_probe = {(c, n) for c, n in CASES if "--probe" in _flags(_actions(c)[n])}
    assert probing == with_probe == {("annotations", "create")}


def test_runs_list_with_out_is_refused_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "x.csv"
    with pytest.raises(SystemExit) as e:
        cli.main(["runs", "list", "--out", str(out)])
    assert e.value.code == 2 and not out.exists()
    assert "unrecognized arguments: --out" in capsys.readouterr().err


def test_flags_keep_their_place_after_the_action(capsys):
    """Command lines that were valid stay valid: the action first, then its flags in any order."""
    assert cli.main(["runs", "list", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert cli.main(["grid", "list", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_grid_ray_flags_are_refused_on_the_local_backend(tmp_path, capsys):
    spec = tmp_path / "grid.yaml"
    spec.write_text("models: [default]\n")
    assert cli.main(["grid", "run", str(spec), "--backend", "local", "--workers", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --ray-address, --workers and --max-retries apply to --backend ray only")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_a_grid_file_not_in_utf8_is_one_line_and_exit_2(tmp_path, capsys, encoding):
    """A grid saved as UTF-16 or Latin-1 is refused with one line naming the file, not a probekit bug (exit 1)."""
    spec = tmp_path / "grid.yaml"
    spec.write_bytes("name: café\nmodels: [default]\ndatasets: [demo]\n".encode(encoding))
    assert cli.main(["grid", "run", str(spec), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(spec) in err and "UTF-8" in err, err
    assert "bug" not in err and "Traceback" not in err


@pytest.fixture
def corpus_flags(tmp_path):
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "n1.txt").write_text("Metformin is used for type 2 diabetes. Aspirin lowers fever.")
    names = tmp_path / "names.txt"
    names.write_text("metformin\naspirin\nfever\n")
    return ["--corpus", str(docs), "--entities", str(names)]


def test_an_error_during_progress_starts_its_own_line(corpus_flags, capsys, monkeypatch):
    """The bar is cleared before the error is printed: the error line never continues the bar's line."""
    import probekit.corpus

    def failing_build(source, entities, *, progress=None, force=False):
        progress(3, 10, "reading notes · 3/10 documents")
        raise ProbekitError("the disk is full")

    monkeypatch.setattr(probekit.corpus, "build_index", failing_build)
    assert cli.main(["corpus", "index", *corpus_flags]) == 2
    err = capsys.readouterr().err
    bar, error = err.split("error: ", 1)
    assert "reading notes" in bar  # the bar was drawn...
    # ...blanked out, and its line ended, so the error starts a line of its own
    assert bar.endswith("\r\n") and bar.rstrip("\r\n").rsplit("\r", 1)[-1].strip() == ""
    assert error == "the disk is full\n"


def test_progress_goes_to_stderr_and_quiet_silences_it(corpus_flags, capsys):
    assert cli.main(["corpus", "index", *corpus_flags, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["entities_mentioned"] == 3  # stdout is the JSON alone
    assert "%|" in err  # a tqdm bar
    assert cli.main(["corpus", "index", *corpus_flags, "--force", "--quiet", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["entities_mentioned"] == 3 and err == ""


def test_the_bar_restarts_for_a_new_total_and_shows_each_stage(capsys):
    from probekit.cli.common import progress_bar

    with progress_bar() as report:
        report(0, 10, "encoding · 0/10")
        report(10, 10, "encoding · 10/10")
        report(1, 4, "scoring · 1/4")
    err = capsys.readouterr().err
    assert "encoding · 0/10" in err and "| 0/10 [" in err  # drawn at once, with its stage
    assert "scoring · 1/4" in err and "| 1/4 [" in err  # the new stage at once, on a bar counting to the new total
    with progress_bar(quiet=True) as report:
        assert report is None
    assert capsys.readouterr().err == ""


BAR_THEN_ERRORS = """
import logging, sys, time, warnings
logging.basicConfig(format="%(levelname)s %(message)s")
from probekit.cli.common import progress_bar
try:
    with progress_bar() as report:
        report(1, 10, "stage")
        report(2, 10, "stage")
        warnings.warn("a warning while the bar is live")
        logging.getLogger("probekit").warning("a log line while the bar is live")
        print("warning: a line printed while the bar is live", file=sys.stderr)
        report(3, 10, "stage")
        raise ValueError("boom")
except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
"""


def test_lines_written_while_the_bar_is_live_start_lines_of_their_own():
    """An error or warning written while the bar was drawn used to land on the end of the bar's line (a log file
    of the command read ``stage: 20%|██ | 2/10 [...]error: boom``)."""
    import subprocess
    import sys

    from conftest import ROOT

    res = subprocess.run([sys.executable, "-c", BAR_THEN_ERRORS], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    lines = res.stderr.split("\n")
    for wanted in ("WARNING a log line while the bar is live", "warning: a line printed while the bar is live",
                   "error: boom"):
        assert wanted in lines, res.stderr
    assert any(line.endswith("UserWarning: a warning while the bar is live") for line in lines), res.stderr
    assert not any("%|" in line and ("warning" in line.lower() or "error" in line) for line in lines), res.stderr
