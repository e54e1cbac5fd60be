"""Migration operations that install id functions on each shard database.

``InstallNextId``: PostgreSQL's ``next_id``, each shard stamping the first logical shard
it holds, idempotent (``CREATE OR REPLACE``, the state sequence ``IF NOT EXISTS``, never
reset). ``InstallDecimalId``: decimal ids made by MySQL/MariaDB, each database stamping
the first server digit it owns. Both reversible, and both route ids back to the database
that made them.
"""

from __future__ import annotations

from typing import Any

from django.db.migrations.operations.base import Operation

from ..config import layout_of, static_node
from ..ids.generators import ShardedIdGenerator
from ..ids.layouts import DecimalLayout, SnowflakeLayout
from ..placement import stamped_logical_shard
from ..sql import DecimalIdFunction, NextIdFunction, installs
from ..sql.postgres import DEFAULT_MAX_AHEAD_MS
from .conf import conf, get_generator, get_shard_map

__all__ = ["InstallDecimalId", "InstallNextId", "decimal_id_function", "next_id_function"]


def next_id_function(generator: str, shards: str, alias: str, function: str) -> NextIdFunction:
    """The function as it must be on ``alias`` for the current settings."""
    gen = get_generator(generator)
    if not isinstance(gen, ShardedIdGenerator) or not isinstance(gen.layout, SnowflakeLayout):
        raise ValueError(f"generator {generator!r} is not a sharded generator")
    shard_map = get_shard_map(shards, generator)
    low = None if alias in shard_map.incoming else stamped_logical_shard(shard_map, alias)
    entry = conf.GENERATORS[generator]
    return NextIdFunction(
        gen.layout,
        shard=low,
        name=function,
        shard_field=gen.shard_field,
        max_ahead_ms=entry.get("max_ahead_ms", DEFAULT_MAX_AHEAD_MS),
        language=entry.get("next_id_language", "plpgsql"),
    )


class _InstallFunction(Operation):
    """Install (or, backwards, drop) an id function on the shard databases of a map."""

    reversible = True
    reduces_to_sql = True
    vendor = ""
    default_function = ""

    def __init__(self, generator: str, shards: str | None = None, function: str = "") -> None:
        self.generator = generator
        self.shards = shards
        self.function = function or self.default_function

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs: dict[str, Any] = {"generator": self.generator}
        if self.shards is not None:
            kwargs["shards"] = self.shards
        if self.function != self.default_function:
            kwargs["function"] = self.function
        return f"uid_fields.django.operations.{type(self).__name__}", [], kwargs

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass

    def _applies(self, schema_editor: Any) -> bool:
        connection = schema_editor.connection
        if connection.vendor != self.vendor:
            return False
        if self.shards is None:
            return True
        return connection.alias in self._databases()

    def _databases(self) -> tuple[str, ...]:
        assert self.shards is not None
        return get_shard_map(self.shards, self.generator).databases

    def id_function(self, alias: str) -> installs.IdFunction:
        raise NotImplementedError

    def _run(self, schema_editor: Any, forwards: bool) -> None:
        if not self._applies(schema_editor):
            return
        connection = schema_editor.connection
        function = self.id_function(connection.alias)
        applied = not schema_editor.collect_sql  # not only printed (sqlmigrate)
        existed = None
        if applied and forwards:
            with connection.cursor() as cursor:
                existed = installs.was_installed(cursor, function)
        statements = function.create_statements() if forwards else function.drop_statements()
        for statement in statements:
            schema_editor.execute(statement, params=None)
        if applied and forwards:
            installs.installed(function, f"database {connection.alias!r}", existed=existed)
        elif applied:
            installs.dropped(function, f"database {connection.alias!r}")

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        self._run(schema_editor, forwards=True)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        self._run(schema_editor, forwards=False)

    def describe(self) -> str:
        where = f" on shards {self.shards!r}" if self.shards else ""
        return f"Install {self.function}() for generator {self.generator!r}{where}"

    @property
    def migration_name_fragment(self) -> str:
        return f"install_{self.function}"


class InstallNextId(_InstallFunction):
    """``InstallNextId(generator="photos", shards="main")``: PostgreSQL's ``next_id``."""

    vendor = "postgresql"
    default_function = "uid_next_id"

    def __init__(self, generator: str, shards: str, function: str = "uid_next_id") -> None:
        super().__init__(generator, shards, function)

    def _databases(self) -> tuple[str, ...]:
        """The map's databases and its incoming ones (their function makes no id yet)."""
        assert self.shards is not None
        return get_shard_map(self.shards, self.generator).migrated_databases

    def id_function(self, alias: str) -> installs.IdFunction:
        assert self.shards is not None
        return next_id_function(self.generator, self.shards, alias, self.function)


class InstallDecimalId(_InstallFunction):
    """``InstallDecimalId(generator="tickets", shards="main")``: decimal ids made by
    MySQL/MariaDB, each database stamping the first server digit it owns (or the
    generator's ``server`` without ``shards``). Read from the settings: no lease."""

    vendor = "mysql"
    default_function = "uid_decimal_id"

    def id_function(self, alias: str) -> installs.IdFunction:
        return decimal_id_function(self.generator, self.shards, alias, self.function)


def decimal_id_function(
    generator: str, shards: str | None, alias: str, function: str = "uid_decimal_id"
) -> DecimalIdFunction:
    """The decimal function as it must be on ``alias`` for the current settings."""
    entry = conf.GENERATORS.get(generator, {})
    layout = layout_of(entry) if entry.get("kind") == "decimal" else None
    if not isinstance(layout, DecimalLayout):
        raise ValueError(f"generator {generator!r} is not a decimal generator")
    if shards is not None:
        server = stamped_logical_shard(get_shard_map(shards, generator), alias)
    else:
        node = static_node(entry)
        if node is None:
            raise ValueError(
                f"generator {generator!r} takes its server digit from a lease or the "
                "environment; give shards= so each database stamps its own"
            )
        server = node.get("server", 0)
    return DecimalIdFunction(layout, server=server, name=function)
