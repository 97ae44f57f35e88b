"""``probekit app``: serve the Streamlit workbench (the same app as ``make app``).

Runs ``streamlit run`` on the checkout's ``app.py`` or, installed, on the copy in the ``probekit_app`` folder
of the wheel, with the settings of the app's ``.streamlit/config.toml`` passed as flags (Streamlit itself reads
that file only from the current directory). Binds to localhost unless ``--host`` says otherwise.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

from .. import config
from ..errors import ProbekitError


def app_script() -> Path:
    """The Streamlit main script: the checkout's ``app.py``, else the installed ``probekit_app/app.py``."""
    if config.in_checkout():
        return config.ROOT / "app.py"
    spec = importlib.util.find_spec("probekit_app")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        script = Path(folder) / "app.py"
        if script.is_file():
            return script
    raise ProbekitError("the app is not installed with this probekit (no probekit_app/app.py): reinstall probekit")


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
    cmd = command(args.port, args.host)
    if args.print_command:
        print(" ".join(cmd))
        return 0
    return subprocess.call(cmd)


def register(sub) -> None:
    p = sub.add_parser("app", help="serve the Streamlit workbench", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=None, help="port (default 8501)")
    p.add_argument("--host", default=None, help="address to bind (default localhost; read the README's Data "
                   "safety before exposing the app on a network)")
    p.add_argument("--print-command", action="store_true", help="print the streamlit command instead of running it")
    p.set_defaults(func=_cmd_app)


__all__ = ["app_script", "command", "register", "streamlit_flags"]
