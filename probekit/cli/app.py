"""``probekit app``: serve the Streamlit workbench (the same app as ``make app``).

Runs ``streamlit run`` on the checkout's ``serve.py`` (``app.py`` behind the organiser gate) or, installed, on the
copy in the ``probekit_app`` folder of the wheel, with the settings of the app's ``.streamlit/config.toml`` passed
as flags (Streamlit itself reads that file only from the current directory). Binds to localhost unless ``--host``
says otherwise; another interface without ``PROBEKIT_ORGANISER_TOKEN`` is refused unless ``--allow-no-token``
says the exposure is meant (then a warning is printed).
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

from .. import config
from ..annotations.organiser import exposed_without_token
from ..errors import ProbekitError

SCRIPT = "serve.py"
"""The file ``streamlit run`` is given: the ASGI app serving ``app.py`` behind the organiser gate."""


def app_script() -> Path:
    """The Streamlit script to run: the checkout's ``serve.py``, else the installed ``probekit_app/serve.py``."""
    if config.in_checkout():
        return config.ROOT / SCRIPT
    spec = importlib.util.find_spec("probekit_app")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        script = Path(folder) / SCRIPT
        if script.is_file():
            return script
    raise ProbekitError(f"the app is not installed with this probekit (no probekit_app/{SCRIPT}): reinstall probekit")


def streamlit_flags(script: Path) -> list[str]:
    """The app's ``.streamlit/config.toml`` as ``--section.key value`` flags."""
    path = script.parent / ".streamlit" / "config.toml"
    if not path.is_file():
        return []
    flags = []
    for section, values in tomllib.loads(path.read_text(encoding="utf-8")).items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags += [f"--{section}.{key}", text]
    return flags


def command(port: int | None, host: str | None) -> list[str]:
    script = app_script()
    cmd = [sys.executable, "-m", "streamlit", "run", str(script), *streamlit_flags(script)]
    if port is not None:
        cmd += ["--server.port", str(port)]
    if host is not None:
        cmd += ["--server.address", host]
    return cmd


def _cmd_app(args) -> int:
    if importlib.util.find_spec("streamlit") is None or importlib.util.find_spec("plotly") is None:
        raise ProbekitError("the app needs streamlit and plotly: pip install 'probekit[app]'")
    if args.port is not None and not 0 < args.port < 65536:
        raise ProbekitError(f"--port must be between 1 and 65535, got {args.port}")

    if exposed_without_token(args.host):
        if not args.allow_no_token:
            raise ProbekitError(f"--host {args.host} lets other machines reach the app, and "
                                "PROBEKIT_ORGANISER_TOKEN is not set: set it (organisers then sign in with it), or "
                                "add --allow-no-token if this network is yours alone")
        print(f"warning: serving on {args.host} without PROBEKIT_ORGANISER_TOKEN: anyone who reaches this address "
              "gets the organiser pages until the first expert link is issued", file=sys.stderr)
    cmd = command(args.port, args.host)
    if args.print_command:
        print(" ".join(cmd))
        return 0
    return run_server(cmd)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals that stop ``probekit app`` and are passed on to its Streamlit server (``kill PID``, a closed terminal).
Ctrl-C (SIGINT) reaches the server from the terminal itself, as it reaches every process of the foreground group."""


def run_server(cmd: list[str]) -> int:
    """Run the Streamlit server as a child process until it exits; its exit code.

    A signal that stops this process is passed on to the child and the child is waited for, so stopping
    ``probekit app`` never leaves its server holding the port."""
    proc = subprocess.Popen(cmd)
    previous = {sig: signal.signal(sig, lambda signum, _frame: proc.send_signal(signum)) for sig in STOP_SIGNALS}
    try:
        rc = proc.wait()
        return 128 - rc if rc < 0 else rc  # killed by a signal: the shell's 128 + its number
    except KeyboardInterrupt:  # Ctrl-C: the server got it too; give it time to stop, then make sure
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            return 130
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def register(sub) -> None:
    p = sub.add_parser("app", help="serve the Streamlit workbench", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=None, help="port (default 8501)")
    p.add_argument("--host", default=None, help="address to bind (default localhost; read the README's Data "
                   "safety before exposing the app on a network)")
    p.add_argument("--allow-no-token", action="store_true", help="serve on another interface (--host) without "
                   "PROBEKIT_ORGANISER_TOKEN (refused otherwise)")
    p.add_argument("--print-command", action="store_true", help="print the streamlit command instead of running it")
    p.set_defaults(func=_cmd_app)


__all__ = ["SCRIPT", "app_script", "command", "register", "streamlit_flags"]
