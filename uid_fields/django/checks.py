"""System checks: configuration errors found at ``manage.py check``, never at import.

Ids: E001 unknown generator, E002 unknown shard map, E003 shard map alias missing from
DATABASES, E004 invalid shard map, E005 invalid generator, E006 generator kind does not
fit the field, E007 sharded model whose default manager is not sharded, E008 unknown
shard key, E009 database-side ids on a backend without them, E010 the ``<name>_parts``
attribute is taken, E011 a foreign key between rows that may live on different
databases, E012 two generators that would issue the same ids; W001 a layout exhausted
within five years.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import django
from django.apps import apps
from django.conf import settings
from django.core import checks

from ..errors import UidFieldsError
from ..generators import ShardedIdGenerator
from . import conf as conf_module

if TYPE_CHECKING:
    from .fields import UidField

EXHAUSTION_WARNING = timedelta(days=5 * 365)


def _generator_errors(name: str) -> list[checks.CheckMessage]:
    try:
        conf_module.get_generator(name)
    except LookupError as exc:
        return [
            checks.Error(str(exc), hint="Add it to UID_FIELDS['GENERATORS'].", id="uid_fields.E001")
        ]
    except (ValueError, TypeError, OverflowError, UidFieldsError) as exc:
        # UidFieldsError: a lease coordinator that cannot be reached, for one.
        return [
            checks.Error(
                f"UID_FIELDS['GENERATORS'][{name!r}] is invalid: {exc}",
                hint="Fix the generator settings (kind, layout, epoch, fields).",
                id="uid_fields.E005",
            )
        ]
    return []


def check_field(field: UidField) -> list[checks.CheckMessage]:
    model = field.model
    errors = _generator_errors(field.generator_name)
    if errors:
        return [checks.Error(e.msg, hint=e.hint, obj=field, id=e.id) for e in errors]
    kind = conf_module.conf.GENERATORS[field.generator_name].get("kind")
    if kind not in field.kinds:
        errors.append(
            checks.Error(
                f"{type(field).__name__} takes a generator of kind {' or '.join(field.kinds)}, "
                f"but {field.generator_name!r} is {kind!r}",
                obj=field,
                id="uid_fields.E006",
            )
        )
    if field.shards_name is not None:
        if field.shards_name not in conf_module.conf.SHARDS:
            errors.append(
                checks.Error(
                    f"no shard map {field.shards_name!r} in UID_FIELDS['SHARDS']",
                    hint=f"Configured: {sorted(conf_module.conf.SHARDS)}.",
                    obj=field,
                    id="uid_fields.E002",
                )
            )
        else:
            try:
                conf_module.get_shard_map(field.shards_name, field.generator_name)
            except (ValueError, TypeError) as exc:
                errors.append(
                    checks.Error(
                        f"shard map {field.shards_name!r} is invalid: {exc}",
                        obj=field,
                        id="uid_fields.E004",
                    )
                )
    if field.shard_key is not None:
        if not isinstance(field.generator, ShardedIdGenerator):
            errors.append(
                checks.Error("shard_key needs a sharded generator", obj=field, id="uid_fields.E008")
            )
        try:
            model._meta.get_field(field.shard_key)
        except Exception:
            errors.append(
                checks.Error(
                    f"shard_key {field.shard_key!r} is not a field of {model.__name__}",
                    obj=field,
                    id="uid_fields.E008",
                )
            )
    parts = getattr(model, f"{field.name}_parts", None)
    if parts is not None and getattr(parts, "field", None) is not field:
        errors.append(
            checks.Error(
                f"{model.__name__}.{field.name}_parts is already defined, so the decoded "
                "parts cannot be attached",
                hint="Rename the attribute or the field.",
                obj=field,
                id="uid_fields.E010",
            )
        )
    if field.database_default:
        errors.extend(_database_default_errors(field))
    return errors


def _database_default_errors(field: UidField) -> list[checks.CheckMessage]:
    if django.VERSION < (5, 0):
        return [
            checks.Error(
                "database_default=True needs Django 5.0 or later (db_default)",
                obj=field,
                id="uid_fields.E009",
            )
        ]
    shard_map = None
    if field.shards_name is not None and field.shards_name in conf_module.conf.SHARDS:
        shard_map = conf_module.get_shard_map(field.shards_name, field.generator_name)
    aliases = shard_map.databases if shard_map else ("default",)
    wrong = [
        alias
        for alias in aliases
        if "postgresql" not in settings.DATABASES.get(alias, {}).get("ENGINE", "")
    ]
    if wrong:
        return [
            checks.Error(
                f"database_default=True makes ids with a PostgreSQL function, but {wrong} "
                "are not PostgreSQL databases",
                hint="Generate ids in Python (the default) on other backends.",
                obj=field,
                id="uid_fields.E009",
            )
        ]
    return []


@checks.register()
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Errors in UID_FIELDS itself, whether or not a model uses the entry yet."""
    conf = conf_module.conf
    errors: list[checks.CheckMessage] = []
    now = datetime.now(UTC)
    for name in conf.GENERATORS:
        problems = _generator_errors(name)
        errors.extend(problems)
        if problems:
            continue
        layout = getattr(conf_module.get_generator(name), "layout", None)
        if layout is not None and layout.exhausted_at - now < EXHAUSTION_WARNING:
            errors.append(
                checks.Warning(
                    f"generator {name!r}: its ids stop fitting at "
                    f"{layout.exhausted_at.isoformat()}, within five years",
                    hint="Plan a new epoch or layout (a new generator) before then.",
                    id="uid_fields.W001",
                )
            )
    errors.extend(_same_ids_errors([n for n in conf.GENERATORS if not _generator_errors(n)]))
    for name, config in conf.SHARDS.items():
        aliases = list(config.get("databases", [])) + list(config.get("ranges", {}))
        missing = [a for a in aliases if a not in settings.DATABASES]
        if missing:
            errors.append(
                checks.Error(
                    f"shard map {name!r} names databases missing from DATABASES: {missing}",
                    id="uid_fields.E003",
                )
            )
    return errors


def _same_ids_errors(names: list[str]) -> list[checks.CheckMessage]:
    """Two generators of one process that would issue the same ids (E012).

    Same layout and same node values mean the same id space, and each keeps its own
    sequence, so both would issue ``(time, node, 0)`` in the same millisecond.
    """
    seen: dict[Any, str] = {}
    errors: list[checks.CheckMessage] = []
    for name in names:
        generator = conf_module.get_generator(name)
        layout = getattr(generator, "layout", None)
        node = getattr(generator, "node", None)
        if layout is None or node is None or getattr(generator, "_sequence", None) is not None:
            continue
        key = (layout, tuple(sorted(dict(node).items())))
        if key in seen:
            errors.append(
                checks.Error(
                    f"generators {seen[key]!r} and {name!r} have the same layout, epoch and "
                    f"node values {dict(node)}: they would issue the same ids",
                    hint="Give one of them another node value (another worker id), or "
                    "use one generator name for both fields.",
                    id="uid_fields.E012",
                )
            )
        else:
            seen[key] = name
    return errors


@checks.register(checks.Tags.models)
def check_managers(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return manager_errors(apps.get_models()) + relation_errors(apps.get_models())


def relation_errors(models: Any) -> list[checks.CheckMessage]:
    """Foreign keys whose two rows may live on different databases (E011)."""
    from .routing import colocated

    errors: list[checks.CheckMessage] = []
    for model in models:
        for field in model._meta.concrete_fields:
            target = field.related_model if field.is_relation else None
            if target is None or not getattr(field, "db_constraint", False):
                continue
            if not colocated(model, target):
                errors.append(
                    checks.Error(
                        f"{model._meta.label}.{field.name} points at {target._meta.label}, "
                        "but the two rows may live on different databases, where no "
                        "foreign-key constraint can hold",
                        hint="Make it the shard_key of a ShardedBigIntField (co-locate the "
                        "rows), or set db_constraint=False for a reference across shards.",
                        obj=field,
                        id="uid_fields.E011",
                    )
                )
    return errors


def manager_errors(models: Any) -> list[checks.CheckMessage]:
    from .query import ShardedQuerySet
    from .routing import sharded_pk

    errors: list[checks.CheckMessage] = []
    for model in models:
        if sharded_pk(model) is None:
            continue
        manager = model._default_manager
        if not issubclass(manager._queryset_class, ShardedQuerySet):
            errors.append(
                checks.Error(
                    f"{model._meta.label} is sharded by its id, but its default manager "
                    f"{manager.name!r} is not a ShardedManager, so get(pk=...) and create() "
                    "would not be routed",
                    hint="Set objects = ShardedManager() (uid_fields.django.ShardedManager).",
                    obj=model,
                    id="uid_fields.E007",
                )
            )
    return errors
