"""The command line's messages: an unknown flag is refused by the command the user typed (its usage, one line),
and an unknown name in an empty registry says there is none yet instead of ending on an empty list."""

from __future__ import annotations

import argparse

import pytest

from probekit import cli
from probekit.cli.main import COMMANDS, build_parser
from probekit.errors import Registry, UnknownNameError


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _command_lines() -> list[tuple[str, ...]]:
    """Every command, and every action of the commands that have actions, read off the real parsers."""
    out: list[tuple[str, ...]] = []
    for command in COMMANDS:
        parser = _subcommands(build_parser(command))[command]
        actions = _subcommands(parser)
        out += [(command, action) for action in actions] or [(command,)]
    return out


LINES = _command_lines()


def _refused(capsys, argv: list[str]) -> list[str]:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert "Traceback" not in err
    return err.strip().splitlines()


@pytest.mark.parametrize("line", LINES, ids=[" ".join(x) for x in LINES])
def test_an_unknown_flag_is_refused_with_the_usage_of_the_command_typed(line, capsys):
    """argparse's rule left alone sends a sub-command's unknown flag to the top-level parser (``usage: probekit
    [-h] COMMAND ...``) and reports missing required arguments first, never naming the flag. Every command and
    action must answer with its own usage on one line and name the flag, whatever else is missing."""
    typed = " ".join(line)
    lines = _refused(capsys, [*line, "--nosuch"])
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"usage: probekit {typed}"), lines
    assert lines[1].startswith(f"probekit {typed}: error: unrecognized arguments: --nosuch"), lines


def test_an_unknown_flag_before_the_action_is_the_commands_to_refuse(capsys):
    lines = _refused(capsys, ["runs", "--nosuch", "list"])
    assert lines[0].startswith("usage: probekit runs ") and "unrecognized arguments: --nosuch" in lines[1]


def test_a_negative_number_is_a_value_not_an_unknown_flag(capsys):
    """argparse reads ``-3`` as a value when no flag looks like a number; so does the unknown-flag check, and the
    value's own check answers."""
    assert cli.main(["bench", "--k", "-3"]) == 2
    assert capsys.readouterr().err.strip() == "error: k must be an integer from 1 to 1000, got -3"


def test_known_flags_abbreviated_where_the_command_allows_it_still_parse():
    """Commands without actions keep argparse's abbreviations (``--batch`` for ``--batch-size``); actions take
    only whole flags."""
    args = build_parser("bench").parse_args(["bench", "--batch", "8", "--k=5"])
    assert args.batch_size == 8 and args.k == 5


def test_an_empty_registry_says_there_is_none_yet():
    """The did-you-mean helper never ends on "available: " with nothing after it."""
    e = UnknownNameError("vocabulary", "snomed", [])
    assert str(e) == "unknown vocabulary 'snomed'; there is no vocabulary yet"
    assert "available" not in str(UnknownNameError("tour", "t", [], empty_hint="import one"))
    assert str(UnknownNameError("tour", "t", [], empty_hint="import one")).endswith("no tour yet: import one")
    with pytest.raises(UnknownNameError, match=r"unknown probe 'x'; there is no probe yet$"):
        Registry("probe").get_or_raise("x")
    full = UnknownNameError("tour", "tlak", ["talk", "demo"])
    assert str(full) == "unknown tour 'tlak'; did you mean 'talk'; available: talk, demo"


def test_vocab_info_with_no_vocabulary_built_says_so_in_one_line(capsys):
    assert cli.main(["vocab", "info", "snomed"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: unknown vocabulary 'snomed'; there is no vocabulary yet", err


def test_an_unknown_rewiring_run_with_none_trained_says_how_to_train_one():
    from probekit.rewire import runs as rewire_runs

    with pytest.raises(UnknownNameError) as e:
        rewire_runs.run_info("r-nosuch")
    assert str(e.value) == ("unknown rewiring run 'r-nosuch'; there is no rewiring run yet: train one with "
                            "`probekit rewire` or on the Rewire page")


def test_a_closed_pipe_ends_a_command_silently():
    """`probekit … | head` closes the pipe while the command still prints: the command ends without a word on stderr
    (it printed "error: [Errno 32] Broken pipe"), with 141 (128 + SIGPIPE) as a shell reports such a writer."""
    import os
    import subprocess
    import sys

    from conftest import ROOT

    proc = subprocess.Popen([sys.executable, "-m", "probekit", "data", "list"], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before the command prints its first line
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == ""
