"""The command line: ``python -m probekit COMMAND``; see :mod:`probekit.cli.main`."""

from .main import main

__all__ = ["main"]
