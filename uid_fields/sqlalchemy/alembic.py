"""Alembic support: uid types in autogenerate, ``next_id`` per shard, every shard upgraded.

- ``render_item``: without it Alembic writes ``uid_fields.sqlalchemy.types.SnowflakeType()``
  but no import for it. Use ``context.configure(..., render_item=render_item)`` in env.py.
  The rendered types carry no layout (migrations only need the DDL type).
- ``op.install_next_id(ids)`` / ``op.uninstall_next_id(ids)``: operations (registered when
  this module is imported) that install a ``DatabaseIds`` function on the database being
  migrated, stamping that database's own logical shard, as ``create_all`` does through
  ``DatabaseIds.attach``. Without them ``alembic upgrade`` of a table whose id defaults to
  ``uid_next_id()`` fails: the function does not exist.
- ``run_migrations_on_shards(context, engines, ...)``: the env.py body that runs the
  migrations on every shard database in turn, each knowing which shard it is. Data
  migrations run under the write guard (``check_writes``), and a Core insert without an
  id gets an id of the shard it runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from .._internal.extras import missing

try:
    import alembic  # noqa: F401
except ModuleNotFoundError as exc:  # name the extra, not just the module
    raise missing("alembic", exc) from exc

from alembic.operations import MigrateOperation, Operations
from sqlalchemy.engine import Engine

from ..placement import ShardMap, stamped_logical_shard
from .ddl import DatabaseIds
from .fields import ROUTER_OPTION
from .fields import SHARD_OPTION as SHARD_EXECUTION_OPTION
from .guard import check_writes, guard_router
from .types import LocalityUUIDType, SnowflakeType

__all__ = ["render_item", "run_migrations_on_shards"]

#: Migration-context options that ``run_migrations_on_shards`` sets for each shard.
SHARD_OPTION = "uid_fields_shard"
SHARD_MAP_OPTION = "uid_fields_shard_map"
SHARDS_OPTION = "uid_fields_shards"


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    if type_ == "type" and isinstance(obj, (SnowflakeType, LocalityUUIDType)):
        autogen_context.imports.add("import uid_fields.sqlalchemy.types")
        return f"uid_fields.sqlalchemy.types.{obj!r}"
    return False


def run_migrations_on_shards(
    context: Any,
    engines: Mapping[str, Engine],
    *,
    shard_map: ShardMap | None = None,
    **configure: Any,
) -> None:
    """Run the migrations on each shard engine in turn (call it from env.py online mode).

    ``context`` is ``alembic.context``; ``engines`` maps shard names to engines, in the
    order the session uses; ``shard_map`` is the one the session routes by (the one whose
    ranges decide which logical shard each database's ``next_id`` stamps; without it
    the logical shards of each layout are spread evenly over ``engines`` in order).
    Other arguments go to ``context.configure`` (``target_metadata=...``); ``render_item``
    is this module's unless given. Each database keeps its own ``alembic_version``.

    Data migrations write through these engines outside any session, so each engine
    gets the write guard a sharded session installs (``check_writes``, with the same
    names and map): an INSERT of a row whose id (or key) names another shard, and an
    UPDATE moving an id or a key off the shard, raise ``WrongShardError``. Each shard's
    connection also tells the id columns which shard it writes: an ``insert(Account)``
    without an id gets an id of THAT shard (its column default would make one for any
    shard, most of them elsewhere), and a row with a shard key an id from its key.
    """
    configure.setdefault("render_item", render_item)
    check_writes(engines, shard_map=shard_map)
    for name, engine in engines.items():
        with engine.connect() as connection:
            connection.execution_options(
                **{SHARD_EXECUTION_OPTION: name, ROUTER_OPTION: guard_router(engine)}
            )
            where = {SHARD_OPTION: name, SHARD_MAP_OPTION: shard_map, SHARDS_OPTION: list(engines)}
            context.configure(connection=connection, **where, **configure)
            with context.begin_transaction():
                context.run_migrations()


def _logical_shard(operations: Operations, ids: DatabaseIds) -> int:
    opts = operations.migration_context.opts
    name = opts.get(SHARD_OPTION)
    if name is None:
        raise ValueError(
            f"op.install_next_id({ids.name}) needs the shard it runs on: migrate with "
            "uid_fields.sqlalchemy.alembic.run_migrations_on_shards() in env.py, or pass "
            "shard=<logical shard> to the operation"
        )
    shard_map = opts.get(SHARD_MAP_OPTION) or ids.shard_map(opts[SHARDS_OPTION])
    return stamped_logical_shard(shard_map, name)


@Operations.register_operation("install_next_id")
class InstallNextIdOp(MigrateOperation):
    """``op.install_next_id(ids, shard=None)``: create (or replace) the ``next_id``
    function of ``ids`` on this database; its state survives re-runs."""

    def __init__(self, ids: DatabaseIds, shard: int | None = None) -> None:
        self.ids = ids
        self.shard = shard

    @classmethod
    def install_next_id(
        cls, operations: Operations, ids: DatabaseIds, shard: int | None = None
    ) -> None:
        operations.invoke(cls(ids, shard))

    def reverse(self) -> UninstallNextIdOp:
        return UninstallNextIdOp(self.ids)


@Operations.register_operation("uninstall_next_id")
class UninstallNextIdOp(MigrateOperation):
    """``op.uninstall_next_id(ids)``: drop the function and its state sequence."""

    def __init__(self, ids: DatabaseIds) -> None:
        self.ids = ids

    @classmethod
    def uninstall_next_id(cls, operations: Operations, ids: DatabaseIds) -> None:
        operations.invoke(cls(ids))

    def reverse(self) -> InstallNextIdOp:
        return InstallNextIdOp(self.ids)


@Operations.implementation_for(InstallNextIdOp)
def _install(operations: Operations, operation: InstallNextIdOp) -> None:
    shard = operation.shard
    if shard is None:
        shard = _logical_shard(operations, operation.ids)
    operation.ids.install(operations.get_bind(), shard)


@Operations.implementation_for(UninstallNextIdOp)
def _uninstall(operations: Operations, operation: UninstallNextIdOp) -> None:
    operation.ids.uninstall(operations.get_bind())
