# The README's two commands: `make app` (start the app on the embedded default model) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8501

.PHONY: app test test-slow lint bench install clean-cache

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

test-slow: install
	$(PY) -m pytest -m slow

# ruff check only: the code keeps its hand-wrapped 120-column layout, which `ruff format` would rewrite.
lint: install
	$(PY) -m ruff check .

bench: install
	$(PY) benchmarks/encode.py && $(PY) benchmarks/live_query.py

clean-cache:
	rm -rf cache/embeddings cache/index
