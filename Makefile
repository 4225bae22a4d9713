# Two commands do all set-up on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
PYTEST_ARGS ?=

.PHONY: demo test lint typecheck install install-dev tools clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) install -c constraints.txt -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP) install -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/hilbert demo

lint: install-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install-dev
	$(BIN)/mypy

test: install-dev tools lint typecheck
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# External clients used by the interop tests, each in its own git-ignored prefix (see tools/README.md).
tools:
	$(MAKE) -C tools all

clean:
	rm -rf $(VENV) .tools tools/npm/node_modules
