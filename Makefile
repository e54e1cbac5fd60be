# Every target bootstraps its own virtualenv in .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: test test-compat demo serve lint format clean bench docs

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The whole suite with SQLite shards, then the Django tests again with the four shard
# databases on PostgreSQL and on MariaDB (each skips, or fails under
# UID_FIELDS_REQUIRE_SERVICES=1, when its server is not there).
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	UID_FIELDS_TEST_DB=postgres $(BIN)/python -m pytest tests/django $(PYTEST_ARGS)
	UID_FIELDS_TEST_DB=mysql $(BIN)/python -m pytest tests/django $(PYTEST_ARGS)

# The oldest supported pair: Django 4.2 LTS and SQLAlchemy 2.0, in a venv of their own.
COMPAT := .venv-compat
$(COMPAT)/.installed: pyproject.toml
	@test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT)/bin/python -m pip install --quiet -e '.[dev]' 'Django>=4.2,<5.0' 'SQLAlchemy>=2.0,<2.1'
	@touch $@

test-compat: $(COMPAT)/.installed
	$(COMPAT)/bin/python -m pytest -p no:cacheprovider tests/django tests/sqlalchemy $(PYTEST_ARGS)
	UID_FIELDS_TEST_DB=postgres $(COMPAT)/bin/python -m pytest -p no:cacheprovider tests/django $(PYTEST_ARGS)

# Every id scheme generated and decoded, then the example shop on four SQLite shards
# (EXAMPLE_DB=postgres or EXAMPLE_DB=mysql for server shards).
demo: $(STAMP)
	$(BIN)/python example_project/core_demo.py
	$(BIN)/python example_project/demo.py

# The shop's admin on http://127.0.0.1:8000/admin/ (make demo prints the login).
serve: $(STAMP)
	$(BIN)/python example_project/manage.py uid_fields migrate-all
	$(BIN)/python example_project/manage.py runserver 127.0.0.1:8000

# Benchmarks against the peer packages, with the servers of `make test`: prints the
# tables, writes docs/benchmarks.md and its chart. BENCH_ARGS="--only gen --no-write".
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python -m tests.benchmarks $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The documentation site in docs/_build/html; any Sphinx warning fails the build.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(COMPAT) .pytest_cache .mypy_cache .ruff_cache .hypothesis example_project/var
