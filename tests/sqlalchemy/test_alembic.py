"""Alembic autogenerate: the rendered migration imports, runs and matches the models."""

from __future__ import annotations

import types
import uuid
from typing import Any, Literal

from alembic.autogenerate import compare_metadata, produce_migrations, render_python_code
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped

from uid_fields.sqlalchemy import (
    LocalityUUIDField,
    LocalityUUIDType,
    ShardedBigIntField,
    SnowflakeField,
    SnowflakeType,
)
from uid_fields.sqlalchemy.alembic import render_item

from .conftest import postgres_url
from .models import event_ids, order_ids, photo_ids


class MigrationBase(DeclarativeBase):
    pass


class Account(MigrationBase):
    __tablename__ = "accounts"
    id: Mapped[int] = SnowflakeField(generator=order_ids, primary_key=True)
    ref: Mapped[int] = ShardedBigIntField(generator=photo_ids, unique=True)
    token: Mapped[uuid.UUID] = LocalityUUIDField(generator=event_ids)


def _render(engine: Engine, hook: bool = False) -> str:
    """The upgrade body, preceded by the imports Alembic would put in the file."""
    imports: set[str] = {"import sqlalchemy as sa"}

    def recording_hook(type_: str, obj: object, autogen_context: Any) -> str | Literal[False]:
        rendered = render_item(type_, obj, autogen_context)
        imports.update(autogen_context.imports)
        return rendered

    with engine.connect() as connection:
        context = MigrationContext.configure(connection)
        operations = produce_migrations(context, MigrationBase.metadata)
    body = render_python_code(
        operations.upgrade_ops,
        render_item=recording_hook if hook else None,
        migration_context=context,
    )
    return "\n".join(sorted(imports)) + "\n" + body


def _run(engine: Engine, code: str) -> None:
    module = types.ModuleType("migration")
    imports = "\n".join(line for line in code.splitlines() if line.startswith("import "))
    body = "\n".join(f"    {line}" for line in code.splitlines() if not line.startswith("import "))
    exec(f"{imports}\ndef upgrade(op):\n{body}\n", module.__dict__)
    with engine.begin() as connection:
        module.upgrade(Operations(MigrationContext.configure(connection)))


def _check(engine: Engine) -> None:
    code = _render(engine, hook=True)
    assert "import uid_fields.sqlalchemy.types" in code
    assert "uid_fields.sqlalchemy.types.SnowflakeType()" in code
    assert "uid_fields.sqlalchemy.types.LocalityUUIDType()" in code
    assert "epoch" not in code and "1704067200000" not in code  # no layout in migrations
    assert "autoincrement=False" in code  # never BIGSERIAL / IDENTITY
    _run(engine, code)
    columns = {c["name"]: c for c in inspect(engine).get_columns("accounts")}
    assert set(columns) == {"id", "ref", "token"}
    assert "BIGINT" in str(columns["id"]["type"]).upper()
    assert columns["id"].get("default") is None  # no nextval(): a row needs its id
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, MigrationBase.metadata) == []  # nothing left to do


def test_autogenerate_on_sqlite(tmp_path: object) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/migrated.db")
    _check(engine)
    engine.dispose()


def test_autogenerate_on_postgres(postgres_databases: list[str]) -> None:
    engine = create_engine(postgres_url(postgres_databases[0]))
    MigrationBase.metadata.drop_all(engine)  # left over from an interrupted run
    try:
        _check(engine)
        uuid_type = {c["name"]: c for c in inspect(engine).get_columns("accounts")}["token"]
        assert "UUID" in str(uuid_type["type"]).upper()
    finally:
        MigrationBase.metadata.drop_all(engine)
        engine.dispose()


def test_without_the_hook_the_types_render_fully_qualified() -> None:
    code = _render(create_engine("sqlite://"))
    assert "uid_fields.sqlalchemy.types.SnowflakeType()" in code
    namespace: dict[str, object] = {}
    exec("import uid_fields.sqlalchemy.types", namespace)
    assert isinstance(eval("uid_fields.sqlalchemy.types.SnowflakeType()", namespace), SnowflakeType)
    assert isinstance(
        eval("uid_fields.sqlalchemy.types.LocalityUUIDType()", namespace), LocalityUUIDType
    )
