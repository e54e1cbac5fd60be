"""Mapper hooks: ids at construction, re-made when the shard key is set, ``*_parts``.

One listener on every mapper's construction looks for uid columns and installs, for
that class only: an ``init`` hook that assigns ids before ``__init__`` runs, a ``set``
hook on the shard key (the id carries the key's shard, so it is made when the key is
known, and made again when the key changes while the id is still the field's own, never
when the caller chose it), and a ``<attribute>_parts`` descriptor that decodes the id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Mapper
from sqlalchemy.sql.schema import Column

from ..errors import ShardKeyError
from ..placement import id_for_new_object
from .fields import INFO_KEY, FieldConfig
from .types import LocalityUUIDType, SnowflakeType, UniqIdType

__all__ = ["PartsAttribute", "made_by_field", "set_made_id", "uid_columns"]

# Key of ``InstanceState.info``: the ids uid fields made for a new object, by attribute.
_MADE = "uid_fields_made"


class PartsAttribute:
    """``obj.id_parts``: the decoded parts of ``obj.id`` (None while the id is None)."""

    def __init__(self, key: str, decompose: Callable[[Any], Any]) -> None:
        self.key = key
        self.decompose = decompose

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self.key)
        return None if value is None else self.decompose(value)

    def __repr__(self) -> str:
        return f"<PartsAttribute of {self.key!r}>"


def uid_columns(mapper: Mapper[Any]) -> list[tuple[str, Column[Any], FieldConfig]]:
    """(attribute key, column, config) of every uid field a mapper maps."""
    # mapper.columns, not column_attrs: this runs before the mappers are configured.
    found = []
    for key, column in mapper.columns.items():
        if isinstance(column, Column) and isinstance(column.info.get(INFO_KEY), FieldConfig):
            found.append((key, column, column.info[INFO_KEY]))
    return found


def _install_parts(mapper: Mapper[Any], cls: type) -> None:
    for key, column in mapper.columns.items():
        id_type = column.type
        if isinstance(id_type, SnowflakeType) and id_type.layout is not None:
            decompose: Callable[[Any], Any] = id_type.decompose
        elif isinstance(id_type, LocalityUUIDType) or (
            isinstance(id_type, UniqIdType) and id_type.total_shards is not None
        ):
            decompose = id_type.decompose
        else:
            continue
        name = f"{key}_parts"
        existing = getattr(cls, name, None)
        if existing is None or isinstance(existing, PartsAttribute):
            type.__setattr__(cls, name, PartsAttribute(key, decompose))


def _install_assignment(mapper: Mapper[Any], cls: type) -> None:
    for _key, column, config in uid_columns(mapper):
        if config.column is None:
            config.column = column
    fields = [(key, config) for key, _column, config in uid_columns(mapper) if config.client_side]
    if not fields:
        return
    plain = [(key, config) for key, config in fields if config.shard_key is None]

    def assign_ids(target: Any, args: Any, kwargs: dict[str, Any]) -> None:
        for key, config in plain:
            if key not in kwargs:
                setattr(target, key, config.new_id())

    event.listen(mapper, "init", assign_ids)

    for key, config in fields:
        if config.shard_key is None:
            continue
        shard_key = config.shard_key
        shard_column = mapper.columns.get(shard_key)
        if shard_column is None:
            raise ValueError(
                f"{cls.__name__}.{key}: shard_key={shard_key!r} is not a mapped column"
            )
        config.shard_key_column = shard_column.key
        event.listen(getattr(cls, shard_key), "set", _on_shard_key_set(key, config))


def _on_shard_key_set(id_key: str, config: FieldConfig) -> Callable[..., None]:
    def shard_key_set(target: Any, value: Any, oldvalue: Any, initiator: Any) -> None:
        if value is None:
            return
        placement = config.placement
        placement.logical_shard_for_key(value)  # ShardKeyError before any SQL
        state = inspect(target)
        current = state.dict.get(id_key)
        if current is None and state.key is not None:
            current = getattr(target, id_key)  # expired after a commit: reload it
        if state.key is not None:
            if current is not None and not placement.fits_key(current, value):
                raise ShardKeyError(
                    f"{config.shard_key}={value!r} would move this row to another logical "
                    "shard; rows cannot change shards (create a new row instead)"
                )
            return
        if current is not None and not made_by_field(target, id_key, current):
            return  # the caller's id: the session checks it against the key, by its map
        chosen = id_for_new_object(
            placement,
            current,
            value,
            keyed=True,
            ours=True,
            what=type(target).__name__,
            key_name=config.shard_key or "shard key",
        )
        if chosen.made:
            set_made_id(target, id_key, chosen.value)

    return shard_key_set


def set_made_id(target: Any, key: str, value: Any) -> None:
    """Give ``target`` an id the field made, remembered as the field's own: unlike an id
    the caller chose, it is made again when the shard key changes before the insert."""
    setattr(target, key, value)
    inspect(target).info.setdefault(_MADE, {})[key] = value


def made_by_field(target: Any, key: str, value: Any) -> bool:
    """Whether ``value`` is the id the field made for ``target`` (not the caller's)."""
    made: dict[str, Any] = inspect(target).info.get(_MADE, {})
    return key in made and made[key] == value


@event.listens_for(Mapper, "after_mapper_constructed")
def _configure_uid_columns(mapper: Mapper[Any], cls: type) -> None:
    _install_parts(mapper, cls)
    _install_assignment(mapper, cls)
