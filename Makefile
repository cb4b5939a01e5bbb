# Two commands for a fresh machine: `make demo` and `make test`. Both build .venv from nothing.
# `make demo` installs only what the demo needs; `make test` adds the test tools.
# On a GPU node add cupy: `make demo EXTRAS=cuda12` (or cuda13); `make test EXTRAS=cuda12` too.
PYTHON ?= python3
EXTRAS ?=
VENV   ?= .venv
BIN     = $(VENV)/bin
comma  := ,
# One stamp per set of extras, so a new EXTRAS value installs what it adds.
stamp   = $(VENV)/.installed-$(or $(subst $(comma),-,$(1)),base)
EXTRAS_DEMO = onnx$(if $(EXTRAS),$(comma)$(EXTRAS))
EXTRAS_TEST = test$(if $(EXTRAS),$(comma)$(EXTRAS))
STAMP_DEMO  = $(call stamp,$(EXTRAS_DEMO))
STAMP       = $(call stamp,$(EXTRAS_TEST))
# Exact versions of the test environment (see its header); `CONSTRAINTS=` installs the newest.
CONSTRAINTS ?= constraints.txt
PIN     = $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
# pytest's workers (pytest-xdist): one per core; `make test TEST_JOBS=0` runs the suite in one process.
# loadgroup keeps a module whose tests share a costly fixture on one worker (xdist_group marks).
TEST_JOBS ?= auto
XDIST   = -n $(TEST_JOBS) --dist loadgroup

.PHONY: FORCE build demo test test-fast lint typecheck cov bench bench-smoke gpu-check clean browser screenshot

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip $(PIN)

$(VENV)/.installed-%: pyproject.toml setup.py $(CONSTRAINTS) | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.$(if $(filter-out base,$*),[$(subst -,$(comma),$*)])' $(PIN)
	touch $@
	$(BUILT_LIST) > $(VENV)/.built

# The compiled core (gpuplace/compiled.py, setup.py): pip's install above compiles it in place
# (and stamps it built, listing the builds it left); this compiles again what changed since, so
# that no test runs an old build of an edited module, and again when the builds on disk are not
# those listed (one deleted by hand). A module that did not compile stays unlisted: no retry.
CORE_SRC := setup.py $(wildcard gpuplace/*.py gpuplace/*/*.py gpuplace/*/*.pxd)
CORE_SO = gpuplace/*.so gpuplace/*/*.so
BUILT_LIST = ls $(CORE_SO) 2>/dev/null | sort | tr '\n' ' '
ifneq ($(sort $(wildcard $(CORE_SO))),$(sort $(file < $(VENV)/.built)))
$(VENV)/.built: FORCE
endif
FORCE:
$(VENV)/.cython: $(CONSTRAINTS) | $(BIN)/python
	$(BIN)/python -m pip install -q Cython 'setuptools>=77' $(PIN)
	touch $@

$(VENV)/.built: $(CORE_SRC) | $(VENV)/.cython
	$(BIN)/python setup.py -q build_ext --inplace
	$(BUILT_LIST) > $@

build: $(VENV)/.built

demo: $(STAMP_DEMO) build
	$(BIN)/gpuplace devices
	$(BIN)/gpuplace run examples/guide/02_manual_placement.yaml --explain
	$(BIN)/gpuplace --machine 4xK20m run examples/guide/04_multi_tower.yaml --verify
	CUDA_VISIBLE_DEVICES=2,0 $(BIN)/gpuplace --machine 4xK20m devices --check
	$(BIN)/gpuplace --machine 4xK520 mem examples/guide/04_multi_tower.yaml --compare --memory-fraction 0.3
	$(BIN)/gpuplace --machine 4xK520 plan examples/big_model.yaml --strategy balanced
	$(BIN)/gpuplace --machine 4xK520 plan examples/onnx/branches.onnx --dim batch=262144 --strategy balanced

lint: $(STAMP)
	$(BIN)/ruff check gpuplace tests bench examples tools setup.py
	$(BIN)/ruff format --check gpuplace tests bench examples tools setup.py
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck browser build
	$(BIN)/python -m pytest $(XDIST) -rs --cov --cov-report=term:skip-covered --cov-report=html:htmlcov

# The HTML plan report's browser test (tests/report/test_browser.py) needs chromium: as root with
# apt-get, install Debian's when none is found; otherwise say so (that test then skips, saying why).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	[ -n "$$GPUPLACE_CHROMIUM" ] || \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium for the browser test (apt-get install chromium)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq chromium >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  echo "warning: apt-get could not install chromium: the browser test will skip"; \
	else echo "warning: no chromium (and not root with apt-get): the browser test will skip"; fi

# The README's picture of the HTML plan report (needs chromium: `make browser`).
screenshot: $(STAMP) browser
	$(BIN)/python -m tests.report.browser docs/img/plan-report.png

# The inner loop: the suite without the tests marked slow, no lint, no coverage.
test-fast: $(STAMP) build
	$(BIN)/python -m pytest $(XDIST) -m "not slow"

bench: $(STAMP) build
	for b in bench/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

# Every benchmark at small sizes (`--smoke`, bench/README.md); `make test` runs the same test.
bench-smoke: $(STAMP) build
	$(BIN)/python -m pytest -rs tests/test_bench_smoke.py

# On a machine with an NVIDIA GPU and cupy, from the source tree (no virtualenv, no registry).
gpu-check:
	PYTHONPATH=$(CURDIR) $(PYTHON) tests/gpu/summary.py; rc=$$?; \
	PYTHONPATH=$(CURDIR) $(PYTHON) bench/bench_gpu.py; exit $$rc

clean:
	rm -rf $(VENV) build gpuplace/*/*.so gpuplace/*.so htmlcov .coverage .pytest_cache .mypy_cache .ruff_cache
