# Two commands are the contract: `make run` serves the site with demo data; `make test` runs every
# suite. Both install what is missing on a fresh Debian machine (as root) and work twice in a row.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
RUNTIME_APT := redis-server
TEST_APT := redis-server chromium postgresql nginx

.PHONY: run test setup setup-test apt-runtime apt-test lint bench bench-web clean

run: setup
	$(PY) manage.py migrate --noinput
	$(PY) manage.py seed_demo
	$(PY) manage.py collectstatic --noinput -v0
	PORT=$(PORT) PY=$(PY) bash site/run-local.sh

# Lint first: a complexity or type error fails the run before the suites start.
test: setup-test lint
	PY=$(PY) bash tests/run-suites.sh

setup: apt-runtime $(VENV)/.requirements-installed

setup-test: apt-test $(VENV)/.dev-requirements-installed

apt-runtime:
	@PACKAGES="$(RUNTIME_APT)" bash site/apt-install.sh

apt-test:
	@PACKAGES="$(TEST_APT)" bash site/apt-install.sh

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip

# The project itself, editable and without dependencies: it installs the client's `kbl` command.
$(VENV)/.requirements-installed: requirements.txt constraints.txt pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -q -r requirements.txt -c constraints.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	touch $@

$(VENV)/.dev-requirements-installed: requirements.txt requirements-dev.txt constraints.txt pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/pip install -q -r requirements-dev.txt -c constraints.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	touch $(VENV)/.requirements-installed $@

# Needs only the virtual environment (no Debian packages, so no apt or network once the venv is
# installed): ruff and mypy read the code and the venv, nothing else. ruff format checks the layout
# (pyproject.toml says which folders it leaves for now).
lint: $(VENV)/.dev-requirements-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy evaluation

bench: setup
	$(PY) benchmarks/evaluation_selfcheck.py

# Pages at the field's size (1.3M evaluations; results in docs/performance.md): SCALE=20k (a minute) or 1.3M.
SCALE ?= 20k
bench-web: setup-test
	SCALE=$(SCALE) PY=$(PY) bash benchmarks/web/run.sh

clean:
	rm -rf $(VENV) staticfiles .pytest_cache
