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

.PHONY: demo demo-down test lint unit integration format venv control-plane bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -m venv --help >/dev/null 2>&1 || ($(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq python3-venv)
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

control-plane: $(STAMP)
	$(BIN)/podgroup-operator dev-cluster build

lint: $(STAMP)
	$(BIN)/ruff check operator tests examples
	$(BIN)/ruff format --check operator tests examples
	$(BIN)/mypy
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff check --fix operator tests examples
	$(BIN)/ruff format operator tests examples

unit: $(STAMP)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

test: $(STAMP) control-plane lint
	$(BIN)/pytest $(PYTEST_ARGS)

demo: $(STAMP) control-plane
	@bash examples/demo.sh "$(DEMO_STATE)"

demo-down: $(STAMP)
	@bash examples/demo.sh "$(DEMO_STATE)" down

bench: $(STAMP)
	$(BIN)/podgroup-operator bench core --nodes 5000 --gangs 1000 --gang-size 3
	$(BIN)/podgroup-operator bench core --nodes 5000 --gangs 1 --gang-size 1000

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
