# Two verbs a newcomer needs: `make run` and `make test`. Each sets up what it needs first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check

.PHONY: run test verify lint bench clean

$(VENV)/.run: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch: keep one that is already there (e.g. your CUDA build); else take the default build
	$(PY) -c "import torch" 2>/dev/null || $(PIP) torch numpy
	$(PIP) -e .
	touch $@

$(VENV)/.test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# the CPU build CI uses; a range in pyproject would pull a multi-GB CUDA build
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test]'
	scripts/install-chromium
	touch $@ $(VENV)/.run

run: $(VENV)/.run
	$(VENV)/bin/pitfalls serve

test: $(VENV)/.test
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q
	$(VENV)/bin/pitfalls coverage
	$(VENV)/bin/pitfalls verify

verify: $(VENV)/.test
	$(VENV)/bin/pitfalls verify

lint: $(VENV)/.test
	$(VENV)/bin/ruff check .

bench: $(VENV)/.test
	$(PY) bench/bench_search.py
	$(PY) bench/bench_pool.py

clean:
	rm -rf $(VENV) pitfalls.db* artifacts .pytest_cache
