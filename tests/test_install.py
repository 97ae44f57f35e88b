"""probekit as a user installs it: the wheel built from this checkout, installed into a fresh virtualenv outside
the checkout, run from a folder outside it. The probe answers on the demo set, the app serves the Probe page,
nothing is written under the virtualenv (site-packages included) nor in the working folder, and data and cache
land in the user's directories (``platformdirs``, under a temporary HOME) or the ``PROBEKIT_*`` overrides.

The virtualenv sees the shared environment's site-packages through a ``.pth`` file, so torch & co. are not
downloaded again; the wheel itself is installed with ``--no-index``, which also checks that the pinned versions
of requirements.txt satisfy the package's dependency ranges. ``make test-install`` runs this file.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT

QUERY = "Metformin might treat [MASK]."
SOURCES = ["pyproject.toml", "setup.py", "README.md", "app.py", "serve.py", "pages", "probekit", "data/demo",
           "docs/icon.svg", ".streamlit/config.toml"]
"""What building the wheel reads (a copy, so the build writes nothing into the checkout)."""


def _venv(base: Path, name: str) -> Path:
    """A fresh virtualenv whose interpreter also sees this environment's site-packages (a .pth file)."""
    venv = base / name
    python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    Path(purelib, "_probekit_test_shared.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv


def _pip(venv: Path, *args: str) -> None:
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--no-input",
                          "--disable-pip-version-check", "-q", *args], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("install")
    src = base / "src"
    for rel in SOURCES:
        target = src / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / rel).is_dir():
            shutil.copytree(ROOT / rel, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / rel, target)
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                          "--disable-pip-version-check", "-q", "-w", str(base / "dist")], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = (base / "dist").glob("probekit-*.whl")
    venv = _venv(base, "venv")
    _pip(venv, "install", "--no-index", f"{wheel}[app]")
    home, work = base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PROBEKIT_", "XDG_", "VIRTUAL_ENV", "PYTHON", "STREAMLIT_"))}
    env.update(HOME=str(home), PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PROBEKIT_OFFLINE="1",
               HF_HUB_OFFLINE="1")
    return {"base": base, "src": src, "venv": venv, "home": home, "work": work, "env": env,
            "before": _snapshot(venv)}


def _probekit(inst, *args, env=None, timeout=600):
    return subprocess.run([str(inst["venv"] / "bin" / "probekit"), *args], cwd=inst["work"], capture_output=True,
                          text=True, env=env or inst["env"], timeout=timeout)


@pytest.mark.slow
def test_help_says_probekit(installed):
    res = _probekit(installed, "--help")
    assert res.returncode == 0 and res.stdout.startswith("usage: probekit "), res.stdout + res.stderr


@pytest.mark.slow
def test_probe_answers_from_outside_the_checkout(installed):
    res = _probekit(installed, "probe", "--model", "default", "--query", QUERY, "--dataset", "demo", "--k", "5")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith(QUERY) and "[default, retrieval" in lines[0]
    assert [line.split()[0] for line in lines[1:6]] == ["1", "2", "3", "4", "5"]
    cache = installed["home"] / ".cache" / "probekit"
    assert any(p.is_file() for p in cache.rglob("*")), "the embedding cache is in the user's cache dir"


@pytest.mark.slow
def test_info_reports_the_user_dirs_and_the_overrides(installed):
    res = _probekit(installed, "info", "--format", "json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    home = installed["home"]
    assert info["layout"] == "installed" and "site-packages" in info["package"]
    paths = {r["name"]: r["path"] for r in info["paths"]}
    assert paths["data"] == str(home / ".local" / "share" / "probekit")
    assert paths["cache"] == str(home / ".cache" / "probekit")
    datasets = {r["name"]: r for r in info["datasets"]}
    assert datasets["demo"]["found"] and "site-packages" in datasets["demo"]["path"]
    assert datasets["medlama"]["path"] == str(home / ".local" / "share" / "probekit" / "medlama")
    assert not datasets["medlama"]["found"] and datasets["medlama"]["get"].startswith("probekit data fetch medlama")

    other = installed["base"] / "elsewhere"
    env = {**installed["env"], "PROBEKIT_DATA_DIR": str(other / "data"), "PROBEKIT_CACHE_DIR": str(other / "c")}
    info = json.loads(_probekit(installed, "info", "--format", "json", env=env).stdout)
    paths = {r["name"]: r["path"] for r in info["paths"]}
    assert paths["data"] == str(other / "data") and paths["cache"] == str(other / "c")
    assert paths["database"] == str(other / "data" / "probekit.duckdb")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_app_serves_the_probe_page(installed):
    port = _free_port()
    log_path = installed["base"] / "app.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(installed["venv"] / "bin" / "probekit"), "app", "--port", str(port)],
                                cwd=installed["work"], env=installed["env"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://localhost:{port}"
    try:
        deadline = time.time() + 180
        while True:
            assert proc.poll() is None, f"probekit app exited: {log_path.read_text()[-2000:]}"
            assert time.time() < deadline, f"the app did not become healthy: {log_path.read_text()[-2000:]}"
            if _answers(f"{url}/_stcore/health"):
                break
            time.sleep(0.5)  # polling the health endpoint, not timing the app
        page = urllib.request.urlopen(url, timeout=30).read().decode()
        assert "<noscript>" in page and 'id="root"' in page  # Streamlit's app shell
        _browser_probe(url)
        # `kill PID` of `probekit app` (SIGTERM) stops its Streamlit server too: the port stops answering
        proc.terminate()
        proc.wait(timeout=30)
        deadline = time.time() + 30
        while _answers(f"{url}/_stcore/health"):
            assert time.time() < deadline, "the Streamlit server still answers after probekit app was sent SIGTERM"
            time.sleep(0.5)  # polling the health endpoint, not timing the app
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "Traceback" not in log_path.read_text(), log_path.read_text()[-2000:]


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).read() == b"ok"
    except OSError:
        return False


def _browser_probe(url: str) -> None:
    """The Probe page opens and a probe on the demo set shows its result (the browser test's own steps)."""
    try:
        import test_browser as tb
    except pytest.skip.Exception as e:  # no Chromium here: the HTTP checks above stand alone
        print(f"browser part skipped: {e}")
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = tb.launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(tb.TIMEOUT_MS)
            tb.open_page(page, url, "Probe", tb.PROBE_RUN(page))
            tb.PROBE_RUN(page).first.click()
            tb.wait_idle(page, *tb.PROBE_RESULT(page))
        finally:
            browser.close()


@pytest.mark.slow
def test_nothing_written_under_the_venv_nor_the_working_folder(installed):
    """Last in this file: every command above has run by now (pytest keeps the file's order)."""
    assert _snapshot(installed["venv"]) == installed["before"]
    assert list(installed["work"].iterdir()) == []


@pytest.mark.slow
def test_editable_install_runs_as_a_checkout(installed):
    venv = _venv(installed["base"], "venv-editable")
    _pip(venv, "install", "--no-index", "--no-build-isolation", "-e", str(installed["src"]))
    res = subprocess.run([str(venv / "bin" / "probekit"), "info", "--format", "json"], cwd=installed["work"],
                         capture_output=True, text=True, env=installed["env"], timeout=600)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["layout"] == "checkout" and info["package"] == str(installed["src"] / "probekit")
    assert {r["name"]: r["path"] for r in info["paths"]}["data"] == str(installed["src"] / "data")
    res = subprocess.run([str(venv / "bin" / "probekit"), "app", "--print-command"], cwd=installed["work"],
                         capture_output=True, text=True, env=installed["env"], timeout=600)
    assert res.returncode == 0 and f" run {installed['src'] / 'serve.py'} " in res.stdout, res.stdout + res.stderr


# ---------------------------------------------------------------- cheap checks in this environment

def test_the_library_and_the_commands_work_without_streamlit_and_plotly(tmp_path):
    """The core never needs the app extra: with streamlit and plotly made unimportable, the CLI runs and
    `probekit app` says which extra to install."""
    code = ("import sys; sys.modules['streamlit'] = sys.modules['plotly'] = None\n"
            "from probekit.cli import main\n"
            "assert main(['data', 'list']) == 0\n"
            "raise SystemExit(main(['app']))\n")
    env = {**os.environ, "PROBEKIT_DATA_DIR": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip() == "error: the app needs streamlit and plotly: pip install 'probekit[app]'"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "::"])
def test_exposing_the_app_without_an_organiser_token_is_refused(host, capsys, monkeypatch):
    """The rule: the app binds localhost by default; another interface without PROBEKIT_ORGANISER_TOKEN needs an
    explicit --allow-no-token, and with the token set it is served as asked."""
    from probekit import cli

    assert cli.main(["app", "--print-command", "--host", host]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "PROBEKIT_ORGANISER_TOKEN is not set" in err and "--allow-no-token" in err
    for local in ("localhost", "127.0.0.1", "::1"):
        assert cli.main(["app", "--print-command", "--host", local]) == 0
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("PROBEKIT_ORGANISER_TOKEN", "s3cret-organiser")
    assert cli.main(["app", "--print-command", "--host", host]) == 0
    assert capsys.readouterr().err == ""


def test_app_command_runs_the_checkout_app_with_its_streamlit_settings(capsys):
    from probekit import cli

    assert cli.main(["app", "--print-command", "--port", "8620", "--host", "0.0.0.0", "--allow-no-token"]) == 0
    out, err = capsys.readouterr()
    assert "warning: serving on 0.0.0.0 without PROBEKIT_ORGANISER_TOKEN" in err
    cmd = out.split()
    assert cmd[1:5] == ["-m", "streamlit", "run", str(ROOT / "serve.py")]
    flags = dict(zip(cmd[5::2], cmd[6::2]))
    assert flags["--server.fileWatcherType"] == "none" and flags["--server.maxUploadSize"] == "50"
    assert cmd[-4:] == ["--server.port", "8620", "--server.address", "0.0.0.0"]  # after the file's localhost
