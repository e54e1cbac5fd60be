"""A migration operation that installs the PostgreSQL ``next_id`` function per shard.

Each shard database gets the function with the first logical shard it holds, so ids
made there route back to it. It is idempotent (``CREATE OR REPLACE``, the state
sequence ``IF NOT EXISTS``, never reset) and reversible.
"""

from __future__ import annotations

from typing import Any

from django.db.migrations.operations.base import Operation

from ..generators import ShardedIdGenerator
from ..layouts import SnowflakeLayout
from ..placement import stamped_logical_shard
from ..sql import NextIdFunction
from .conf import get_generator, get_shard_map

__all__ = ["InstallNextId"]


def next_id_function(generator: str, shards: str, alias: str, function: str) -> NextIdFunction:
    """The function as it must be on ``alias`` for the current settings."""
    gen = get_generator(generator)
    if not isinstance(gen, ShardedIdGenerator) or not isinstance(gen.layout, SnowflakeLayout):
        raise ValueError(f"generator {generator!r} is not a sharded generator")
    shard_map = get_shard_map(shards, generator)
    low = stamped_logical_shard(shard_map, alias)
    return NextIdFunction(gen.layout, shard=low, name=function, shard_field=gen.shard_field)


class InstallNextId(Operation):
    """``InstallNextId(generator="photos", shards="main")`` in a migration."""

    reversible = True
    reduces_to_sql = True

    def __init__(self, generator: str, shards: str, function: str = "uid_next_id") -> None:
        self.generator = generator
        self.shards = shards
        self.function = function

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        kwargs = {"generator": self.generator, "shards": self.shards}
        if self.function != "uid_next_id":
            kwargs["function"] = self.function
        return "uid_fields.django.operations.InstallNextId", [], kwargs

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass

    def _applies(self, schema_editor: Any) -> bool:
        connection = schema_editor.connection
        if connection.vendor != "postgresql":
            return False
        return connection.alias in get_shard_map(self.shards, self.generator).databases

    def _run(self, schema_editor: Any, forwards: bool) -> None:
        if not self._applies(schema_editor):
            return
        function = next_id_function(
            self.generator, self.shards, schema_editor.connection.alias, self.function
        )
        statements = function.create_statements() if forwards else function.drop_statements()
        for statement in statements:
            schema_editor.execute(statement, params=None)

    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        self._run(schema_editor, forwards=True)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        self._run(schema_editor, forwards=False)

    def describe(self) -> str:
        return (
            f"Install {self.function}() for generator {self.generator!r} on shards {self.shards!r}"
        )

    @property
    def migration_name_fragment(self) -> str:
        return f"install_{self.function}"
