# Two commands for a fresh machine: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test lint typecheck pytest demo bench clean

NODE_TESTS    := tests/node/node_modules/.installed
BROWSER_TESTS := tests/browser/node_modules/.installed
WEB_DEMO_DEPS := web-demo/node_modules/.installed
WEB_DEMO      := web-demo/dist/index.html

setup: $(STAMP) $(NODE_TESTS) $(BROWSER_TESTS) $(WEB_DEMO)

$(NODE_TESTS): tests/node/package.json tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund
	@touch $@

$(BROWSER_TESTS): tests/browser/package.json tests/browser/package-lock.json
	cd tests/browser && npm ci --no-audit --no-fund
	@touch $@

$(WEB_DEMO_DEPS): web-demo/package.json web-demo/package-lock.json
	cd web-demo && npm ci --no-audit --no-fund
	@touch $@

$(WEB_DEMO): $(WEB_DEMO_DEPS) web-demo/build.mjs web-demo/index.html web-demo/styles.css $(wildcard web-demo/src/*.ts)
	cd web-demo && npm run build

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "agui-bridge needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

lint: $(STAMP) $(WEB_DEMO_DEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	cd web-demo && npm run typecheck

typecheck: $(STAMP)
	$(BIN)/mypy

# pytest exits 5 when no test ran; make treats that as a failure, as it should.
pytest: $(STAMP) $(NODE_TESTS) $(BROWSER_TESTS) $(WEB_DEMO)
	$(BIN)/pytest --cov --cov-report=term:skip-covered

test: lint typecheck pytest
	$(BIN)/python benchmarks/translate.py --smoke
	$(BIN)/python benchmarks/run_all.py --smoke

bench: $(STAMP)
	$(BIN)/python benchmarks/translate.py
	$(BIN)/python benchmarks/run_all.py

demo: $(STAMP) $(WEB_DEMO)
	$(BIN)/agui-bridge demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .coverage web-demo/dist tests/artifacts
