# The two commands a newcomer runs: `make demo` and `make test`. Both create .venv/ and install
# what they need (apt as root or through sudo, pip into the venv) on a fresh Debian machine.
# The control plane is built once from Debian's kubernetes source and cached in
# ~/.cache/podgroup-operator/ (outside the repo), so later runs start in seconds.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STATE ?= $(HOME)/.cache/podgroup-operator/demo
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=

.PHONY: help demo demo-down test lint unit integration format venv control-plane bench clean
.DEFAULT_GOAL := help

help: ## this list: every target with what it does
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3-venv)
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP) ## create .venv/ and install the package with its dev tools

control-plane: $(STAMP) ## build the dev control plane and kube-scheduler once into ~/.cache/podgroup-operator/
	$(BIN)/podgroup-operator dev-cluster build --with-scheduler

lint: $(STAMP) ## ruff check, ruff format --check, mypy and the import-linter contracts
	$(BIN)/ruff check operator tests examples
	$(BIN)/ruff format --check operator tests examples
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP) ## apply ruff's fixes and formatting
	$(BIN)/ruff check --fix operator tests examples
	$(BIN)/ruff format operator tests examples

unit: $(STAMP) ## the pure tests (tests/unit): no cluster, 2 s per test at most
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

integration: $(STAMP) control-plane ## the tests on a real control plane (tests/integration, tests/e2e)
	$(BIN)/pytest tests/integration tests/e2e $(PYTEST_ARGS)

test: $(STAMP) control-plane lint ## everything: lint, unit, integration and e2e tests
	$(BIN)/pytest $(PYTEST_ARGS)

demo: $(STAMP) control-plane ## a local control plane, sim nodes, the operator and a gang reaching Running
	@bash examples/demo.sh "$(DEMO_STATE)"

demo-down: $(STAMP) ## stop what `make demo` started
	@bash examples/demo.sh "$(DEMO_STATE)" down

bench: $(STAMP) ## the scheduler's core benchmark (5,000 nodes; in memory, no cluster)
	$(BIN)/podgroup-operator bench core --nodes 5000 --gangs 1000 --gang-size 3
	$(BIN)/podgroup-operator bench core --nodes 5000 --gangs 1 --gang-size 1000

clean: ## remove .venv/ and the tools' caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
