"""The parser class of every command and action: a flag it does not know is refused by the command the user typed.

argparse leaves a sub-command's unknown flags to the top-level parser, which answers with its own usage
(``usage: probekit [-h] COMMAND ...``), and checks required arguments before it looks at unknown flags, so
``probekit vocab build --nosuch`` complained about missing arguments and never named ``--nosuch``. Here the deepest
command refuses an unknown flag itself, first, with its own usage on one line. Kept free of heavy imports:
:mod:`probekit.cli.main` uses it to answer ``probekit --help`` without loading torch.
"""

from __future__ import annotations

import argparse
import re

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's rule: a value, not a flag


class CommandParser(argparse.ArgumentParser):
    """A command's (or action's) parser that refuses the flags it does not know: one usage line, one error line,
    exit 2."""

    def parse_known_args(self, args=None, namespace=None):
        if args is not None:
            unknown = self._unknown_flags(list(args))
            if unknown:
                self.error(f"unrecognized arguments: {' '.join(unknown)} (see {self.prog} --help)")
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)} (see {self.prog} --help)")
        return namespace, extras

    def _subcommands(self) -> set[str]:
        """The names of this parser's own sub-commands (none for a leaf)."""
        return {name for a in self._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}

    def _unknown_flags(self, args: list[str]) -> list[str]:
        """The tokens of ``args`` that are flags and none of this parser's (before ``--``; abbreviations count
        as known where the parser expands them; what follows a sub-command is the sub-command's to judge). Looked
        at before parsing, so an unknown flag is named even when a required argument is missing too."""
        known = self._option_string_actions
        long_flags = [s for s in known if s.startswith("--")]
        subcommands = self._subcommands()
        out = []
        for arg in args:
            if arg == "--" or arg in subcommands:
                break
            if len(arg) < 2 or arg[0] not in self.prefix_chars or " " in arg or _NEGATIVE_NUMBER.match(arg):
                continue
            flag = arg.split("=", 1)[0]
            if flag in known or (not arg.startswith("--") and arg[:2] in known):  # -k5, -qv
                continue
            if self.allow_abbrev and arg.startswith("--") and any(s.startswith(flag) for s in long_flags):
                continue  # an abbreviation (argparse says itself when it is ambiguous)
            out.append(arg)
        return out

    def error(self, message: str):
        usage = " ".join(self.format_usage().split())
        if len(usage) > 100:  # one line, whatever the number of flags: the positionals and "[options]"
            positionals = [a.metavar or a.dest for a in self._actions
                           if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
            subcommand = ["ACTION ..."] if self._subcommands() else []
            usage = " ".join(["usage:", self.prog, "[options]", *map(str, positionals), *subcommand])
        self.exit(2, f"{usage}\n{self.prog}: error: {message}\n")


class ActionParser(CommandParser):
    """The parser of one action of a command (``runs list``, ``corpus index``...): it takes only its own flags.

    A flag it does not know (a sibling action's, a typo) is refused here, by the action itself, instead of being
    left to the top-level parser; abbreviated flags are not expanded (``--n`` is not ``--name``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
