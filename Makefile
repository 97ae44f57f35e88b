# The README's two commands: `make app` (start the app on the embedded default model) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: app test test-fast test-browser test-slow lint bench install clean-cache screenshots

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

install: $(VENV)/.installed

app: install
	$(PY) -m streamlit run app.py --server.fileWatcherType none --server.address localhost \
		--server.port $(PORT) --server.headless true --browser.gatherUsageStats false

test: install
	$(PY) -m ruff check .
	$(PY) -m pytest

# The default suite in two parts that run alone: everything but the Playwright tests, and those tests only.
test-fast: install
	$(PY) -m pytest -m "not slow and not browser"

test-browser: install
	$(PY) -m pytest -m "browser and not slow" tests

test-slow: install
	$(PY) -m pytest -m slow

# Every page at 1280x720 into docs/screenshots/ (README, Pages): taken by the browser test after its runs, so the
# pages show stored results. Needs Debian's chromium (apt-get install chromium).
screenshots: install
	@command -v chromium >/dev/null || test -x "$$PROBEKIT_CHROMIUM" || { echo "make screenshots needs chromium: apt-get install chromium"; exit 1; }
	PROBEKIT_SCREENSHOTS=$(CURDIR)/docs/screenshots $(PY) -m pytest tests/test_browser.py -q -p no:cacheprovider

# ruff check only: the code keeps its hand-wrapped 120-column layout, which `ruff format` would rewrite.
lint: install
	$(PY) -m ruff check .

bench: install
	$(PY) benchmarks/encode.py && $(PY) benchmarks/live_query.py

clean-cache:
	rm -rf cache/embeddings cache/index
