"""System checks: configuration errors found at ``manage.py check``, never at import.

They read the settings dicts and nothing else: no generator is built, no lease is
claimed, no database or Redis server is asked (``migrate`` runs them before the lease
table exists). The one exception, W003, reads the ``django_migrations`` tables, and only
when Django hands it databases (``check --database``, ``migrate``'s own pre-check).
Problems of the dict itself come from the core validator (``uid_fields.config.validate``),
whose codes are the ids here.

Ids: E001 unknown generator, E002 unknown shard map, E003 shard map alias missing from
DATABASES, E004 invalid shard map, E005 invalid generator, E006 generator kind does not
fit the field, E007 sharded (or follower) model whose default manager is not sharded,
E008 unknown shard key, E009 database-side ids on a backend without them, E010 the ``<name>_parts``
attribute is taken, E011 a foreign key between rows that may live on different
databases, E012 two generators that would issue the same ids, E013 an unknown key in
UID_FIELDS, E014 a value of the wrong type or shape, E015 a many-to-many relation of
rows that live on shards, E016 a sharded generator whose Python-made ids would collide
across processes, E017 an on_delete that would have to run across databases, E018 a
``function=`` that is not an SQL identifier, E019 a generic relation touching rows on
shards, E030 public-id keys that cannot be used (a secret under 16 bytes, a version
outside 0-31), E031 a ``public_prefix`` without keys, E032 a malformed, unsupported or
shared ``public_prefix``; W001 a layout exhausted within five years, W002 a unique set the
shard databases hold once per shard only, W003 a shard database behind ``default`` (only
when the check is given databases: see ``check_shard_migrations``), W019 Django's own
GenericForeignKey (which cannot point at rows on shards) in a project with rows on shards.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import django
from django.apps import apps
from django.conf import settings
from django.core import checks
from django.db import DEFAULT_DB_ALIAS, DatabaseError

from .. import config as core
from ..config import Problem
from ..config.problems import key_names, key_text
from ..errors import ConfigurationError
from ..ids.public import prefix_problem
from ..placement.uniqueness import enforced_by_databases
from ..sql.postgres import sql_identifier
from .columns.public_ids import kind_of
from .compat import queryset_class
from .conf import conf
from .fields import FIELD_CHECKS, UidField, database_made_generators
from .ops.migration_state import applied_on_default, lag, migrated_databases, names
from .query.query import ShardedQuerySet
from .routing import colocated, parent_link, relation_of, sharded_pk
from .unique import all_unique_sets, placing_fields

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
    # The field's own attribute (undeclared, or a declared IdParts it bound) is no clash.
    if parts is not None and parts is not field.parts_attribute:
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
    """Foreign-key constraints between rows that may live on different databases (E011),
    many-to-many relations whose link rows cannot live with both sides (E015), and
    on_delete only a database could run across databases (E017)."""
    errors: list[checks.CheckMessage] = []
    models = list(models)
    shards_in_use = any(_on_shards(model) for model in models)
    for model in models:
        errors.extend(_generic_relation_errors(model, shards_in_use))
        for field in model._meta.local_many_to_many:
            if not _many_to_many_stays_together(model, field):
                errors.append(
                    checks.Error(
                        f"{model._meta.label}.{field.name} is a many-to-many relation of rows "
                        "that may live on different databases: its join table would sit on "
                        "one database while the rows it links sit on others, so add() could "
                        "fail and all(), count() and prefetch_related() would miss rows",
                        hint="Link rows of one family (models whose shard keys lead to the "
                        "same root) only; across families declare the link as a model of its "
                        "own that lives with the source row (a ShardedBigIntField with "
                        "shard_key= the source, and a ForeignKey to the target with "
                        "db_constraint=False), and read the targets by id (in_bulk(), which "
                        "asks each target's shard).",
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
            if not relation_of(field).same_database:
                errors.append(
                    checks.Error(
                        f"{model._meta.label}.{field.name} points at {target._meta.label}, "
                        "but the two rows may live on different databases, where no "
                        "foreign-key constraint can hold",
                        hint="Make the two models one family (a ShardedBigIntField whose "
                        "shard_key leads to the same root model), or set db_constraint=False "
                        "for a reference across shards.",
                        obj=field,
                        id="uid_fields.E011",
                    )
                )
    return errors


def _many_to_many_stays_together(model: Any, field: Any) -> bool:
    """Whether the link rows of a many-to-many relation live with the rows they link.

    Between two ordinary models, on their database; inside one family, on its root row's
    shard (Django's automatic table follows its source, an explicit ``through`` model
    must be of the family itself).
    """
    target = field.related_model
    if not (_on_shards(model) or _on_shards(target)):
        return True
    through: Any = field.remote_field.through
    meta = getattr(through, "_meta", None)
    if meta is None:
        return False  # not resolved: Django's own checks say so
    if meta.auto_created:
        return parent_link(through) is not None
    return _on_shards(through) and colocated(through, model) and colocated(through, target)


def _generic_relation_errors(model: Any, shards_in_use: bool) -> list[checks.CheckMessage]:
    """E019: generic relations touching rows that live on shards; W019: Django's own
    generic foreign key on an ordinary model of a project with rows on shards.

    Django reads a generic foreign key's content type on the database of the row it is
    given, and a ``GenericRelation`` joins (and its deletes collect) across the two tables
    on one database: with rows on shards, one side is never there.
    ``uid_fields.django.generic.GenericForeignKey`` reads content types on ``default``
    and each target on its own shard, so it may point at rows on shards from an ordinary
    model; it cannot say in advance what a plain one will point at, hence a warning.
    """
    errors: list[checks.CheckMessage] = []
    on_shards = _on_shards(model)
    for field in model._meta.private_fields:
        kind = type(field).__name__
        if kind == "GenericForeignKey" and on_shards:
            errors.append(
                checks.Error(
                    f"{model._meta.label}.{field.name} is a GenericForeignKey on rows that "
                    "live on shards: Django reads the content type and the object on the "
                    "holding row's database, where one side is not",
                    hint="Store the target's model label and id in plain fields and read "
                    "the target with Model.objects.get(pk=...), which asks the id's shard; "
                    "or keep the generic key on an ordinary model on default, with "
                    "uid_fields.django.generic.GenericForeignKey.",
                    obj=field,
                    id="uid_fields.E019",
                )
            )
        elif kind == "GenericForeignKey" and shards_in_use and not _routed_generic(field):
            errors.append(
                checks.Warning(
                    f"{model._meta.label}.{field.name} is Django's GenericForeignKey: "
                    "pointed at a row on a shard, it reads django_content_type on that "
                    "shard (there is none) and the row on this model's database",
                    hint="Use uid_fields.django.generic.GenericForeignKey (a drop-in: "
                    "content types from default, each target from its own shard), or "
                    "silence uid_fields.W019 if it never points at rows on shards.",
                    obj=field,
                    id="uid_fields.W019",
                )
            )
        elif kind == "GenericRelation" and (on_shards or _on_shards(field.related_model)):
            errors.append(_generic_relation_refused(model, field))
    return errors


def _routed_generic(field: Any) -> bool:
    return bool(getattr(field, "uid_fields_routed", False))


def _generic_relation_refused(model: Any, field: Any) -> checks.CheckMessage:
    """E019 for a ``GenericRelation`` with rows on shards on either side."""
    related = field.related_model
    holder = related.__name__
    ct, fk = field.content_type_field_name, field.object_id_field_name
    return checks.Error(
        f"{model._meta.label}.{field.name} is a GenericRelation between rows that live on "
        f"different databases ({model.__name__} and {holder}): Django reads it, and "
        f"collects the {holder} rows to delete with a {model.__name__}, on the "
        f"{model.__name__}'s database, where they are not",
        hint=f"Remove it and query the {holder} rows on their own database: "
        f"{holder}.objects.filter({ct}=ContentType.objects.get_for_model({model.__name__}), "
        f"{fk}=obj.pk); delete them yourself when the {model.__name__} goes.",
        obj=field,
        id="uid_fields.E019",
    )


def _on_delete_errors(model: Any, field: Any, target: Any) -> list[checks.CheckMessage]:
    """E017: an on_delete that only a database can run, on a relation across databases.

    Django's on_delete handlers run in Python, and a delete asks each database that can
    hold referring rows (``uid_fields.django.relations.deletion``). The database-level ones
    (``DB_CASCADE``, ``DB_SET_NULL``, ``DB_SET_DEFAULT`` of recent Django) are an ``ON
    DELETE`` clause of a foreign-key constraint, and no constraint holds across
    databases.
    """
    if relation_of(field).same_database:
        return []
    on_delete = getattr(getattr(field, "remote_field", None), "on_delete", None)
    if on_delete is None or not getattr(on_delete, "__name__", "").startswith("DB_"):
        return []
    return [
        checks.Error(
            f"{model._meta.label}.{field.name} points at {target._meta.label} across "
            f"databases with on_delete={on_delete.__name__}: the database would run it, "
            f"but deleting a {target.__name__} cannot reach {model.__name__} rows on "
            "another database",
            hint="Use the Python handler (models.CASCADE, SET_NULL, SET_DEFAULT, PROTECT, "
            "RESTRICT): uid_fields runs it on every database holding referring rows. Or "
            "make the two models one family (co-locate the rows with a shard_key).",
            obj=field,
            id="uid_fields.E017",
        )
    ]


def _on_shards(model: Any) -> bool:
    return sharded_pk(model) is not None or parent_link(model) is not None


def manager_errors(models: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for model in models:
        if not _on_shards(model):
            continue
        manager = model._default_manager
        if not issubclass(queryset_class(manager), ShardedQuerySet):
            link = parent_link(model)
            what, calls = (
                ("sharded by its id", "get(pk=...) and create()")
                if link is None
                else (f"placed by its {link.name}", f"filter({link.name}=...) and create()")
            )
            errors.append(
                checks.Error(
                    f"{model._meta.label} is {what}, but its default manager "
                    f"{manager.name!r} is not a ShardedManager, so {calls} "
                    "would not be routed",
                    hint="Set objects = ShardedManager() (uid_fields.django.ShardedManager).",
                    obj=model,
                    id="uid_fields.E007",
                )
            )
    return errors


@checks.register(checks.Tags.models)
def check_unique(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    return unique_warnings(apps.get_models())


def unique_warnings(models: Any) -> list[checks.CheckMessage]:
    """W002: unique sets of rows on shards that the databases hold once per shard only.

    A unique index covers its own database. A set that includes the shard key or the
    id (or the key to the parent a row follows) is held whole by one database, since
    rows that could collide share it; any other set can hold each value once on every
    shard. Validation reads every shard for it (``uid_fields.django.unique``), which
    cannot stop two writes at the same time: the message says so, and the fix.
    """
    found: list[checks.CheckMessage] = []
    for model in models:
        count = len(_map_aliases(model))
        if count < 2:
            continue
        placing = placing_fields(model)
        sets = all_unique_sets(model)
        enforced = [s for s in sets if enforced_by_databases(s, placing, count)]
        held = (
            f" The databases enforce {', '.join(map(str, enforced))}: they include the "
            "shard key or the id."
            if enforced
            else ""
        )
        for unique in sets:
            if unique in enforced:
                continue
            found.append(
                checks.Warning(
                    f"{unique} of {model.__name__} ({unique.label}) holds each value once "
                    f"per shard: its rows live on {count} databases, a unique index covers "
                    "one, and these fields include neither the shard key nor the id. "
                    "full_clean(), ModelForms, the admin and DRF's validators read every "
                    "shard for it, but two writes at the same time can both succeed." + held,
                    hint="Include the shard key in the set (unique per key), or claim each "
                    "value in a key table on 'default' written with the row in one "
                    "sharded_atomic() (docs: uniqueness). Silence uid_fields.W002 where "
                    "validation is enough.",
                    obj=model,
                    id="uid_fields.W002",
                )
            )
    return found


def _map_aliases(model: Any) -> list[str]:
    """The databases that own ``model``'s rows (an incoming one holds none yet), from
    the settings dict alone."""
    field = sharded_pk(model)
    if field is None:
        link = parent_link(model)
        field = sharded_pk(link.related_model) if link is not None else None
    name = field.shards_name if field is not None else None
    entry = conf.SHARDS.get(name) if name is not None else None
    if not isinstance(entry, Mapping):
        return []  # no such map: E002
    return list(dict.fromkeys(core.map_databases(entry) or ()))  # None: malformed, E004


@checks.register(checks.Tags.database)
def check_shard_migrations(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """W003: a shard database lacks migrations that ``default`` has applied.

    Plain ``manage.py migrate`` migrates ``default`` only. Only a check given databases
    reads them (Django's rule for checks that do I/O): plain ``manage.py check`` asks
    nothing; ``check --database default`` compares every shard database with
    ``default``, ``check --database shard_2`` (and ``migrate --database shard_2``'s own
    pre-check) that shard. A warning, never an error: ``migrate`` refuses to run on
    errors, and running it is the fix.
    """
    if not databases:
        return []
    try:
        migrated = migrated_databases()
    except ConfigurationError:
        return []  # a malformed map: E004/E014 say so, and no shard can be compared
    shards = [alias for alias in migrated if alias != DEFAULT_DB_ALIAS]
    if DEFAULT_DB_ALIAS not in databases:
        shards = [alias for alias in shards if alias in databases]
    if not shards:
        return []
    hint = (
        "Plain `manage.py migrate` migrates default only: run `manage.py uid_fields "
        "migrate-all` (or `manage.py migrate --database <shard>`)."
    )
    messages: list[checks.CheckMessage] = []
    try:
        reference = applied_on_default()
    except DatabaseError as exc:
        return [checks.Warning(f"cannot read default's migrations: {exc}", id="uid_fields.W003")]
    for alias in shards:
        try:
            behind = lag(alias, reference).behind_default
        except DatabaseError as exc:
            messages.append(
                checks.Warning(
                    f"cannot read the migrations applied on {alias}: {exc}",
                    id="uid_fields.W003",
                )
            )
            continue
        if behind:
            messages.append(
                checks.Warning(
                    f"shard database {alias!r} lacks {len(behind)} migration(s) applied on "
                    f"default: {names(behind)}",
                    hint=hint,
                    id="uid_fields.W003",
                )
            )
    return messages


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
