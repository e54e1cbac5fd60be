"""Mapper hooks: ids at construction, re-made when the shard key is set, ``*_parts``.

One listener on every mapper's construction looks for uid columns and installs, for
that class only: an ``init`` hook that assigns ids before ``__init__`` runs, a ``set``
hook on the shard key (the id carries the key's shard, so it is made when the key is
known, and made again when the key changes while the id is still the field's own, never
when the caller chose it), a ``set`` hook on every column of a uid type that stores the
value as the column's Python type (``Order(id="384...")`` holds the int 384..., so the
identity map has one key per row), and a ``<attribute>_parts`` descriptor (``IdParts``)
that decodes the id, binding the one the class declares, if any.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.ext.horizontal_shard import ShardedSession
from sqlalchemy.orm import InstanceState, Mapper
from sqlalchemy.sql.elements import ClauseElement
from sqlalchemy.sql.schema import Column

from ..errors import ShardKeyError
from ..ids.parts import IdParts
from ..placement import Placement, id_for_new_object
from .compat import instance_state
from .fields import INFO_KEY, FieldConfig
from .types import LocalityUUIDType, SnowflakeType, UniqIdType

__all__ = ["made_by_field", "set_made_id", "uid_columns"]

# Key of ``InstanceState.info``: the ids uid fields made for a new object, by attribute,
# each with the shard key and the placement it was made for.
_MADE_FOR = "uid_fields_made"

_UidType = SnowflakeType | LocalityUUIDType | UniqIdType


def uid_columns(mapper: Mapper[Any]) -> list[tuple[str, Column[Any], FieldConfig]]:
    """(attribute key, column, config) of every uid field a mapper maps."""
    # mapper.columns, not column_attrs: this runs before the mappers are configured.
    found = []
    for key, column in mapper.columns.items():
        if isinstance(column, Column) and isinstance(column.info.get(INFO_KEY), FieldConfig):
            found.append((key, column, column.info[INFO_KEY]))
    return found


def _decoders(mapper: Mapper[Any]) -> dict[str, tuple[Callable[[Any], Any], type]]:
    """Attribute key -> (decoder, class of its parts), for every column that decodes."""
    found: dict[str, tuple[Callable[[Any], Any], type]] = {}
    for key, column in mapper.columns.items():
        id_type = column.type
        if isinstance(id_type, _UidType) and id_type.parts_type is not None:
            found[key] = (id_type.decompose, id_type.parts_type)
    return found


def _install_parts(mapper: Mapper[Any], cls: type) -> None:
    """``<key>_parts`` for every column that decodes; a declared ``IdParts`` is bound to
    its column after its declared class is checked against the column's."""
    decoders = _decoders(mapper)
    declared: dict[str, IdParts[Any]] = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, IdParts):
                declared[name] = value
    for name, parts in declared.items():
        of = parts.target(cls)
        if of in decoders:
            type.__setattr__(cls, name, parts.bind(of, *decoders[of]))
        elif parts.decode is None:  # declared here, and no column of that name decodes
            raise TypeError(
                f"{cls.__name__}.{name}: {of!r} is not a uid column of {cls.__name__} "
                f"(columns that decode: {sorted(decoders) or 'none'})"
            )
    for key, (decompose, parts_type) in decoders.items():
        name = f"{key}_parts"
        if name not in declared and getattr(cls, name, None) is None:
            type.__setattr__(cls, name, IdParts(parts_type, of=key, decode=decompose))


def _install_coercion(mapper: Mapper[Any], cls: type) -> None:
    """Values set on a column of a uid type become the column's Python type at once.

    The identity map keys rows by the attribute's value, so ``Order(id="384...")`` kept
    as text would be a second identity for the row a later ``get(Order, 384...)`` loads.
    Text follows the core's rule for ids (``coerce_id``); a value that is no id raises
    ValueError/TypeError here, before any flush.
    """
    for key, column in mapper.columns.items():
        id_type = column.type
        if isinstance(id_type, _UidType):
            event.listen(getattr(cls, key), "set", _coercer(id_type), retval=True)


def _coercer(id_type: _UidType) -> Callable[..., Any]:
    coerce = id_type.coerce

    def coerce_on_set(target: Any, value: Any, oldvalue: Any, initiator: Any) -> Any:
        if value.__class__ is int:  # most sets (every id a field makes): no SQL to ask for
            return coerce(value)
        if (
            value is None
            or isinstance(value, ClauseElement)
            or hasattr(value, "__clause_element__")
        ):
            return value  # NULL, or SQL the flush evaluates
        return coerce(value)

    return coerce_on_set


def _install_assignment(mapper: Mapper[Any], cls: type) -> None:
    for _key, column, config in uid_columns(mapper):
        if config.column is None:
            shard_column = mapper.columns.get(config.shard_key or "")
            key_column = shard_column.key if shard_column is not None else config.shard_key
            config.mapped(column, key_column)
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
        event.listen(getattr(cls, shard_key), "set", _on_shard_key_set(key, config))


def _on_shard_key_set(id_key: str, config: FieldConfig) -> Callable[..., None]:
    def shard_key_set(target: Any, value: Any, oldvalue: Any, initiator: Any) -> None:
        if value is None:
            return
        placement = config.placement
        state = instance_state(target)
        current = state.dict.get(id_key)
        if current is None and state.key is None:
            # A new object's key, no id yet (the usual case: Photo(owner_id=7)): the
            # rule below would make a fresh id for the key; the placement's bound
            # placer makes the same one with the key placed once, without the rule's
            # per-row steps (ShardKeyError for a bad key, as there).
            made_id, _database = placement.key_placer()(value)
            set_made_id(target, id_key, made_id, shard_key=value, placement=placement, state=state)
            return
        if current is None and state.key is not None:
            current = getattr(target, id_key)  # expired after a commit: reload it
        if state.key is not None:
            placement.logical_shard_for_key(value)  # ShardKeyError before any SQL
            # A stored row's new key. In a sharded session, whether it keeps the row on
            # its database is the flush's question, by the session's map (the core's
            # check_key_change, in session_writes._refuse_move): a key of the same
            # database is allowed. Outside one no database is known, and the logical
            # shard the id carries is all a key change can be held to.
            if (
                current is not None
                and not isinstance(state.session, ShardedSession)
                and not placement.fits_key(current, value)
            ):
                raise ShardKeyError(
                    f"{config.shard_key}={value!r} would move this row to another logical "
                    "shard; rows cannot change shards (create a new row instead)"
                )
            return
        made = state.info.get(_MADE_FOR, {}).get(id_key)
        if current is not None and (made is None or made[0] != current):
            # The caller's id: the session checks it against the key, by its map.
            placement.logical_shard_for_key(value)  # ShardKeyError before any SQL
            return
        chosen = id_for_new_object(  # places the key once (ShardKeyError for a bad one)
            placement,
            current,
            value,
            keyed=True,
            ours=True,
            made_for_key=made is not None and made[1] == value and made[2] is placement,
            what=type(target).__name__,
            key_name=config.shard_key or "shard key",
        )
        if chosen.made:
            set_made_id(
                target, id_key, chosen.value, shard_key=value, placement=placement, state=state
            )

    return shard_key_set


def set_made_id(
    target: Any,
    key: str,
    value: Any,
    *,
    shard_key: Any = None,
    placement: Placement | None = None,
    state: InstanceState[Any] | None = None,
) -> None:
    """Give ``target`` an id the field made, remembered as the field's own: unlike an id
    the caller chose, it is made again when the shard key changes before the insert.
    With the shard key and the placement it was made for: while the key holds, the id
    fits it by construction (the flush does not place the key again)."""
    setattr(target, key, value)
    if state is None:
        state = instance_state(target)
    info = state.info
    made = info.get(_MADE_FOR)
    if made is None:
        info[_MADE_FOR] = {key: (value, shard_key, placement)}
    else:
        made[key] = (value, shard_key, placement)


def made_by_field(target: Any, key: str, value: Any) -> bool:
    """Whether ``value`` is the id the field made for ``target`` (not the caller's)."""
    return made_for(inspect(target), key, value) is not None


def made_for(
    state: InstanceState[Any], key: str, value: Any
) -> tuple[Any, Placement | None] | None:
    """(the shard key, the placement) the field made ``value`` for, if it made it."""
    made = state.info.get(_MADE_FOR, {}).get(key)
    if made is None or made[0] != value:
        return None
    return made[1], made[2]  # the placement is None for an id made without one


@event.listens_for(Mapper, "after_mapper_constructed")
def _configure_uid_columns(mapper: Mapper[Any], cls: type) -> None:
    _install_parts(mapper, cls)
    _install_coercion(mapper, cls)
    _install_assignment(mapper, cls)
