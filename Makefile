# Every target bootstraps its own virtualenv in .venv from pyproject.toml: the project
# with every published extra, and the tools of the PEP 735 dependency groups (pip 25.1+).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
EXTRAS := django,sqlalchemy,asyncio,redis,postgres,mysql,drf,alembic,flask
PIP_FOR_GROUPS := 'pip>=25.1'

.PHONY: test test-sqlite test-postgres test-mariadb test-compat test-matrix test-sqlalchemy-only test-sdist venvs demo serve lint typecheck-docs format clean bench docs

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade $(PIP_FOR_GROUPS)
	$(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]' --group dev
	@touch $(STAMP)

# Targets select tests by marker (pyproject.toml lists them, tests/conftest.py puts most
# on): postgres, mariadb, stress, browser, bench, sdist, versions. Each test runs once per
# backend it is about: the whole suite with the Django tests on SQLite shards (the core
# and SQLAlchemy tests are parametrized over SQLite, PostgreSQL and MariaDB themselves),
# then the Django tests that use the database with the four shard databases on PostgreSQL
# and on MariaDB (each skips, or fails under UID_FIELDS_REQUIRE_SERVICES=1, when its
# server is not there).
# The three are targets of their own so that `make -j2` (.ci/run) can run them beside
# other stages; a namespace given in UID_FIELDS_TEST_NAMESPACE gets a suffix per target
# so that two of them never share a database (without one, each run takes its own).
test: test-sqlite test-postgres test-mariadb
NAMESPACE_FOR = $(if $(UID_FIELDS_TEST_NAMESPACE),UID_FIELDS_TEST_NAMESPACE=$(UID_FIELDS_TEST_NAMESPACE)$(1))
test-sqlite: $(STAMP)
	$(call NAMESPACE_FOR,s) $(BIN)/python -m pytest $(PYTEST_ARGS)
test-postgres: $(STAMP)
	$(call NAMESPACE_FOR,p) UID_FIELDS_TEST_DB=postgres $(BIN)/python -m pytest tests/django \
		-m postgres $(PYTEST_ARGS)
test-mariadb: $(STAMP)
	$(call NAMESPACE_FOR,m) UID_FIELDS_TEST_DB=mysql $(BIN)/python -m pytest tests/django \
		-m mariadb $(PYTEST_ARGS)

# The oldest supported pair: Django 5.2 LTS and SQLAlchemy 2.0, on Python 3.11, in a venv
# of their own. `make test` runs the newest Django 5.2 and SQLAlchemy 2.x, so what differs
# here is SQLAlchemy's minor: the SQLAlchemy tests marked `versions` (what goes through
# the adapter's compat paths), on every backend; stress tests run once, in `make test`.
COMPAT := .venv-compat
$(COMPAT)/.installed: pyproject.toml
	@test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/python -m pip install --quiet --upgrade $(PIP_FOR_GROUPS)
	$(COMPAT)/bin/python -m pip install --quiet -e '.[$(EXTRAS)]' --group test \
		'Django>=5.2,<5.3' 'SQLAlchemy>=2.0,<2.1'
	@touch $@

VERSIONS := -m 'versions and not stress'
test-compat: $(COMPAT)/.installed
	$(call NAMESPACE_FOR,c) $(COMPAT)/bin/python -m pytest -p no:cacheprovider tests/sqlalchemy \
		$(VERSIONS) $(PYTEST_ARGS)

# The Django 6 cells, each in a venv of its own against PostgreSQL shards: Python 3.12 with
# Django 6.0, and Python 3.13 with Django 6.1 and SQLAlchemy 2.1. What differs from the
# default cell is Django's release: each runs the Django tests marked `versions` (compat
# paths, admin, migrations, forms, DRF) on PostgreSQL shards; SQLAlchemy is the newest
# 2.1 here as in `make test`, which runs everything. The interpreters come from pyenv
# when it has them.
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
		$(call NAMESPACE_FOR,x) UID_FIELDS_TEST_DB=postgres $$venv/bin/python -m pytest \
			-p no:cacheprovider tests/django \
			$(VERSIONS) $(PYTEST_ARGS) || exit 1; \
	done

# `pip install 'uid-fields[sqlalchemy]'` alone (no Django, no greenlet, newest SQLAlchemy
# 2.x): the sync SQLAlchemy tests on SQLite shards, and the core's test of what each extra
# brings (the core itself imports no ORM, and `make test` runs it). A test that imports a
# package this install leaves out (asyncio, alembic, redis, psycopg) is skipped naming it
# (UID_FIELDS_TEST_PARTIAL_INSTALL=1, see tests/conftest.py); the server backends and
# stress tests are deselected by marker. `make test` runs them all.
SQLA := .venv-sqla
$(SQLA)/.installed: pyproject.toml
	@test -x $(SQLA)/bin/python || $(PYTHON) -m venv $(SQLA)
	$(SQLA)/bin/python -m pip install --quiet --upgrade pip
	$(SQLA)/bin/python -m pip install --quiet -e '.[sqlalchemy]' 'pytest>=8' 'hypothesis>=6.100'
	@touch $@

test-sqlalchemy-only: $(SQLA)/.installed
	@$(SQLA)/bin/python -c "import importlib.util as u, sys; \
		extra = [m for m in ('django', 'greenlet', 'rest_framework') if u.find_spec(m)]; \
		sys.exit(f'$(SQLA) must not have {extra}' if extra else None)"
	$(call NAMESPACE_FOR,a) UID_FIELDS_REQUIRE_SERVICES=1 UID_FIELDS_TEST_PARTIAL_INSTALL=1 \
		$(SQLA)/bin/python -m pytest \
		-p no:cacheprovider -W 'ignore:Unknown config option:pytest.PytestConfigWarning' \
		tests/sqlalchemy tests/core/test_extras.py -m 'not postgres and not mariadb and not stress' \
		$(PYTEST_ARGS)

# The virtualenvs of the stages above, built ahead (.ci/run builds them beside `make test`).
venvs: $(COMPAT)/.installed $(DJ60)/.installed $(DJ61)/.installed $(SQLA)/.installed

# The sdist as published: built (in an isolated environment, as pip builds it), unpacked
# in a temporary directory, and the tests marked `sdist` run from there with the unpacked
# package first on the path: what reads the files the sdist must ship (docs/,
# example_project/, postgres/, the package's every module, the metadata). Under a minute.
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
		$(call NAMESPACE_FOR,d) PYTHONPATH=. $(abspath $(BIN))/python -m pytest -p no:cacheprovider \
			-m sdist $(PYTEST_ARGS)
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
