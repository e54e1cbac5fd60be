"""Deletes across databases: each ``on_delete`` runs where the referring rows live.

Django's ``Collector`` looks for the rows that point at a deleted row on the deleted
row's own database. Rows of a family are there (``Task.tenant``, ``Comment.task``), but a
task pointing at ``auth.User`` lives on a shard while the user lives on ``default``, and
a reminder with an id of its own may point at a task on any shard: Django's query there
fails ("no such table") or finds nothing and leaves orphans.

``ShardedCollector`` (what ``Model.delete()``, ``QuerySet.delete()`` and, through
``ShardedNestedObjects``, the admin's delete confirmation use once the app is ready, in
a project with models whose rows live on shards: without one, Django's are left alone)
hands those relations to a collector per database: it asks each database that can hold
referring rows, by their indexed key column (every shard of a model placed by its own
id; only the key's shard when the key is the model's shard key; ``default`` for an
ordinary model), and runs the relation's ``on_delete`` there: CASCADE collects the rows
(and what points at them, again on their database), SET_NULL and SET_DEFAULT update
them, PROTECT and RESTRICT refuse the delete before anything is written. Everything is
then deleted inside one ``sharded_atomic`` over the databases involved, two-phase on
PostgreSQL inside ``two_phase_deletes()``. A delete that stays on one database is
Django's own.
"""

from __future__ import annotations

import weakref
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import chain
from typing import Any

from django.apps import apps
from django.db import connections, models, router
from django.db.models import ProtectedError, RestrictedError
from django.db.models.signals import class_prepared

from .. import compat
from ..connections.transactions import check_transaction, sharded_atomic, unprotected_write_mode
from ..fields import UidField
from ..routing import parent_link, relation_of, sharded_pk, watch_writes

__all__ = [
    "ShardedCollector",
    "across_relations",
    "delete_on_shards",
    "install_for_sharded_models",
    "referrer_databases",
    "two_phase_deletes",
]

_two_phase: ContextVar[bool] = ContextVar("uid_two_phase_deletes", default=False)


@contextmanager
def two_phase_deletes(enabled: bool = True) -> Iterator[None]:
    """Within the block, a delete that reaches several databases commits them with
    two-phase commit (PostgreSQL only: ``NotSupportedError`` names any other database,
    before anything is deleted). The block must hold no open transaction on them."""
    token = _two_phase.set(enabled)
    try:
        yield
    finally:
        _two_phase.reset(token)


_across: weakref.WeakKeyDictionary[type, tuple[Any, ...]] = weakref.WeakKeyDictionary()


def across_relations(model: type[models.Model]) -> tuple[Any, ...]:
    """The relations pointing at ``model`` whose rows may live on other databases and
    whose ``on_delete`` does something (reverse relation objects, as Django lists them)."""
    found = _across.get(model)
    if found is None:
        found = _across[model] = tuple(
            related
            for related in compat.candidate_relations_to_delete(model)
            if related.field.remote_field.on_delete is not models.DO_NOTHING
            and not relation_of(related.field).same_database
        )
    return found


def referrer_databases(field: Any, targets: list[Any]) -> dict[str, list[Any]]:
    """The databases that can hold rows of ``field.model`` pointing at ``targets``, each
    with the targets to ask it about."""
    model = field.model
    own = sharded_pk(model)
    if own is not None:
        if own.shard_key and own.shard_key_field() == field:
            # Placed by this very key (a key to an ordinary row): only the key's shard.
            groups: dict[str, list[Any]] = defaultdict(list)
            for target in targets:
                for alias in own.databases_for_key(_key_of(field, target)) or ():
                    groups[alias].append(target)
            return dict(groups)
        return dict.fromkeys(own.placement.databases, targets)
    link = parent_link(model)
    if link is not None:
        parent = sharded_pk(link.related_model)
        assert parent is not None  # as parent_link() found it
        return dict.fromkeys(parent.placement.databases, targets)
    # An ordinary model: where the routers put it (default, normally).
    return {router.db_for_write(model, instance=targets[0]): targets}


def _batches(alias: str, field: Any, targets: list[Any]) -> list[list[Any]]:
    """``targets`` in batches the database of ``alias`` takes in one ``IN (...)``."""
    size = max(connections[alias].ops.bulk_batch_size([field], targets), 1)
    return [targets[i : i + size] for i in range(0, len(targets), size)]


def _key_of(field: Any, target: models.Model) -> Any:
    return getattr(target, field.target_field.attname)


def _model_of(objs: Any) -> type[models.Model] | None:
    if compat.is_queryset_like(objs) and hasattr(objs, "model"):
        return objs.model  # type: ignore[no-any-return]
    try:
        return type(objs[0]) if objs else None
    except (TypeError, IndexError, KeyError):
        return None


class ShardedCollector(compat.Collector):
    """Django's ``Collector``, also running on_delete where the referring rows live.

    One collector per database takes part in a delete (``members``, shared by all of
    them); the one Django made collects on its own database as Django does, minus the
    relations across databases, which go to the member of each database that can hold
    referring rows.
    """

    def __init__(self, using: str, origin: Any = None, **options: Any) -> None:
        # ``options``: what a Django release adds (6.1: force_collection), passed through
        # and given to the collectors of the other databases too.
        super().__init__(using, origin=origin, **options)
        self._options = options
        self.members: dict[str, ShardedCollector] = {using: self}
        self._followed: set[tuple[type, Any]] = set()

    def member(self, alias: str) -> ShardedCollector:
        """The collector of ``alias`` in this delete (made on first use)."""
        found = self.members.get(alias)
        if found is None:
            found = type(self)(alias, origin=self.origin, **self._options)
            found.members = self.members
            self.adopt(found)
            self.members[alias] = found
        return found

    def adopt(self, member: ShardedCollector) -> None:
        """Share with a new member what a subclass gathers over the whole delete."""

    # -- collecting ----------------------------------------------------------------------
    def related_objects(self, related_model: Any, related_fields: Any, objs: Any) -> Any:
        """Django's query for referring rows, on this database: relations whose rows live
        elsewhere are left out (an empty query), the members ask their own databases."""
        here = [f for f in related_fields if relation_of(f).same_database]
        if not here:
            return related_model._base_manager.using(self.using).none()
        return super().related_objects(related_model, here, objs)

    def collect(
        self,
        objs: Any,
        source: Any = None,
        nullable: bool = False,
        collect_related: bool = True,
        source_attr: str | None = None,
        reverse_dependency: bool = False,
        keep_parents: bool = False,
        fail_on_restricted: bool = True,
    ) -> None:
        super().collect(
            objs,
            source=source,
            nullable=nullable,
            collect_related=collect_related,
            source_attr=source_attr,
            reverse_dependency=reverse_dependency,
            keep_parents=keep_parents,
            fail_on_restricted=False,  # checked below, over every database of the delete
        )
        model = _model_of(objs)
        if collect_related and model is not None and across_relations(model):
            self._collect_across(model, keep_parents)
        if fail_on_restricted:
            self.check_restricted()

    def _collect_across(self, model: type[models.Model], keep_parents: bool) -> None:
        pending = [obj for obj in self.data.get(model, ()) if (model, obj.pk) not in self._followed]
        if not pending:
            return
        self._followed.update((model, obj.pk) for obj in pending)
        protected: dict[str, list[Any]] = defaultdict(list)
        for related in across_relations(model):
            if keep_parents and related.model is not model and issubclass(model, related.model):
                continue  # the parent's rows stay, and so do the rows pointing at them
            field = related.field
            on_delete = field.remote_field.on_delete
            lazy = getattr(on_delete, "lazy_sub_objs", False)
            for alias, targets in referrer_databases(field, pending).items():
                for batch in _batches(alias, field, targets):
                    sub_objs = related.related_model._base_manager.using(alias).filter(
                        **{f"{field.name}__in": batch}
                    )
                    # A database joins the delete only when it holds referring rows. A
                    # lazy handler (SET_NULL) updates them without loading them.
                    if lazy:
                        if not sub_objs.exists():
                            continue
                    elif not sub_objs:
                        continue
                    else:
                        _point_at(field, sub_objs, batch)
                    try:
                        on_delete(self.member(alias), field, sub_objs, alias)
                    except ProtectedError as error:
                        protected[f"'{field.model.__name__}.{field.name}'"] += list(
                            error.protected_objects
                        )
        if protected:
            raise ProtectedError(
                f"Cannot delete some instances of model {model.__name__!r} because they "
                "are referenced through protected foreign keys on other databases: "
                f"{', '.join(protected)}.",
                set(chain.from_iterable(protected.values())),
            )

    def check_restricted(self) -> None:
        """Django's RESTRICT rule over every database of the delete: a restricted row is
        refused unless it is deleted too (by a CASCADE on its own database)."""
        found: dict[str, list[Any]] = defaultdict(list)
        for member in self.members.values():
            for collected, instances in member.data.items():
                member.clear_restricted_objects_from_set(collected, set(instances))
            for queryset in member.fast_deletes:
                member.clear_restricted_objects_from_queryset(queryset.model, queryset)
            restricted_objects: dict[Any, Any] = member.restricted_objects
            for restricted, fields in restricted_objects.items():
                for field, objs in fields.items():
                    if objs:
                        found[f"'{restricted.__name__}.{field.name}'"] += objs
        if found:
            raise RestrictedError(
                "Cannot delete some instances because they are referenced through "
                f"restricted foreign keys: {', '.join(found)}.",
                set(chain.from_iterable(found.values())),
            )

    # -- deleting ------------------------------------------------------------------------
    def delete(self) -> tuple[int, dict[str, int]]:
        """Every member's delete, inside one transaction per database (``sharded_atomic``;
        two-phase inside ``two_phase_deletes()``): a failure on one rolls all back."""
        origin = self.origin
        if isinstance(origin, models.Model) and unprotected_write_mode() is not None:
            # ``obj.delete()`` (Django's Model.delete makes its collector with the row as
            # the origin) sends no signal before it deletes: it is checked here.
            model = type(origin)
            if sharded_pk(model) is not None or parent_link(model) is not None:
                check_transaction(model, [self.using])
        if len(self.members) == 1:
            return super().delete()
        counts: Counter[str] = Counter()
        ids = [
            (instance, model._meta.pk.attname, instance.pk)
            for member in self.members.values()
            for model, instances in member.data.items()
            for instance in instances
        ]
        try:
            with sharded_atomic(*self.members, two_phase=_two_phase.get()):
                for member in self.members.values():
                    _, per_model = compat.Collector.delete(member)
                    counts.update(per_model)
        except BaseException:
            # Each member cleared the ids of its rows; nothing was deleted after all.
            for instance, attname, value in ids:
                setattr(instance, attname, value)
            raise
        return sum(counts.values()), dict(counts)


def _point_at(field: Any, referrers: Iterable[models.Model], targets: Sequence[Any]) -> None:
    """Give each referring row the target row it points at, so nothing reads it again
    (the admin's nested list follows the key of every row), from a database it is not on."""
    by_key = {_key_of(field, target): target for target in targets}
    for row in referrers:
        target = by_key.get(getattr(row, field.attname))
        if target is not None:
            compat.cache_related(field, row, target)


def delete_on_shards(
    querysets: Sequence[models.QuerySet[Any]], *, origin: Any = None
) -> tuple[int, dict[str, int]]:
    """Delete the rows of one query run on several shards (one query per shard) as one
    delete: what points at any of them is collected first, then everything is deleted
    inside one ``sharded_atomic``."""
    prepared = [compat.prepared_for_delete(queryset) for queryset in querysets]
    if not prepared:
        return 0, {}
    collector = ShardedCollector(prepared[0].db, origin=origin)
    for queryset in prepared:
        collector.member(queryset.db).collect(queryset, fail_on_restricted=False)
    collector.check_restricted()
    return collector.delete()


_installed = False

#: What else collects like ``ShardedCollector`` once rows live on shards: the admin's
#: delete confirmation (``uid_fields.django.admin`` adds its ``ShardedNestedObjects``
#: here when imported, so this module needs no import of the admin's).
_ALSO_INSTALLED: list[Callable[[], None]] = []


def also_install(install: Callable[[], None]) -> None:
    """Run ``install`` with ``install_for_sharded_models`` (at once if that already ran)."""
    _ALSO_INSTALLED.append(install)
    if _installed:
        install()


def install_for_sharded_models() -> None:
    """Make ``Model.delete()``, ``QuerySet.delete()`` and the admin's delete confirmation
    collect with ``ShardedCollector`` (and ``ShardedNestedObjects``). Called by the app's
    ``ready()`` when some model's rows live on shards (and for a model defined later),
    never in a project without: there Django's collector stays Django's."""
    global _installed
    if _installed:
        return
    _installed = True
    compat.install_collector(ShardedCollector)
    for install in _ALSO_INSTALLED:
        install()


def _watch_late_model(sender: type[models.Model], **kwargs: Any) -> None:
    """A model defined once the app is ready (the app's ``ready()`` saw the others).

    Its relations may not be resolved yet, and reading its field lists now would cache
    them half made: only its primary key is read. A uid primary key or a many-to-many
    table may place rows on shards (the receivers ask again when a row is written).
    Not the historical models a migration renders (module ``"__fake__"``).
    """
    meta = sender._meta
    if not apps.ready or meta.abstract or sender.__module__ == "__fake__":
        return
    if isinstance(meta.pk, UidField) or meta.auto_created:
        watch_writes(sender, lives_on_shards=True)
    if sharded_pk(sender) is not None:
        install_for_sharded_models()


class_prepared.connect(_watch_late_model, dispatch_uid="uid_fields.watch_writes")
