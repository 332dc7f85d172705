# Two commands for a fresh machine: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test lint typecheck pytest demo bench clean

NODE_TESTS := tests/node/node_modules/.installed

setup: $(STAMP) $(NODE_TESTS)

$(NODE_TESTS): tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund
	@touch $@

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "agui-bridge needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when no test ran; make treats that as a failure, as it should.
pytest: $(STAMP) $(NODE_TESTS)
	$(BIN)/pytest --cov --cov-report=term:skip-covered

test: lint typecheck pytest
	$(BIN)/python benchmarks/translate.py --smoke

bench: $(STAMP)
	$(BIN)/python benchmarks/translate.py

demo: $(STAMP)
	$(BIN)/agui-bridge demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .coverage
