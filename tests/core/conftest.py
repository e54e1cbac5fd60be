"""Fixtures of the core tests: ``db``, a fresh lease table on SQLite, PostgreSQL, MariaDB."""

from __future__ import annotations

from tests.core.lease_databases import db

__all__ = ["db"]
