"""The write side of the sharded QuerySet: where new and changed rows go, and how
writes over several shards commit.

``ShardedQuerySet`` (``query.py``) decides which shards a query names; this mixin puts
its writes there: ``create``/``bulk_create`` on the shard each new row's id names (one
batch per shard, committed together, by two-phase commit when asked),
``bulk_update``/``update``/``delete`` per shard, ``get_or_create``/``update_or_create``
looking in the row's shard (or every shard) first, with id moves refused and the
shards' transactions checked before anything is written. It lives apart from the
routing and the reads so each can be read on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, Self, TypeVar

from django.db import IntegrityError, models, transaction

from .. import compat
from ..connections.transactions import (
    check_transaction,
    sharded_atomic,
    unprotected_write_mode,
    writes_checked,
)
from ..fields import UidField
from ..key_changes import check_bulk_keys, new_keys_in, refuse_key_moves
from ..relations.deletion import delete_on_shards, two_phase_deletes
from ..routing import (
    check_family_keys,
    check_write,
    database_for_instance,
    family_keys,
    parent_link,
)
from . import vetting
from .concurrent_writes import concurrent_inserts, run_on_caller_connections
from .new_objects import fetch_database_ids, fill_ids, new_ids_in, refuse_id_moves

__all__ = ["ShardedWritesMixin"]

_M = TypeVar("_M", bound=models.Model, covariant=True)


class ShardedWritesMixin(models.QuerySet[_M]):
    """Where ``ShardedQuerySet``'s writes go and how they commit (see the module)."""

    if TYPE_CHECKING:  # routing, defined by ShardedQuerySet (query.py) and Django
        _db: str | None
        _shard_aliases: tuple[str, ...] | None

        @property
        def _sharded_field(self) -> UidField | None: ...
        @property
        def primary_db(self) -> str: ...
        def _shard_databases(self) -> tuple[str, ...]: ...
        def _is_fanout(self) -> bool: ...
        def _aliases_for(
            self, kwargs: dict[str, Any], args: Iterable[Any] = ()
        ) -> set[str] | None: ...
        def _for_alias(self, alias: str, *, order_by_pk: bool = False) -> Self: ...
        def on_all_shards(self) -> Self: ...
        def _lookup_scope(self, kwargs: dict[str, Any]) -> Self: ...
        def _extract_model_params(self, defaults: Any, **kwargs: Any) -> dict[str, Any]: ...

    # -- writes --------------------------------------------------------------------------
    def update(self, **kwargs: Any) -> int:
        self._refuse_id_moves(kwargs)
        self._check_transaction()
        if not self._is_fanout():
            return super().update(**kwargs)
        if self.query.is_sliced:
            raise TypeError("Cannot update a query once a slice has been taken.")
        vetting.vet_write(self, kwargs.values())
        with writes_checked():
            return sum(self._for_alias(a).update(**kwargs) for a in self._shard_aliases or ())

    def _check_transaction(self, aliases: Iterable[str] | None = None) -> None:
        """Before a write: its shards hold a transaction when another database does
        (``transactions.check_transaction``; by default only when DEBUG is on)."""
        if unprotected_write_mode() is None or not self._shard_databases():
            return
        if aliases is None:
            compat.mark_for_write(self)  # as update() and delete() do: where the writes go
            aliases = self._shard_aliases if self._is_fanout() else (self.primary_db,)
        check_transaction(self.model, aliases or ())

    def _refuse_id_moves(self, kwargs: dict[str, Any]) -> None:
        """Before an UPDATE runs: a new id must name each database it runs on, and a new
        shard key (or followed parent) must have its rows there (the rows stay where
        they are; the core's ``check_id_change`` and ``check_key_change`` decide)."""
        if not self._shard_databases():
            return
        field = self._sharded_field
        new_ids = new_ids_in(field, kwargs) if field is not None else []
        new_keys = new_keys_in(self.model, kwargs)
        if not new_ids and not new_keys:
            return
        if self._is_fanout():
            aliases = self._shard_aliases or ()
        else:
            compat.mark_for_write(self)  # as update() does: the database writes go to
            aliases = (self.primary_db,)
        if field is not None and new_ids:
            refuse_id_moves(field, new_ids, aliases)
        refuse_key_moves(self.model, new_keys, aliases)

    def delete(self, *, two_phase: bool = False) -> tuple[int, dict[str, int]]:
        """Delete the rows, and run each on_delete where the referring rows live.

        A fan-out is one delete: the rows of every shard and what points at them are
        collected first (a PROTECT anywhere deletes nothing), then deleted in one
        ``sharded_atomic``; ``two_phase=True`` commits it by two-phase commit
        (PostgreSQL), as ``two_phase_deletes()`` does for ``Model.delete()``.
        """
        self._check_transaction()
        with two_phase_deletes() if two_phase else nullcontext():  # or an outer block's
            if not self._is_fanout():
                return super().delete()
            if self.query.is_sliced:
                raise TypeError("Cannot use 'limit' or 'offset' with delete().")
            vetting.vet_write(self)
            shards = [self._for_alias(alias) for alias in self._shard_aliases or ()]
            deleted = delete_on_shards(shards, origin=self)
            compat.set_result_cache(self, None)
            return deleted

    def _alias_for_new(self, obj: models.Model) -> str:
        if self._sharded_field is None and parent_link(self.model) is None:
            return compat.explicit_database(self) or self.primary_db
        alias = database_for_instance(obj)
        pinned = compat.explicit_database(self)
        if pinned is not None and pinned != alias:
            check_write(obj, pinned)  # WrongShardError, unless allowed on purpose
            return pinned
        return alias

    def create(self, **kwargs: Any) -> Any:
        obj = self.model(**kwargs)
        compat.mark_for_write(self)
        obj.save(force_insert=True, using=self._alias_for_new(obj))
        return obj

    def get_or_create(self, defaults: Any = None, **kwargs: Any) -> tuple[Any, bool]:
        if not self._shard_databases():
            return super().get_or_create(defaults, **kwargs)
        compat.mark_for_write(self)
        try:
            return self._lookup_scope(kwargs).get(**kwargs), False
        except self.model.DoesNotExist:
            pass
        params = compat.model_params(self, defaults, **kwargs)
        params = {k: v() if callable(v) else v for k, v in params.items()}
        obj = self.model(**params)
        alias = self._alias_for_new(obj)
        self._check_transaction([alias])
        try:
            with transaction.atomic(using=alias):
                obj.save(force_insert=True, using=alias)
        except IntegrityError:
            try:
                return self._for_alias(alias).get(**kwargs), False
            except self.model.DoesNotExist:
                pass
            raise
        return obj, True

    def update_or_create(
        self, defaults: Any = None, create_defaults: Any = None, **kwargs: Any
    ) -> tuple[Any, bool]:
        if not self._shard_databases():
            extra = {} if create_defaults is None else {"create_defaults": create_defaults}
            return super().update_or_create(defaults, **extra, **kwargs)
        defaults = defaults or {}
        try:
            found = self._lookup_scope(kwargs).get(**kwargs)
        except self.model.DoesNotExist:
            return self.get_or_create(
                create_defaults if create_defaults is not None else defaults, **kwargs
            )
        alias = found._state.db
        assert alias is not None  # a row read from a database knows which one
        self._check_transaction([alias])
        with transaction.atomic(using=alias):
            obj = self._for_alias(alias).select_for_update().get(pk=found.pk)
            for name, value in defaults.items():
                setattr(obj, name, value() if callable(value) else value)
            obj.save(using=alias)
        return obj, False

    def bulk_update(
        self, objs: Iterable[Any], fields: Iterable[str], batch_size: int | None = None
    ) -> int:
        """Update rows of several shards: one ``bulk_update`` per shard, in id order."""
        objs = list(objs)
        if not self._shard_databases():
            return super().bulk_update(objs, fields, batch_size=batch_size)
        groups: dict[str, list[Any]] = {}
        pinned = compat.explicit_database(self)
        for obj in objs:
            if obj.pk is None:
                raise ValueError("All bulk_update() objects must have a primary key set.")
            alias = obj._state.db or database_for_instance(obj)
            if pinned is not None and alias != pinned:
                check_write(obj, pinned)  # WrongShardError unless allowed on purpose
                alias = pinned
            groups.setdefault(alias, []).append(obj)
        fields = list(fields)
        check_bulk_keys(((a, obj) for a, group in groups.items() for obj in group), fields)
        self._check_transaction(groups)
        return sum(
            models.QuerySet.bulk_update(self._for_alias(alias), group, fields, batch_size)
            for alias, group in groups.items()
        )

    def bulk_create(
        self, objs: Iterable[Any], *args: Any, two_phase: bool = False, **kwargs: Any
    ) -> list[Any]:
        """Give every object its id, then insert one batch per shard.

        The batches commit together when every shard succeeded; ``two_phase=True``
        (PostgreSQL) commits them with two-phase commit, so a crash between two shards'
        commits cannot leave some committed and the rest not.
        """
        objs = list(objs)
        field = self._sharded_field
        placed = fill_ids(objs)  # each row's database, placed once
        if field is None and parent_link(self.model) is None:
            return super().bulk_create(objs, *args, **kwargs)
        if placed is not None and field is not None and compat.explicit_database(self) is None:
            aliases = placed
        else:
            aliases = [self._alias_for_new(obj) for obj in objs]
        checked = bool(family_keys(self.model))
        groups: dict[str, list[Any]] = {}
        for obj, alias in zip(objs, aliases, strict=True):
            if checked:
                check_family_keys(obj, alias)  # bulk inserts send no pre_save
            groups.setdefault(alias, []).append(obj)
        self._check_transaction(groups)

        def insert(alias: str) -> Callable[[], None]:
            def run() -> None:
                group = groups[alias]
                if field is not None and field.database_default:
                    fetch_database_ids(field, alias, group)
                models.QuerySet.bulk_create(self._for_alias(alias), group, *args, **kwargs)

            return run

        concurrent = not two_phase and concurrent_inserts(groups)
        # Every shard's inserts inside its own transaction, all open until every shard
        # succeeded: one failure rolls them all back (the commits still run one after
        # another; see sharded_atomic).
        with sharded_atomic(*groups, two_phase=two_phase):
            if concurrent:
                run_on_caller_connections({alias: insert(alias) for alias in groups})
            else:
                for alias in groups:
                    insert(alias)()
        return objs
