# trainguard — `make help` lists the targets. `make demo` and `make test` set themselves up.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
VERSION = $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' trainguard/__init__.py)
REGISTRY ?=
COMPONENT_IMAGE = $(if $(REGISTRY),$(REGISTRY)/,)trainguard/components:$(VERSION)
TRAINER_IMAGE = $(if $(REGISTRY),$(REGISTRY)/,)trainguard/trainer:$(VERSION)
JAX_TRAINER_IMAGE = $(if $(REGISTRY),$(REGISTRY)/,)trainguard/jax-trainer:$(VERSION)

.PHONY: help install test test-slow test-long demo compile bench lint images cloud-images clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  make %-10s %s\n", $$1, $$2}'

# A PYTHON given on the command line or in the environment that is not the interpreter .venv was
# made from makes .venv again; without one, an existing .venv is kept (and updated).
BASE := $(VENV)/.python
WHICH_PYTHON := import sys; print(sys.base_prefix, sys.version.split()[0])
VENV_CLEAR :=
ifneq ($(origin PYTHON),file)
ifneq ($(shell $(PYTHON) -c '$(WHICH_PYTHON)' 2>/dev/null),$(shell cat $(BASE) 2>/dev/null))
.PHONY: $(STAMP)
VENV_CLEAR := --clear
endif
endif

$(STAMP): pyproject.toml
	$(if $(VENV_CLEAR),$(PYTHON) -m venv --clear $(VENV),[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV))
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,pipelines,gcs,torch,jax,lightning,keras,hf,examples]'
	@$(BIN)/python -c '$(WHICH_PYTHON)' > $(BASE)
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install trainguard with every extra (dev, pipelines, torch, jax, …)

# Two parts, split by the `slow` mark. `make test` is the quick loop (every test that takes under
# a few seconds; four workers fill two cores). `make test-slow` starts real trainers, pipelines and
# Ctrl-C: five workers, since many of them wait on the trainers they started. CI runs both.
# loadgroup: one test (or one xdist_group) at a time to whichever worker is free.
PYTEST_WORKERS ?= 4
SLOW_WORKERS ?= 5
PYTEST_DIST = --dist loadgroup

# Keep the compiled-module caches even where PYTHONDONTWRITEBYTECODE is set: the suite starts
# processes that import trainguard.
test: export PYTHONDONTWRITEBYTECODE :=
test: install ## the quick suite (<= 2 min): unit, integration on loopback servers, pipelines, fuzzing
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) $(PYTEST_DIST) -m 'not slow and not long'

test-slow: export PYTHONDONTWRITEBYTECODE :=
test-slow: install ## the end-to-end tests that take seconds each: real trainers preempted and resumed, the KFP runner, Ctrl-C
	$(BIN)/python -m pytest -q -n $(SLOW_WORKERS) $(PYTEST_DIST) -m 'slow and not long'

test-long: install ## the long variants (many random kill points, ...)
	$(BIN)/python -m pytest -q -n $(SLOW_WORKERS) $(PYTEST_DIST) -m long

demo: install ## the guarded pipeline end to end in the KFP local runner (no cloud account)
	$(BIN)/python -m trainguard.pipelines.demo

compile: install ## compile pipelines and components to compiled/*.yaml (REGISTRY=… names the components image: required)
	$(BIN)/trainguard compile --output-dir compiled $(if $(REGISTRY),--image $(COMPONENT_IMAGE),)

bench: install ## benchmarks: CLI start-up, preflight concurrency, checkpoint stall/throughput, validation speed
	@for b in tests/benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: install ## ruff (rules, complexity <= 15), ruff format --check, mypy on the core
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

images: ## docker build (and push with REGISTRY=…) the components, trainer and jax-trainer images
	@if ! docker info >/dev/null 2>&1; then \
	  echo "make images: no Docker engine is reachable (docker info failed)." >&2; \
	  echo "Run it where a Docker engine runs (it builds containers/components/Dockerfile and" >&2; \
	  echo "containers/trainer/Dockerfile from the repository root), or build and push both with" >&2; \
	  echo "Cloud Build: make cloud-images REGISTRY=LOCATION-docker.pkg.dev/PROJECT/REPO" >&2; \
	  exit 1; fi
	docker build -f containers/components/Dockerfile -t $(COMPONENT_IMAGE) .
	docker build -f containers/trainer/Dockerfile -t $(TRAINER_IMAGE) .
	docker build -f containers/trainer/Dockerfile.jax -t $(JAX_TRAINER_IMAGE) .
	@if [ -n "$(REGISTRY)" ]; then docker push $(COMPONENT_IMAGE) && docker push $(TRAINER_IMAGE) \
	  && docker push $(JAX_TRAINER_IMAGE); fi

# The project of REGISTRY (LOCATION-docker.pkg.dev/PROJECT/REPO, gcr.io/PROJECT): Cloud Build runs there.
REGISTRY_PROJECT = $(word 2,$(subst /, ,$(REGISTRY)))

cloud-images: ## build and push the three images with Cloud Build (no Docker engine; REGISTRY=…)
	@if [ -z "$(REGISTRY)" ]; then \
	  echo "make cloud-images: set REGISTRY, e.g. REGISTRY=us-central1-docker.pkg.dev/my-project/ml" >&2; \
	  exit 2; fi
	@command -v gcloud >/dev/null 2>&1 || { echo "make cloud-images: gcloud is not installed;" \
	  "install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install)" >&2; exit 2; }
	@if [ -z "$(REGISTRY_PROJECT)" ]; then \
	  echo "make cloud-images: REGISTRY=$(REGISTRY) names no project; use LOCATION-docker.pkg.dev/PROJECT/REPO" >&2; \
	  exit 2; fi
	gcloud builds submit --project=$(REGISTRY_PROJECT) --config cloudbuild.yaml \
	  --substitutions=_REGISTRY=$(REGISTRY),_VERSION=$(VERSION) .

clean: ## remove build outputs and local runs
	rm -rf compiled .tg-local build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
