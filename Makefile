# Two entry points for a fresh machine: `make train` and `make test`.
PYTHON ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
TORCH_SPEC ?= torch==2.13.0

.PHONY: train test lint fuzz docs venv clean games

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 or run 'make PYTHON=/path/to/python3.11'"; exit 1; }
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	@# The CPU build of torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(VENV)/bin/python -m pip install --quiet '$(TORCH_SPEC)'
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

train: $(STAMP)
	$(VENV)/bin/oakemu-rl train

test: $(STAMP)
	@# One process per core, a file at a time, so a file's shared fixtures (trained runs, the
	@# Ray cluster) are built once.
	$(VENV)/bin/python -m pytest -q -n auto --dist loadfile --durations=10

fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(VENV)/bin/python -m pytest -q tests/test_fuzz.py

docs: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[docs]'
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

games: $(STAMP)
	$(VENV)/bin/python -m oakemu_rl.games.build

clean:
	rm -rf $(VENV) inspect_out site
