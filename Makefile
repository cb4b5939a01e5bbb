# Two commands for a fresh machine: `make demo` and `make test`. Both build .venv from nothing.
# On a GPU node add cupy: `make demo EXTRAS=test,cuda12` (or cuda13).
PYTHON ?= python3
EXTRAS ?= test
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
# Exact versions of the test environment (see its header); `CONSTRAINTS=` installs the newest.
CONSTRAINTS ?= constraints.txt
PIN     = $(if $(CONSTRAINTS),-c $(CONSTRAINTS))

.PHONY: demo test test-fast lint typecheck cov bench bench-smoke gpu-check clean

$(STAMP): pyproject.toml $(CONSTRAINTS)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip $(PIN)
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]' $(PIN)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpuplace devices
	$(BIN)/gpuplace run examples/guide/02_manual_placement.yaml --explain
	$(BIN)/gpuplace --machine 4xK20m run examples/guide/04_multi_tower.yaml --verify
	CUDA_VISIBLE_DEVICES=2,0 $(BIN)/gpuplace --machine 4xK20m devices --check
	$(BIN)/gpuplace --machine 4xK520 mem examples/guide/04_multi_tower.yaml --compare --memory-fraction 0.3
	$(BIN)/gpuplace --machine 4xK520 plan examples/big_model.yaml --strategy balanced

lint: $(STAMP)
	$(BIN)/ruff check gpuplace tests bench examples
	$(BIN)/ruff format --check gpuplace tests bench examples
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -rs --cov --cov-report=term:skip-covered --cov-report=html:htmlcov

# The inner loop: the suite without the tests marked slow, no lint, no coverage.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow"

bench: $(STAMP)
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Every benchmark at small sizes (`--smoke`, bench/README.md); `make test` runs the same test.
bench-smoke: $(STAMP)
	$(BIN)/python -m pytest -rs tests/test_bench_smoke.py

# On a machine with an NVIDIA GPU and cupy, from the source tree (no virtualenv, no registry).
gpu-check:
	PYTHONPATH=$(CURDIR) $(PYTHON) tests/gpu/summary.py; rc=$$?; \
	PYTHONPATH=$(CURDIR) $(PYTHON) bench/bench_gpu.py; exit $$rc

clean:
	rm -rf $(VENV) htmlcov .coverage .pytest_cache .mypy_cache .ruff_cache
