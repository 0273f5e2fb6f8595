# Two entry points that set themselves up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Portable llama.cpp build flags: the default native build crashes on CPUs with AMX (see DESIGN.md).
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF

.PHONY: run test lint install clean

$(VENV)/.core-installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The embedded target (llama-cpp-python builds from source: several minutes the first time,
# then pip's wheel cache makes it quick).
$(VENV)/.local-installed: $(VENV)/.core-installed
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install --quiet -e '.[local,test]'
	touch $@

install: $(VENV)/.local-installed

run: $(VENV)/.local-installed
	$(VENV)/bin/mheval run

lint: $(VENV)/.core-installed
	$(VENV)/bin/ruff check src tests $(wildcard benchmarks)

test: $(VENV)/.local-installed lint
	$(VENV)/bin/pytest -q

clean:
	rm -rf $(VENV) runs .pytest_cache
