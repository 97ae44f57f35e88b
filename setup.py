"""The wheel's layout; the metadata is in pyproject.toml.

The checkout keeps `app.py`, `pages/`, `data/demo/` and `probekit/` side by side. The wheel installs:

* `probekit/` (the library; never imports streamlit) and `probekit/_demo/` (a copy of `data/demo`, read by
  `config.demo_dir()` when installed);
* `probekit_app/` holding `app.py`, `serve.py` (the server: app.py behind the organiser gate), `pages/`,
  `docs/icon.svg` and `.streamlit/config.toml`: Streamlit finds
  a multipage app's pages relative to its main script and puts the script's folder on `sys.path`, so
  `from pages import ...` in app.py works in both layouts. `probekit app` runs `probekit_app/serve.py`.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

# Packages mapped onto shared folders take only these modules (the checkout root also holds setup.py; the demo
# folder holds its builder script, which the checkout's tests run).
MODULES = {"probekit_app": {"app", "serve"}, "probekit._demo": set()}


class BuildPy(build_py):
    def find_package_modules(self, package, package_dir):
        found = super().find_package_modules(package, package_dir)
        return found if package not in MODULES else [m for m in found if m[1] in MODULES[package]]


setup(
    cmdclass={"build_py": BuildPy},
    packages=[*find_packages(include=["probekit", "probekit.*"]), "probekit._demo", "probekit_app",
              "probekit_app.pages"],
    package_dir={"probekit._demo": "data/demo", "probekit_app": ".", "probekit_app.pages": "pages"},
    package_data={
        "probekit.datasets": ["release_files.json"],
        "probekit._demo": ["README.md", "*.csv", "2021AA/*.csv"],
        "probekit_app": ["docs/icon.svg", ".streamlit/config.toml"],
    },
)
