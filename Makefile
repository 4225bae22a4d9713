# Two commands do all set-up on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
PYTEST_ARGS ?=

.PHONY: demo test soak lint typecheck install install-dev tools sandbox faketime tmux chromium agentdojo clean test-user test-unprivileged

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

# bubblewrap sandboxes workers' shell commands; without it hilbert refuses them (unless --unsandboxed).
sandbox:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1; }; }; } || \
	  echo "note: bubblewrap is not installed (needs root and apt); hilbert will refuse workers' shell commands unless you pass --unsandboxed"

# libfaketime moves the clock in the stop gate's differential runs; without it that part is skipped and
# the gate's evidence says so.
faketime:
	@ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 >/dev/null 2>&1 || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q libfaketime >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q libfaketime >/dev/null 2>&1; }; }; } || \
	  echo "note: libfaketime is not installed (needs root and apt); the judge will not move the clock in its differential runs"

# tmux runs the real `hilbert top` in a terminal for its end-to-end test (tests/fleet/test_top.py).
tmux:
	@command -v tmux >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q tmux >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q tmux >/dev/null 2>&1; }; }; } || \
	  echo "note: tmux is not installed (needs root and apt); the test of hilbert top in a terminal will fail"

# Debian's chromium runs hilbert web's page for its end-to-end test (tests/fleet/test_web.py), driven by the
# playwright package (dev extra) through its executable path: `playwright install` (a download) is never run.
chromium:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; }; }; } || \
	  echo "note: chromium is not installed (needs root and apt); the test of hilbert web in a browser will fail"

demo: install sandbox faketime
	$(BIN)/hilbert demo

lint: install-dev
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install-dev
	$(BIN)/mypy

# AgentDojo (bench/agentdojo_compare.py) in its own venv: its dependencies must not move hilbert's pins.
agentdojo: $(VENV)/.installed
	@test -x .venv-agentdojo/bin/python || python3 -m venv .venv-agentdojo
	@.venv-agentdojo/bin/python -c "import agentdojo" 2>/dev/null || \
	  .venv-agentdojo/bin/pip install -q agentdojo==0.1.35 -e .

test: install-dev tools sandbox faketime tmux chromium agentdojo lint typecheck
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory test-unprivileged PYTEST_ARGS=-q; \
	  else echo "make test: not run as root, so the suite above ran unprivileged already"; fi

# The kill/resume drill at soak size (tests/e2e/test_resume.py with 50 kills or more; `make test` runs
# it with the named points only) and the resume benchmark. Figures: docs/bench.md.
soak: install-dev
	HILBERT_RESUME_SOAK=1 $(BIN)/python -m pytest -q -s tests/e2e/test_resume.py $(PYTEST_ARGS)
	$(BIN)/python bench/resume.py --bugs 40 --workers 32 --kills 20

# The tests that must also pass as a user who is not root (no control groups: commands run under the
# subreaper, `hilbert.commands.reaper`), run as `$(TEST_USER)`, made here idempotently, without a password
# or a home. Needs root; tests/unprivileged.sh says how it runs them (a tree or a Python under /root
# included). `make test` run as root runs them so after the whole suite.
TEST_USER ?= hilbert-test
UNPRIVILEGED_TESTS ?= tests/commands/test_groups.py tests/commands/test_reaper.py tests/fleet/test_run.py \
  tests/fleet/test_disk_full.py

test-user:
	@[ "$$(id -u)" = 0 ] || { echo "make test-user: needs root (to add the user $(TEST_USER))"; exit 1; }
	@id -u $(TEST_USER) >/dev/null 2>&1 || \
	  useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin $(TEST_USER)

test-unprivileged: install-dev test-user
	tests/unprivileged.sh $(TEST_USER) $(BIN)/python -n 2 $(UNPRIVILEGED_TESTS) $(PYTEST_ARGS)

# External clients used by the interop tests, each in its own git-ignored prefix (see tools/README.md).
tools:
	$(MAKE) -C tools all

clean:
	rm -rf $(VENV) .venv-agentdojo .tools tools/npm/node_modules
