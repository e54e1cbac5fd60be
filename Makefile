# Every target bootstraps its own virtualenv in .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: test demo lint format clean

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

demo: $(STAMP)
	$(BIN)/python example_project/core_demo.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis example_project/var
