# memoir: `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements.lock
RUN_DIR ?= .memoir
HOST ?= 127.0.0.1
PORT ?= 8765

.DEFAULT_GOAL := help
.PHONY: help install lock store run serve test test-fast check format lint typecheck imports bench bench-quick clean browser

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  \033[1m%-12s\033[0m %s\n", $$1, $$2}'

# The versions CI tested: requirements.lock pins every dependency; memoir itself goes on top.
$(STAMP): pyproject.toml $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

install: $(STAMP) ## Create .venv and install memoir with the locked dependencies and dev tools

lock: ## Re-resolve requirements.lock from pyproject.toml (after changing a dependency)
	@test -x $(BIN)/uv || $(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra postgres --extra mysql \
		--python-version 3.11 --python-platform x86_64-manylinux_2_28 --quiet -o $(LOCK)

# One store for every entry point: `store` writes this folder's memoir.toml pointing at
# .memoir/memoir.db, so `make run`, the CLI run here and the mcp.json server (`memoir serve`
# started here) all open the same file, and the same project scope (this git root).
store: install ## Create the project's store (memoir.toml -> .memoir/memoir.db) and load sample_rules/
	@mkdir -p $(RUN_DIR)
	$(BIN)/memoir --db sqlite:///$(CURDIR)/$(RUN_DIR)/memoir.db init .
	$(BIN)/memoir rules upsert sample_rules

run: store ## `store`, then serve MCP over streamable HTTP (PORT=8765 HOST=127.0.0.1 to change)
	$(BIN)/memoir serve --transport http --host $(HOST) --port $(PORT) --print-config

serve: run ## Alias of run

# The memory web page's browser test drives the system Chromium through chromedriver (selenium,
# in the dev extra); it is skipped, saying so, when they are missing. Needs root (or sudo).
browser: ## Install Chromium and chromedriver from the distribution's packages (for the browser test)
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "chromium and chromedriver are installed"; \
	else \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

test: install ## Run the test suite
	$(BIN)/pytest

test-fast: install ## Tests without the slow, PostgreSQL and MySQL ones
	$(BIN)/pytest -m "not slow and not postgres and not mysql"

format: install ## Format the code
	$(BIN)/ruff format server memory_core rules_parser tests bench
	$(BIN)/ruff check --fix server memory_core rules_parser tests bench

lint: install ## Format check and lint
	$(BIN)/ruff format --check server memory_core rules_parser tests bench
	$(BIN)/ruff check server memory_core rules_parser tests bench

typecheck: install ## Type check the three packages
	$(BIN)/mypy

imports: install ## Check the import contracts (package layers, core layers, backends)
	$(BIN)/lint-imports

check: lint typecheck imports test ## Everything CI should be happy with

bench: install ## Run every benchmark (prints ratios and absolutes)
	@for b in bench/bench_*.py; do echo "=== $$b"; $(BIN)/python $$b || exit 1; done

bench-quick: install ## Every benchmark in its quick mode
	@for b in bench/bench_*.py; do echo "=== $$b"; $(BIN)/python $$b --quick || exit 1; done

clean: ## Remove the virtualenv, caches and the local store (and the memoir.toml `store` wrote)
	rm -rf $(VENV) $(RUN_DIR) memoir.toml .pytest_cache .ruff_cache .mypy_cache .hypothesis build *.egg-info
