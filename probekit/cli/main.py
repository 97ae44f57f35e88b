"""probekit COMMAND: every core action from the shell (python -m probekit COMMAND works too).

One fixed table of commands, each a module of this package with ``register(subparsers)``. Only the
chosen command's module is imported, so ``python -m probekit --help`` answers without loading torch.
User errors (:class:`~probekit.errors.ProbekitError`) print one ``error:`` line and exit 2, never a
traceback; anything else is a bug: one line, and the traceback with ``PROBEKIT_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import warnings

from .. import config
from ..errors import ProbekitError, disk_full, positive_int
from ..types import MAX_K
from .parsing import CommandParser

COMMANDS: dict[str, tuple[str, str]] = {
    "probe": ("probekit.cli.probe", "rank candidate entities for one query"),
    "bench": ("probekit.cli.bench", "probe a whole dataset and print per-relation, macro and micro acc@k"),
    "runs": ("probekit.cli.runs", "stored benchmark runs: list, show, export, delete"),
    "layers": ("probekit.cli.layers", "layer-wise probing: accuracy per relation and layer"),
    "context": ("probekit.cli.context", "context variance: rank change and UCM (single triple or dataset)"),
    "rewire": ("probekit.cli.rewire", "contrastive rewiring (Rewire-then-Probe) of an encoder"),
    "sweep": ("probekit.cli.rewire", "probe every checkpoint of rewiring runs: acc@k against training step"),
    "annotations": ("probekit.cli.annotations", "expert annotation sessions: create, list, stats, export"),
    "tour": ("probekit.cli.tour", "tours of saved views for a talk: list, show, add, export, import, check"),
    "grid": ("probekit.cli.grid", "probing grids (models x datasets x probes x options x layers), local or Ray"),
    "corpus": ("probekit.cli.corpus", "corpora: index entity mentions once, find real contexts, template-free prompts"),
    "diskne": ("probekit.cli.diskne", "DisKnE: disease knowledge by per-disease fine-tuning (build, run, show)"),
    "templates": ("probekit.cli.templates", "template-based vs template-free: compare runs, parallel sets"),
    "perplexity": ("probekit.cli.perplexity", "perplexity of prompts (pseudo for masked LMs, causal LMs)"),
    "vocab": ("probekit.cli.vocab", "vocabularies at scale: build from UMLS or a name list (resumable), list, info"),
    "app": ("probekit.cli.app", "serve the Streamlit workbench (needs the app extra: pip install 'probekit[app]')"),
    "info": ("probekit.cli.info", "paths, device, versions, datasets and models found, and how to get the missing"),
    "data": ("probekit.cli.data", "datasets: fetch the official MedLAMA/BioLAMA releases, add a local copy, list"),
    "models": ("probekit.cli.models_cmd", "models: fetch a Hugging Face model into the local cache, list"),
}
"""command -> (module with ``register(sub)``, one-line help). A new command is one module and one entry."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; only ``command``'s module is imported (the others are listed by name and help)."""
    parser = argparse.ArgumentParser(prog="probekit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    registered: set[str] = set()
    if command in COMMANDS:
        module = importlib.import_module(COMMANDS[command][0])
        before = set(sub.choices)
        try:
            module.register(sub)
        except argparse.ArgumentError as e:  # a flag the command adds after a probe option took its name
            raise ProbekitError(f"command {command!r} cannot start: {e} (a probe option is named like one of "
                                "its flags: rename the option)") from None
        registered = set(sub.choices) - before
    for name, (_, help_text) in COMMANDS.items():
        if name not in registered:
            sub.add_parser(name, help=help_text)
    return parser


def _command_of(argv: list[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(_command_of(argv))
    except ProbekitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):  # pragma: no cover - every registered command sets func
        parser.error(f"unknown command {args.command!r}")
    warnings.filterwarnings("ignore")
    try:
        if getattr(args, "k", None) is not None:  # every command's --k: one limit, one line (`--k 10^20` ran)
            positive_int("k", args.k, maximum=MAX_K)
        return int(args.func(args) or 0)
    except ProbekitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("error: out of memory; try a smaller --batch-size or fewer relations", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (`probekit runs list | head`): silent, as a shell tool is
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush has nowhere to fail
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose pipe closed
    except OSError as e:  # unreadable files, full disks: the user's to fix
        print(f"error: {disk_full(e, places=_written(args)) or e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a bug: one line for the user, the traceback on request
        if (full := disk_full(e, places=_written(args))) is not None:  # a full disk as a library reports it
            print(f"error: {full}", file=sys.stderr)
            return 2
        if config.debug():
            raise
        print(f"error: unexpected {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''} "
              "(a bug in probekit; run with PROBEKIT_DEBUG=1 for the traceback)", file=sys.stderr)
        return 1


def _written(args) -> list:
    """Where a command writes, to name the full disk when its error names no file: the command's arguments that
    are paths (an export's file: named first when several are on the full disk), then probekit's folders (a
    database error names its file itself)."""
    return [*(v for v in vars(args).values() if isinstance(v, os.PathLike) or isinstance(v, str) and os.sep in v),
            config.cache_dir(), config.vocab_dir(), config.data_dir(), config.db_path()]
