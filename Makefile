# Two commands for a fresh machine: `make demo` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup test lint typecheck pytest coverage demo bench clean copilotkit-demo llama-server live-bed \
	record-llamacpp

NODE_TESTS    := tests/node/node_modules/.installed
BROWSER_TESTS := tests/browser/node_modules/.installed
WEB_DEMO_DEPS := web-demo/node_modules/.installed
WEB_DEMO      := bridge/web/index.html
COPILOTKIT_DEPS := examples/copilotkit/node_modules/.installed
COPILOTKIT_APP  := examples/copilotkit/dist/index.html

setup: $(STAMP) $(NODE_TESTS) $(BROWSER_TESTS) $(WEB_DEMO) $(COPILOTKIT_APP)

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

$(COPILOTKIT_DEPS): examples/copilotkit/package.json examples/copilotkit/package-lock.json
	cd examples/copilotkit && npm ci --no-audit --no-fund
	@touch $@

$(COPILOTKIT_APP): $(COPILOTKIT_DEPS) examples/copilotkit/build.mjs examples/copilotkit/index.html $(wildcard examples/copilotkit/src/*)
	cd examples/copilotkit && npm run build

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "agui-bridge needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

lint: $(STAMP) $(WEB_DEMO_DEPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports  # the layers (cli → serve → config → core), serve's rooms and their files, no circles; the core does no I/O
	cd web-demo && npm run typecheck

typecheck: $(STAMP)
	$(BIN)/mypy

# The live tests (tests/live/) run a real llama-server with a real model, built once per machine
# into a cache outside the tree (tests/llama_server.py; README "Live tests"). LIVE=0 skips them
# for a quick local loop (refused under $$CI).
LIVE ?= 1
ifeq ($(LIVE),0)
LIVE_BED :=
export AGUI_BRIDGE_LIVE := 0
else
LIVE_BED := live-bed
endif

# The bed, built if the cache lacks it (a failure stops `make test` with the reason).
live-bed: $(STAMP)
	$(BIN)/python tests/llama_server.py build

# Build llama-server again (another AGUI_BRIDGE_LLAMACPP_VERSION, a compiler upgrade).
llama-server: $(STAMP)
	$(BIN)/python tests/llama_server.py build --force

# Record tests/fixtures/llamacpp/ again from the live server: a llama.cpp upgrade is one command
# and a diff.
record-llamacpp: $(STAMP)
	$(BIN)/python tests/live/record_fixtures.py

# pytest exits 5 when no test ran; make treats that as a failure, as it should. Coverage costs
# the suite about a sixth of its time: `make coverage` (or COV=1) measures it.
COV ?= 0
ifeq ($(COV),1)
PYTEST_COV := --cov --cov-report=term:skip-covered
endif
# The suite runs on WORKERS processes (pytest-xdist): a test file on one worker, the Chromium
# files in turn on one, the live files on one (tests/conftest.py); most tests wait on servers,
# so more workers than cores pays. WORKERS=0 runs it in this one process.
WORKERS ?= 3
ifeq ($(WORKERS),0)
PYTEST_WORKERS :=
else
PYTEST_WORKERS := -n $(WORKERS) --dist loadfile
endif
pytest: $(STAMP) $(NODE_TESTS) $(BROWSER_TESTS) $(WEB_DEMO) $(COPILOTKIT_APP) $(LIVE_BED)
	$(BIN)/pytest $(PYTEST_WORKERS) $(PYTEST_COV)

coverage:
	$(MAKE) pytest COV=1

# Benchmarks outside run_all.py: hostile input (issues 22, 40 and 41), observability's cost (issue 24),
# fairness beside a firehose (issue 25).
SOLO_BENCHMARKS := redaction transcript_fold tool_result_stall tool_image_stall big_body_stall state_patch_stall \
	firehose observability fairness health_blocked_store hostile_upstream attachment_stall thread_stores \
	threads_cpu idle_streams hydrate_stall

# Every benchmark's smoke run, SMOKE_JOBS at once (benchmarks/smoke.py: each its own ports).
SMOKE_JOBS ?= 3
test: lint typecheck pytest
	$(BIN)/python benchmarks/smoke.py --jobs $(SMOKE_JOBS) run_all translate $(SOLO_BENCHMARKS)

bench: $(STAMP)
	$(BIN)/python benchmarks/translate.py
	$(BIN)/python benchmarks/run_all.py
	for name in $(SOLO_BENCHMARKS); do $(BIN)/python benchmarks/$$name.py || exit 1; done

demo: $(STAMP) $(WEB_DEMO)
	$(BIN)/agui-bridge demo

# The CopilotKit example (examples/copilotkit/) against `agui-bridge demo`, which lets its page in
# for the direct wiring: open http://127.0.0.1:3000/?wiring=runtime or ?wiring=direct.
COPILOTKIT_PORT ?= 3000
BRIDGE_PORT     ?= 8000
copilotkit-demo: $(STAMP) $(COPILOTKIT_APP)
	$(BIN)/agui-bridge demo --port $(BRIDGE_PORT) --cors-origin http://127.0.0.1:$(COPILOTKIT_PORT) \
		--mcp app="python examples/mcp_app_server.py" & \
	bridge=$$!; trap 'kill $$bridge 2>/dev/null' EXIT INT TERM; \
	cd examples/copilotkit && AGUI_BRIDGE_URL=http://127.0.0.1:$(BRIDGE_PORT)/agent PORT=$(COPILOTKIT_PORT) npm start

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .coverage bridge/web tests/artifacts dist
