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

.PHONY: help setup demo test lint typecheck unit sanity ansible-lint molecule build docs-check clean bench

help:
	@echo "make demo   - validate and render the example fleet offline (does its own setup)"
	@echo "make test   - ruff, unit tests, ansible-test sanity, ansible-lint, molecule (does its own setup)"

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
	$(BIN)/ruff check plugins roles tests benchmarks
	$(BIN)/ruff format --check plugins roles tests benchmarks
	$(BIN)/yamllint -s .

# plugins/module_utils is the typed core: it must stay mypy-clean (configuration in pyproject.toml).
typecheck: setup
	cd $(VENV)/collections && $(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
		-p ansible_collections.gpufleet.serving.plugins.module_utils

unit: setup
	$(BIN)/python -m pytest -n 2 tests/unit

sanity: setup
	scripts/ansible-test-sanity.sh

ansible-lint: setup
	$(BIN)/ansible-lint

molecule: setup
	scripts/molecule-all.sh

build: setup
	scripts/build-check.sh

test: lint typecheck unit sanity ansible-lint build molecule
	@echo "make test: all checks passed"

# -P: benchmarks/selectors.py must not shadow the standard library's selectors module.
bench: setup
	$(BIN)/python -P benchmarks/selectors.py
	$(BIN)/python -P benchmarks/placement.py
	$(BIN)/python -P benchmarks/deploy_render.py
	$(BIN)/python -P benchmarks/hydrate.py

clean:
	rm -rf $(VENV) tests/output rendered
