"""What every command shares: model/dataset flags, probe flags generated from the probes' options,
dataset loading, printing and CLI progress."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .. import config
from ..datasets import load_dataset
from ..datasets.formats import dataset_help, set_names
from ..errors import ProbekitError
from ..jobs import Progress
from .main import COMMANDS, build_parser
from .parsing import ActionParser

VOCABS = ("heads+tails", "tails", "relation")


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=config.DEFAULT_MODEL,
                   help="registry id, Hugging Face id, local folder, or 'default' (embedded MiniLM)")
    p.add_argument("--device", default=None, help="cuda | cpu (default: CUDA when present)")


def add_dataset_args(p: argparse.ArgumentParser, *, default: str | None = "demo") -> None:
    """``--dataset`` (its help lists every registered dataset: :mod:`probekit.datasets.formats`), ``--data-dir``,
    ``--set`` (the sets the datasets take) and ``--relation``. An unknown name fails when the dataset is loaded, with
    the close names (``unknown dataset 'x'; did you mean …``)."""
    p.add_argument("--dataset", default=default, metavar="NAME", help=dataset_help().replace("%", "%%"))
    p.add_argument("--data-dir", default=None, help="dataset folder or file (default from PROBEKIT_*_DIR)")
    p.add_argument("--set", dest="which", default="full", choices=set_names(), help="the set of MedLAMA (or demo)")
    p.add_argument("--relation", action="append", default=None, help="only these relations (repeatable)")


def _probe_option_table() -> dict:
    """Every probe option by name, with the probes that take it (one flag per name)."""
    from ..probes import PROBES

    table: dict[str, tuple] = {}
    for probe in PROBES.values():
        for o in probe.options:
            if o.name in table:
                first, owners, defaults = table[o.name]
                owners.append(probe.name)
                defaults.add(repr(o.default))
                more = tuple(c for c in o.choices if c not in first.choices)
                if first.choices and more:  # one flag for all: it takes every probe's values (e.g. each's presets)
                    table[o.name] = (dataclasses.replace(first, choices=first.choices + more), owners, defaults)
            else:
                table[o.name] = (o, [probe.name], {repr(o.default)})
    return table


def vocab_of(args, probe, *, has_relation: bool = True) -> str:
    """The candidate vocabulary: ``--vocab`` when given, else the probe's default (:meth:`Probe.vocab`)."""
    return probe.vocab(args.vocab, has_relation=has_relation)


def add_probe_args(p: argparse.ArgumentParser, *, vocab: bool = True) -> None:
    """``--probe`` and one flag per probe option, generated from :class:`probekit.probes.Option`s: a new
    probe's options become flags with no change here. Unset flags leave the probe's default; a boolean option
    gets ``--name`` and ``--no-name`` (so an option defaulting to True can be switched off).

    An option whose flag or name is already the command's own is refused with a message naming both."""
    from ..probes import PROBES

    # probes present now are checked here, against this parser; one registered later is checked at registration
    PROBES.add_check(check_probe_flags, now=False)
    p.add_argument("--probe", default="retrieval", help=" | ".join(PROBES))
    if vocab:
        p.add_argument("--vocab", default=None, metavar="VOCAB",
                       help="candidate vocabulary: heads+tails | tails | relation, or a vocabulary NAME built with "
                            "`probekit vocab build`; default: the probe's own (likelihood: relation), else heads+tails")
    taken = {s: a for a in p._actions for s in a.option_strings} | {a.dest: a for a in p._actions}
    for name, (o, owners, defaults) in _probe_option_table().items():
        clash = taken.get(o.flag) or taken.get(name) or taken.get("--no-" + o.flag[2:])
        if clash is not None:
            raise ProbekitError(f"option {name!r} of probe {owners[0]!r} clashes with {p.prog}'s own "
                                f"{'/'.join(clash.option_strings) or clash.dest}: rename the option")
        where = f"[{', '.join(owners)}]"
        if o.value_type is bool:
            action = p.add_argument(o.flag, dest=name, action=argparse.BooleanOptionalAction, default=None,
                                    help=f"{o.help} {where}")
        else:
            choices = [c for c in o.choices if c is not None] or None
            default = "" if o.default is None or len(defaults) > 1 else f"; default {o.default}"
            action = p.add_argument(o.flag, dest=name, type=o.value_type, default=None, choices=choices,
                                    help=f"{o.help} {where}{default}")
        action.probe_option = True  # type: ignore[attr-defined]  # read by command_names()


def command_names() -> dict[str, set[str]]:
    """Every flag and argument name each command takes itself (probe option flags left out): what a probe option
    may not be called. Builds every command's parser, so it is computed when a probe is registered late, not on
    each command line."""

    out: dict[str, set[str]] = {}
    for command in COMMANDS:
        parser = build_parser(command)
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, sub in commands.choices.items():
            if name == command:
                stack = [sub]
                while stack:  # a command's own sub-commands too
                    cur = stack.pop()
                    for a in cur._actions:
                        if getattr(a, "probe_option", False) or isinstance(a, argparse._HelpAction):
                            continue
                        if isinstance(a, argparse._SubParsersAction):
                            stack += list(a.choices.values())
                            continue
                        out.setdefault(command, set()).update(a.option_strings)
                        out[command].add(a.dest)
    return out


def check_probe_flags(name: str, probe) -> None:
    """A registry check (:meth:`probekit.errors.Registry.add_check`): none of ``probe``'s options may be named like
    a flag or argument of a command, which would make that command fail to start."""
    names = command_names()
    for o in probe.options:
        for command, taken in names.items():
            hit = next((x for x in (o.flag, o.name, "--no-" + o.flag[2:]) if x in taken), None)
            if hit is not None:
                raise ProbekitError(f"option {o.name!r} of probe {name!r} clashes with {hit!r} of command "
                                    f"{command!r}: rename the option")


def probe_options(args, probe) -> dict:
    """The options ``probe`` takes that were given on the command line (the rest keep their defaults)."""
    return {o.name: getattr(args, o.name) for o in probe.options if getattr(args, o.name, None) is not None}


def load_dataset_from_args(args):
    """The dataset of ``--dataset/--data-dir/--set``, narrowed to ``--relation``s by :meth:`Dataset.filter`:
    the queries shrink, the candidate vocabularies stay the whole set's (only ``--vocab relation`` ranks
    among one relation's tails)."""

    ds = load_dataset(args.dataset, path=args.data_dir, which=args.which)
    if args.relation:
        ds = ds.filter(relations=args.relation)
    return ds


def print_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_listing(frame, fmt: str, *, empty: str, line=None) -> None:
    """A stored-items listing (``--list`` / ``runs``): JSON records, or one line per row (``line(record)``,
    default: the frame as a table), or ``empty`` when there is nothing."""
    if fmt == "json":
        print_json(frame.to_dict(orient="records"))
    elif frame.empty:
        print(empty)
    elif line is None:
        print(frame.to_string(index=False))
    else:
        for record in frame.to_dict(orient="records"):
            print(line(record))


def add_actions(p: argparse.ArgumentParser) -> argparse._SubParsersAction:
    """The actions of command ``p`` as sub-commands (``p.add_parser(name, help=...)`` each), every one an
    :class:`ActionParser` with its own flags and its own ``--help``."""
    return p.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=ActionParser)


class _BarStderr:
    """``sys.stderr`` while a bar is live: a line written by anything else (a warning, a log record, an error)
    first ends the bar's line, so it starts a line of its own (on a terminal the bar is cleared and redrawn
    below it; in a log file the bar's line is ended with a newline)."""

    def __init__(self, real):
        self.real, self.bar, self.dirty = real, None, False

    def bar_write(self, text: str) -> None:  # the bar's own output
        self.real.write(text)
        self.dirty = not text.endswith("\n")

    def write(self, text: str) -> int:
        if text and self.dirty:
            if self.isatty() and self.bar is not None:
                self.bar.clear()
            else:
                self.real.write("\n")
            self.dirty = False
        n = self.real.write(text)
        if text.endswith("\n") and self.bar is not None and self.isatty():
            self.bar.refresh()
        return n

    def end_line(self) -> None:
        if self.dirty and not self.isatty():
            self.real.write("\n")
        self.dirty = False

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.real, "isatty", lambda: False)())

    def __getattr__(self, name):
        return getattr(self.real, name)


class _BarFile:
    """The file tqdm draws on: the real stderr, with the bar's writes noted (see :class:`_BarStderr`)."""

    def __init__(self, owner: _BarStderr):
        self.owner = owner
        self.encoding = getattr(owner.real, "encoding", None) or "utf-8"

    def write(self, text: str) -> None:
        self.owner.bar_write(text)

    def flush(self) -> None:
        self.owner.real.flush()

    def isatty(self) -> bool:
        return self.owner.isatty()


@contextmanager
def progress_bar(quiet: bool = False) -> Iterator[Progress | None]:
    """The command line's one progress display: a ``progress(done, total, stage)`` drawing a tqdm bar on stderr,
    or None with ``--quiet``. Use it as ``with progress_bar(args.quiet) as report: work(progress=report)``.

    One bar for the whole command: a new total (or a count going back) restarts it in place; the stage text is
    its description, redrawn as soon as the stage changes (its counters aside), the counts at tqdm's pace. While
    the bar is live, anything else written to stderr (a warning, a log line, an error) first ends the bar's line
    (:class:`_BarStderr`), and the bar is cleared (terminal) or its line ended (log file) when the block ends,
    normally or by an error, so an error line never lands on the bar's line and stdout (``--format json``)
    never sees it."""
    if quiet:
        yield None
        return
    from tqdm.auto import tqdm

    state: dict = {"bar": None, "key": None}
    real = sys.stderr
    proxy: Any = _BarStderr(real)  # stands in for sys.stderr (a TextIO) while the bar is live

    def report(done: int, total: int, stage: str = "") -> None:
        total, done = max(int(total), 1), max(int(done), 0)
        bar = state["bar"]
        key = _NUMBER.sub("#", stage)
        if bar is None:  # drawn at once, with its stage
            state["key"] = key
            bar = state["bar"] = proxy.bar = tqdm(total=total, initial=min(done, total), desc=stage[:100],
                                                  file=_BarFile(proxy), leave=False, dynamic_ncols=True,
                                                  mininterval=0.5)
            return
        if bar.total != total or done < bar.n:
            bar.reset(total=total)
        if key != state["key"]:
            state["key"] = key
            bar.set_description_str(stage[:100], refresh=False)
            bar.n = min(done, total)
            bar.refresh()
        else:
            bar.set_description_str(stage[:100], refresh=False)
            bar.update(min(done, total) - bar.n)

    sys.stderr = proxy
    handlers = [h for h in logging.root.handlers if isinstance(h, logging.StreamHandler) and h.stream is real]
    for h in handlers:  # handlers hold the stream they were made with
        h.setStream(proxy)
    try:
        yield report
    finally:
        for h in handlers:
            h.setStream(real)
        sys.stderr = real
        if state["bar"] is not None:
            state["bar"].close()
        proxy.end_line()


_NUMBER = re.compile(r"\d[\d.,]*")
"""A count or a value in a stage text ("relation 3/19 may_treat · scoring 512/1,000"): not a new stage."""
