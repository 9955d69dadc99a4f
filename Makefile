# Two verbs a newcomer needs: `make run` and `make test`. Each sets up what it needs first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip install -q --disable-pip-version-check
HOST   ?= 127.0.0.1
PORT   ?= 8000
# PyTorch's CPU-only wheels (~200 MB) instead of PyPI's default Linux build with CUDA (~5 GB)
CPU_INDEX := --extra-index-url https://download.pytorch.org/whl/cpu

.PHONY: run test verify lint bench clean

$(VENV)/.run: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch: keep one that is already there (e.g. your CUDA build); else the CUDA build where there is
	# an NVIDIA driver, the CPU build where there is none
	$(PY) -c "import torch" 2>/dev/null || { command -v nvidia-smi >/dev/null && $(PIP) torch numpy; } \
	  || $(PIP) $(CPU_INDEX) torch numpy
	$(PIP) -e .
	touch $@

$(VENV)/.test: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# the CPU build CI uses (a wheel cache first; then PyTorch's CPU index; macOS: PyPI's build is CPU)
	$(PIP) 'torch==2.13.0+cpu' 2>/dev/null || $(PIP) $(CPU_INDEX) 'torch==2.13.0+cpu' 2>/dev/null \
	  || $(PIP) torch==2.13.0
	$(PIP) 'pip>=25.1'  # dependency groups
	$(PIP) -e '.[postgres]' --group dev
	scripts/install-chromium
	# PostgreSQL's server for the tests' PostgreSQL half (they start a private one; skipped where it can't install)
	scripts/install-postgres
	touch $@ $(VENV)/.run

run: $(VENV)/.run
	$(VENV)/bin/pitfalls serve --host $(HOST) --port $(PORT)

test: $(VENV)/.test
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q
	$(VENV)/bin/pitfalls coverage
	$(VENV)/bin/pitfalls verify

verify: $(VENV)/.test
	$(VENV)/bin/pitfalls verify

lint: $(VENV)/.test
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

bench: $(VENV)/.test
	$(PY) bench/bench_search.py
	$(PY) bench/bench_pool.py

clean:
	rm -rf $(VENV) pitfalls.db* artifacts .pytest_cache
