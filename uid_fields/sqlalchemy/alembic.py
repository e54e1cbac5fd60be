"""Alembic autogenerate support: render uid types with the import they need.

Without this hook Alembic writes ``uid_fields.sqlalchemy.types.SnowflakeType()`` but
no import for it. Use ``context.configure(..., render_item=render_item)`` in env.py.
The rendered types carry no layout (migrations only need the DDL type).
"""

from __future__ import annotations

from typing import Any, Literal

from .types import LocalityUUIDType, SnowflakeType

__all__ = ["render_item"]


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    if type_ == "type" and isinstance(obj, (SnowflakeType, LocalityUUIDType)):
        autogen_context.imports.add("import uid_fields.sqlalchemy.types")
        return f"uid_fields.sqlalchemy.types.{obj!r}"
    return False
