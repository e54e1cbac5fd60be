"""System checks: configuration errors found at ``manage.py check``, never at import.

They read the settings dicts and nothing else: no generator is built, no lease is
claimed, no database or Redis server is asked (``migrate`` runs them before the lease
table exists). Problems of the dict itself come from the core validator
(``uid_fields.config.validate``), whose codes are the ids here.

Ids: E001 unknown generator, E002 unknown shard map, E003 shard map alias missing from
DATABASES, E004 invalid shard map, E005 invalid generator, E006 generator kind does not
fit the field, E007 sharded model whose default manager is not sharded, E008 unknown
shard key, E009 database-side ids on a backend without them, E010 the ``<name>_parts``
attribute is taken, E011 a foreign key between rows that may live on different
databases, E012 two generators that would issue the same ids, E013 an unknown key in
UID_FIELDS, E014 a value of the wrong type or shape, E015 a many-to-many relation of
rows that live on shards, E016 a sharded generator whose Python-made ids would collide
across processes, E017 an on_delete that would have to run across databases, E018 a
``function=`` that is not an SQL identifier, E019 a generic relation touching rows on
shards, E030 public-id keys that cannot be used (a secret under 16 bytes, a version
outside 0-31), E031 a ``public_prefix`` without keys, E032 a malformed, unsupported or
shared ``public_prefix``; W001 a layout exhausted within five years.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import django
from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import models

from .. import config as core
from ..config import Problem
from ..config.problems import key_names, key_text
from ..ids.public import prefix_problem
from ..sql.postgres import sql_identifier
from .conf import conf
from .fields import FIELD_CHECKS, UidField, database_made_generators
from .public_ids import kind_of
from .query import ShardedQuerySet
from .routing import colocated, parent_link, sharded_pk

EXHAUSTION_WARNING = timedelta(days=5 * 365)

_HINTS = {
    "E004": "Fix databases/ranges/logical_shards/route_by (docs: settings, SHARDS).",
    "E005": "Fix the generator settings (kind, layout, epoch, fields).",
    "E013": "Fix the spelling; the settings reference lists every key.",
    "E014": "Give the value the type the settings reference names.",
    "E030": "Use secrets of 16 bytes or more (secrets.token_urlsafe(32)), versions 0-31.",
}


def _raw() -> object:
    return getattr(settings, "UID_FIELDS", {})


def _error(problem: Problem, obj: Any = None) -> checks.CheckMessage:
    where = f"UID_FIELDS.{problem.path}" if problem.path else "UID_FIELDS"
    return checks.Error(
        f"{where}: {problem.message}",
        hint=_HINTS.get(problem.code),
        obj=obj,
        id=f"uid_fields.{problem.code}",
    )


def _valid_generators() -> dict[str, Mapping[str, Any]]:
    """The generator entries without a problem, by name."""
    return {
        name: entry
        for name, entry in conf.GENERATORS.items()
        if not core.generator_problems(name, entry)
    }


def check_field(field: UidField) -> list[checks.CheckMessage]:
    """The checks of one uid field, from the settings dicts alone."""
    model = field.model
    raw = _raw()
    generators = raw.get("GENERATORS", {}) if isinstance(raw, Mapping) else {}
    if not isinstance(generators, Mapping) or field.generator_name not in generators:
        # key_names: a dict of str and int keys cannot be sorted() as it is
        configured = key_names(generators) if isinstance(generators, Mapping) else []
        return [
            checks.Error(
                f"no generator {field.generator_name!r} in UID_FIELDS['GENERATORS'] "
                f"(configured: {configured})",
                hint="Add it to UID_FIELDS['GENERATORS'].",
                obj=field,
                id="uid_fields.E001",
            )
        ]
    entry = generators[field.generator_name]
    problems = core.generator_problems(field.generator_name, entry)
    if problems:
        return [_error(problem, obj=field) for problem in problems]
    errors: list[checks.CheckMessage] = []
    kind = entry.get("kind")
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
        errors.extend(_shard_map_errors(field, entry))
    if field.shard_key is not None:
        if kind != "sharded":
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
    try:
        sql_identifier(field.db_function, "function=")
    except ValueError as exc:
        errors.append(
            checks.Error(
                f"{exc}: it is written into SQL (the column default, the migration)",
                hint="Name the function with lower-case letters, digits and underscores.",
                obj=field,
                id="uid_fields.E018",
            )
        )
    if field.database_default:
        errors.extend(_database_default_errors(field))
    return errors


FIELD_CHECKS.append(check_field)


def _shard_map_errors(field: UidField, generator: Mapping[str, Any]) -> list[checks.CheckMessage]:
    shards = conf.SHARDS
    name = field.shards_name
    if name is None or name not in shards:
        return [
            checks.Error(
                f"no shard map {field.shards_name!r} in UID_FIELDS['SHARDS']",
                hint=f"Configured: {key_names(shards)}.",
                obj=field,
                id="uid_fields.E002",
            )
        ]
    entry = shards[name]
    if core.shard_map_problems(name, entry):
        return []  # reported once, by check_settings
    try:
        core.shard_map_of(entry, generator)
    except (ValueError, TypeError) as exc:
        return [
            checks.Error(
                f"shard map {field.shards_name!r} is invalid for the ids of "
                f"{field.generator_name!r}: {exc}",
                obj=field,
                id="uid_fields.E004",
            )
        ]
    return []


def _database_default_errors(field: UidField) -> list[checks.CheckMessage]:
    if django.VERSION < (5, 0):
        return [
            checks.Error(
                "database_default=True needs Django 5.0 or later (db_default)",
                obj=field,
                id="uid_fields.E009",
            )
        ]
    aliases = ["default"]
    if field.shards_name is not None and field.shards_name in conf.SHARDS:
        aliases = core.shard_map_aliases(conf.SHARDS[field.shards_name])
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
    errors = [_error(problem) for problem in core.validate(_raw())]
    valid = _valid_generators()
    now = datetime.now(UTC)
    for name, entry in valid.items():
        layout = core.layout_of(entry)
        if layout is not None and layout.exhausted_at - now < EXHAUSTION_WARNING:
            errors.append(
                checks.Warning(
                    f"generator {name!r}: its ids stop fitting at "
                    f"{layout.exhausted_at.isoformat()}, within five years",
                    hint="Plan a new epoch or layout (a new generator) before then.",
                    id="uid_fields.W001",
                )
            )
    errors.extend(_same_ids_errors(valid))
    database_made = database_made_generators()
    for name, entry in valid.items():
        if name not in database_made:
            errors.extend(_error(p) for p in core.process_problems(name, entry))
    for name, entry in conf.SHARDS.items():
        missing = [
            a for a in core.shard_map_aliases(entry, replicas=True) if a not in settings.DATABASES
        ]
        if missing:
            errors.append(
                checks.Error(
                    f"shard map {key_text(name)!r} names databases missing from DATABASES: "
                    f"{missing}",
                    id="uid_fields.E003",
                )
            )
    return errors


def _same_ids_errors(generators: Mapping[str, Mapping[str, Any]]) -> list[checks.CheckMessage]:
    """Two generators of one process that would issue the same ids (E012).

    Same layout and same node values mean the same id space, and each keeps its own
    sequence, so both would issue ``(time, node, 0)`` in the same millisecond. Only
    fixed values can be compared: values from the environment or a lease differ per
    process by design.
    """
    seen: dict[Any, str] = {}
    errors: list[checks.CheckMessage] = []
    for name, entry in generators.items():
        layout = core.layout_of(entry)
        node = core.static_node(entry)
        if layout is None or node is None:
            continue
        key = (layout, tuple(sorted(node.items())))
        if key in seen:
            errors.append(
                checks.Error(
                    f"generators {seen[key]!r} and {name!r} have the same layout, epoch and "
                    f"node values {node}: they would issue the same ids",
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
    """Foreign keys whose two rows may live on different databases (E011), and
    many-to-many relations of rows that live on shards (E015)."""
    errors: list[checks.CheckMessage] = []
    for model in models:
        errors.extend(_generic_relation_errors(model))
        for field in model._meta.local_many_to_many:
            target = field.related_model
            if _on_shards(model) or _on_shards(target):
                errors.append(
                    checks.Error(
                        f"{model._meta.label}.{field.name} is a many-to-many relation of rows "
                        "that live on shards: its join table would sit on one database "
                        "while the rows it links may sit on others, so add() could fail and "
                        "all(), count() and prefetch_related() would miss rows",
                        hint="Declare the link as a model of its own that lives with the "
                        "source row (a ShardedBigIntField with shard_key= the source, and a "
                        "ForeignKey to the target with db_constraint=False), and read the "
                        "targets by id (in_bulk(), which asks each target's shard).",
                        obj=field,
                        id="uid_fields.E015",
                    )
                )
        for field in model._meta.concrete_fields:
            target = field.related_model if field.is_relation else None
            if target is None:
                continue
            errors.extend(_on_delete_errors(model, field, target))
            if not getattr(field, "db_constraint", False):
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


def _generic_relation_errors(model: Any) -> list[checks.CheckMessage]:
    """E019: generic relations touching rows that live on shards.

    Django reads a generic foreign key's content type and object on the database of the
    row holding it, and a ``GenericRelation`` joins across the two tables on one
    database: with rows on shards, one side is never there.
    """
    errors: list[checks.CheckMessage] = []
    on_shards = _on_shards(model)
    for field in model._meta.private_fields:
        kind = type(field).__name__
        if kind == "GenericForeignKey" and on_shards:
            what = "a GenericForeignKey on rows that live on shards"
        elif kind == "GenericRelation" and (on_shards or _on_shards(field.related_model)):
            what = "a GenericRelation of rows that live on shards"
        else:
            continue
        errors.append(
            checks.Error(
                f"{model._meta.label}.{field.name} is {what}: Django reads the content "
                "type and the object on the holding row's database, where one side is not",
                hint="Store the target's model label and id in plain fields and read the "
                "target with Model.objects.get(pk=...), which asks the id's shard; generic "
                "foreign keys on ordinary models must not point at sharded rows.",
                obj=field,
                id="uid_fields.E019",
            )
        )
    return errors


def _on_delete_errors(model: Any, field: Any, target: Any) -> list[checks.CheckMessage]:
    """E017: an on_delete Django must run on the other side of a database boundary.

    Deleting the target collects the rows pointing at it with a query on the target's
    database; rows that live elsewhere (default, or another shard) are not there, so
    the delete fails ("no such table") or leaves them behind.
    """
    if colocated(model, target) or not (_on_shards(model) or _on_shards(target)):
        return []
    on_delete = getattr(getattr(field, "remote_field", None), "on_delete", None)
    if on_delete is None or on_delete is models.DO_NOTHING:
        return []
    return [
        checks.Error(
            f"{model._meta.label}.{field.name} points at {target._meta.label} across "
            f"databases with on_delete={on_delete.__name__}: deleting a "
            f"{target.__name__} would look for its {model.__name__} rows on its own "
            "database, where they are not",
            hint="Use on_delete=models.DO_NOTHING (and clean up the referring rows "
            "yourself), or co-locate the rows with a shard_key.",
            obj=field,
            id="uid_fields.E017",
        )
    ]


def _on_shards(model: Any) -> bool:
    return sharded_pk(model) is not None or parent_link(model) is not None


def manager_errors(models: Any) -> list[checks.CheckMessage]:
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


# -- public ids (E031, E032; keys themselves are E030, from the core validator) -------------
@checks.register(checks.Tags.models)
def check_public_ids(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return public_id_errors(apps.get_models())


def public_id_errors(models: Any) -> list[checks.CheckMessage]:
    """Uid fields with a ``public_prefix``: E031 when no keys are configured (their tokens
    could not be made or read), E032 for a malformed prefix, a prefix on a field whose
    values have no public form (uniqid text), or a prefix two models share (a token of
    one would be read as an id of the other)."""
    raw = _raw()
    section = raw.get("PUBLIC_IDS") if isinstance(raw, Mapping) else None
    has_keys = isinstance(section, Mapping) and bool(section.get("KEYS"))
    errors: list[checks.CheckMessage] = []
    owners: dict[str, str] = {}
    for model in models:
        for field in model._meta.local_fields:
            prefix = getattr(field, "public_prefix", None)
            if not isinstance(field, UidField) or prefix is None:
                continue
            where = f"{model._meta.label}.{field.name}"
            problem = prefix_problem(prefix)
            if problem is None and kind_of(field) is None:
                problem = "its ids are text, which have no public token (ints and UUIDs do)"
            if problem is None and prefix in owners:
                problem = (
                    f"the prefix {prefix!r} is {owners[prefix]}'s too: a token of one would "
                    "be read as an id of the other"
                )
            if problem is not None:
                errors.append(
                    checks.Error(
                        f"{where}: public_prefix: {problem}",
                        hint="Give each model a prefix of its own ('ord', 'cus'), "
                        "lower-case letters and digits.",
                        obj=field,
                        id="uid_fields.E032",
                    )
                )
                continue
            owners[prefix] = model.__name__
            if not has_keys:
                errors.append(
                    checks.Error(
                        f"{where} has public_prefix={prefix!r}, but UID_FIELDS['PUBLIC_IDS']"
                        "['KEYS'] is not set: its public ids can be neither made nor read",
                        hint="Set UID_FIELDS['PUBLIC_IDS'] = {'KEYS': {1: '<a secret of 16 "
                        "bytes or more, from the environment>'}}.",
                        obj=field,
                        id="uid_fields.E031",
                    )
                )
    return errors
