# Every target bootstraps its own virtualenv in .venv from pyproject.toml: the project
# with every published extra, and the tools of the PEP 735 dependency groups (pip 25.1+).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
EXTRAS := django,sqlalchemy,asyncio,redis,postgres,mysql,drf,alembic,flask
PIP_FOR_GROUPS := 'pip>=25.1'

.PHONY: test test-compat test-matrix test-sqlalchemy-only test-sdist demo serve lint typecheck-docs format clean bench docs

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade $(PIP_FOR_GROUPS)
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]' --group dev
	@touch $(STAMP)

# The whole suite with SQLite shards, then the Django tests again with the four shard
# databases on PostgreSQL and on MariaDB (each skips, or fails under
# UID_FIELDS_REQUIRE_SERVICES=1, when its server is not there).
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	UID_FIELDS_TEST_DB=postgres $(BIN)/python -m pytest tests/django $(PYTEST_ARGS)
	UID_FIELDS_TEST_DB=mysql $(BIN)/python -m pytest tests/django $(PYTEST_ARGS)

# The oldest supported pair: Django 5.2 LTS and SQLAlchemy 2.0, on Python 3.11, in a venv
# of their own (`make test` runs the newest Django 5.2 and SQLAlchemy 2.x).
COMPAT := .venv-compat
$(COMPAT)/.installed: pyproject.toml
	@test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet --upgrade $(PIP_FOR_GROUPS)
	$(COMPAT)/bin/python -m pip install --quiet -e '.[$(EXTRAS)]' --group test \
		'Django>=5.2,<5.3' 'SQLAlchemy>=2.0,<2.1'
	@touch $@

test-compat: $(COMPAT)/.installed
	$(COMPAT)/bin/python -m pytest -p no:cacheprovider tests/django tests/sqlalchemy $(PYTEST_ARGS)
	UID_FIELDS_TEST_DB=postgres $(COMPAT)/bin/python -m pytest -p no:cacheprovider tests/django $(PYTEST_ARGS)

# The Django 6 cells, each in a venv of its own against PostgreSQL shards: Python 3.12 with
# Django 6.0, and Python 3.13 with Django 6.1 and SQLAlchemy 2.1. A reduced suite per cell
# (the Django tests on PostgreSQL shards, the SQLAlchemy tests on PostgreSQL); `make test`
# runs everything on the default cell. The interpreters come from pyenv when it has them.
PYTHON312 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) python3.12)
PYTHON313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) python3.13)
DJ60 := .venv-django60
DJ61 := .venv-django61
$(DJ60)/.installed: pyproject.toml
	@test -x $(DJ60)/bin/python || $(PYTHON312) -m venv $(DJ60)
	$(DJ60)/bin/python -m pip install --quiet --upgrade $(PIP_FOR_GROUPS)
	$(DJ60)/bin/python -m pip install --quiet -e '.[$(EXTRAS)]' --group test 'Django>=6.0,<6.1'
	@touch $@
$(DJ61)/.installed: pyproject.toml
	@test -x $(DJ61)/bin/python || $(PYTHON313) -m venv $(DJ61)
	$(DJ61)/bin/python -m pip install --quiet --upgrade $(PIP_FOR_GROUPS)
	$(DJ61)/bin/python -m pip install --quiet -e '.[$(EXTRAS)]' --group test \
		'Django>=6.1,<6.2' 'SQLAlchemy>=2.1,<2.2'
	@touch $@

test-matrix: $(DJ60)/.installed $(DJ61)/.installed
	for venv in $(DJ60) $(DJ61); do \
		$$venv/bin/python -c "import sys, django, sqlalchemy; print(sys.version.split()[0], \
			'Django', django.__version__, 'SQLAlchemy', sqlalchemy.__version__)" && \
		UID_FIELDS_TEST_DB=postgres $$venv/bin/python -m pytest -p no:cacheprovider tests/django \
			$(PYTEST_ARGS) && \
		$$venv/bin/python -m pytest -p no:cacheprovider tests/sqlalchemy -k postgresql \
			$(PYTEST_ARGS) || exit 1; \
	done

# `pip install 'uid-fields[sqlalchemy]'` alone (no Django, no greenlet, newest SQLAlchemy
# 2.x): the sync SQLAlchemy tests and the core tests on SQLite shards. Left out here: the
# server backends and the modules that need another extra or group (asyncio, alembic,
# redis, PostgreSQL-made ids, the benchmark tools); `make test` runs them all.
SQLA := .venv-sqla
SQLA_IGNORE := tests/sqlalchemy/test_asyncio.py tests/sqlalchemy/test_async_fan_out.py \
	tests/sqlalchemy/test_alembic.py \
	tests/sqlalchemy/test_database_ids.py tests/core/test_redis_lease.py \
	tests/core/test_redis_sequence.py tests/core/test_database_lease.py \
	tests/core/test_lease_recovery.py tests/core/test_logging.py \
	tests/core/test_benchmark_smoke.py tests/core/test_postgres_function.py \
	tests/core/test_mysql_decimal.py tests/sqlalchemy/test_decimal_ids.py \
	tests/core/test_twophase.py tests/sqlalchemy/test_two_phase.py \
	tests/sqlalchemy/test_alembic_shards.py tests/sqlalchemy/test_replicas_streaming.py \
	tests/core/test_postgres_c_function.py tests/sqlalchemy/test_database_ids_c.py \
	tests/core/test_pg_extension.py \
	tests/sqlalchemy/test_fan_out_faults.py tests/sqlalchemy/test_fan_out_connections.py \
	tests/sqlalchemy/test_fan_out_objects_bound.py tests/sqlalchemy/test_fan_out_session_hooks.py \
	tests/sqlalchemy/test_flask.py tests/sqlalchemy/test_alembic_data.py \
	tests/sqlalchemy/test_follower_get.py tests/core/test_lazy_leases.py \
	tests/core/test_pg_extension_privileges.py
$(SQLA)/.installed: pyproject.toml
	@test -x $(SQLA)/bin/python || $(PYTHON) -m venv $(SQLA)
	$(SQLA)/bin/python -m pip install --quiet --upgrade pip
	$(SQLA)/bin/python -m pip install --quiet -e '.[sqlalchemy]' 'pytest>=8' 'hypothesis>=6.100'
	@touch $@

test-sqlalchemy-only: $(SQLA)/.installed
	@$(SQLA)/bin/python -c "import importlib.util as u, sys; \
		extra = [m for m in ('django', 'greenlet', 'rest_framework') if u.find_spec(m)]; \
		sys.exit(f'$(SQLA) must not have {extra}' if extra else None)"
	UID_FIELDS_REQUIRE_SERVICES=1 $(SQLA)/bin/python -m pytest -p no:cacheprovider \
		-W 'ignore:Unknown config option:pytest.PytestConfigWarning' \
		tests/sqlalchemy tests/core $(SQLA_IGNORE:%=--ignore=%) \
		-k 'not postgresql and not mariadb and not mysql' $(PYTEST_ARGS)

# The sdist as published: built (in an isolated environment, as pip builds it), unpacked
# in a temporary directory, and a reduced suite run from there with the unpacked package
# first on the path: the core tests, the docs pages' tests and the example project's
# demos (what reads docs/, example_project/ and postgres/). About a minute.
SDIST_DIR := .sdist-test
BUILD ?= $(BIN)/python -m build
test-sdist: $(STAMP)
	rm -rf $(SDIST_DIR) && mkdir -p $(SDIST_DIR)
	$(BUILD) --sdist --outdir $(SDIST_DIR) .
	tar -xzf $(SDIST_DIR)/uid_fields-*.tar.gz -C $(SDIST_DIR)
	cd $(SDIST_DIR)/uid_fields-*/ && \
		PYTHONPATH=. $(abspath $(BIN))/python -c "import uid_fields, pathlib, sys; \
			sys.exit(None if pathlib.Path(uid_fields.__file__).is_relative_to(pathlib.Path.cwd()) \
			else f'not the unpacked sdist: {uid_fields.__file__}')" && \
		PYTHONPATH=. $(abspath $(BIN))/python -m pytest -p no:cacheprovider \
			tests/core tests/docs tests/test_example_demo.py $(PYTEST_ARGS)
	rm -rf $(SDIST_DIR)

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
	$(BIN)/python -m pip install --quiet --group bench
	$(BIN)/python -m tests.benchmarks $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(MAKE) typecheck-docs

# The public API type-checks in user code: mypy --strict and pyright over the docs'
# Python blocks (those not fenced `python fragment`) and tests/typecheck's typed
# examples, whose assert_type calls both checkers verify (tests/typecheck/run.py).
typecheck-docs: $(STAMP)
	$(BIN)/python -m tests.typecheck.run

# The documentation site in docs/_build/html; any Sphinx warning fails the build.
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) $(COMPAT) $(DJ60) $(DJ61) $(SQLA) .sdist-test .pytest_cache .mypy_cache .ruff_cache .hypothesis example_project/var
