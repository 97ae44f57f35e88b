# The README's two commands: `make app` (start the app on the embedded default model) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

# The shared data copy beside the checkout (CI clones the repo with shared/ beside it). Without it probekit looks
# in data/ (`probekit data fetch medlama` puts MedLAMA there); a variable set by the caller wins.
SHARED_DATA := $(abspath ../shared/data)
ifneq ($(wildcard $(SHARED_DATA)/medlama/2021AA),)
export PROBEKIT_MEDLAMA_DIR ?= $(SHARED_DATA)/medlama
endif
ifneq ($(wildcard $(SHARED_DATA)/elicit_corpora),)
export PROBEKIT_CORPORA_DIR ?= $(SHARED_DATA)/elicit_corpora
endif

.PHONY: app test test-fast test-browser test-slow test-heavy test-install lint typecheck bench install clean-cache screenshots golden

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-nodeps.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -r requirements-nodeps.txt
	touch $@

install: $(VENV)/.installed

app: install
	$(PY) -m streamlit run serve.py --server.fileWatcherType none --server.address localhost \
		--server.port $(PORT) --server.headless true --browser.gatherUsageStats false

# The default suite runs on two pytest-xdist workers; tests/conftest.py (pytest_xdist_make_scheduler) keeps each
# file's tests on one worker and the Chromium files on one. PYTEST_WORKERS=0 runs it in one process; PYTEST_ARGS adds
# options (CI: --durations).
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?=
XDIST = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist load)

test: install
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The default suite in two parts that run alone: everything but the Playwright tests, and those tests only.
test-fast: install
	$(PY) -m pytest $(XDIST) -m "not slow and not heavy and not browser"

test-browser: install
	$(PY) -m pytest -m "browser and not slow and not heavy" tests

test-slow: install
	$(PY) -m pytest -m slow

# End-to-end stress, kill and reference checks (marker `heavy`): left out of `make test`, run by CI after it, one
# at a time (several of them measure how the app holds under load, so they do not share the cores).
test-heavy: install
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-engines.txt  # llama.cpp's server: compiled once
	$(PY) -m pytest -m heavy $(PYTEST_ARGS)

# The wheel of this checkout installed into a fresh virtualenv outside it (tests/test_install.py): from another
# folder the probe answers and `probekit app` serves the Probe page; nothing is written under site-packages.
test-install: install
	$(PY) -m pytest tests/test_install.py -m "slow or not slow" -q

# Rewrite tests/golden/*.json (each probe's demo-set output) and docs/measurements.md's demo numbers from fresh runs;
# review the diff before committing it. `python -m tests.golden` alone checks them.
golden: install
	$(PY) -m tests.golden --update

# Every page at 1280x720 into docs/screenshots/ (README, Pages): taken by the browser test after its runs, so the
# pages show stored results. Needs Debian's chromium (apt-get install chromium).
screenshots: install
	@command -v chromium >/dev/null || test -x "$$PROBEKIT_CHROMIUM" || { echo "make screenshots needs chromium: apt-get install chromium"; exit 1; }
	PROBEKIT_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest tests/test_browser.py -q -p no:cacheprovider -m "not slow"

# ruff check only: the code keeps its hand-wrapped 120-column layout, which `ruff format` would rewrite.
lint: install
	$(PY) -m ruff check .

# mypy on probekit/ with the settings in pyproject.toml [tool.mypy]; also part of `make test`.
typecheck: install
	$(PY) -m mypy

bench: install
	$(PY) benchmarks/encode.py && $(PY) benchmarks/live_query.py

clean-cache:
	rm -rf cache/embeddings cache/index
