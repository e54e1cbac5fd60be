"""Model fields whose values are plain ints, UUIDs or strings made by a named generator.

The id exists as soon as the object is constructed (or as soon as its shard key is
known), because Django routes ``save()`` before any field hook runs: an id made in
``pre_save`` would be too late to pick the database. A ``default`` is set (and left
out of migrations) so that Django also knows a new object needs an INSERT, not an
UPDATE first.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Self

from django import forms
from django.apps import apps
from django.core import checks, exceptions
from django.db import models
from django.db.models.expressions import Combinable
from django.db.models.signals import post_init
from django.utils.translation import gettext_lazy as _

from ..ids.generators import DecimalGenerator
from ..ids.layouts import IntLayout, coerce_id
from ..ids.locality import coerce_uuid
from ..ids.parts import IdParts
from ..ids.public import PublicIds
from ..placement import Placement, ShardMap, id_for_new_object
from . import conf
from .columns.functions import NextId
from .columns.public_ids import add_public_id, codec_for

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from typing_extensions import TypeVar

# The fields are generic for type checkers, as django-stubs declares Django's (set type,
# get type): ``order.id`` reads as an int, ``visit.id`` as a UUID. Django's field classes
# take no type arguments at run time, so there subscripting one gives the class itself.
if TYPE_CHECKING:  # a bare UidField (isinstance checks, annotations) is UidField[Any, Any]
    _ST = TypeVar("_ST", contravariant=True, default=Any)
    _GT = TypeVar("_GT", covariant=True, default=Any)
else:
    _ST = _GT = None  # subscripts are dropped at run time (see _Unsubscripted)


class _Unsubscripted:
    """Run-time stand-in for a Django field class used as a generic base."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __getitem__(self, _types: object) -> type:
        return self.cls


if TYPE_CHECKING:
    _Field = models.Field
    _BigIntegerField = models.BigIntegerField
    _UUIDField = models.UUIDField
    _CharField = models.CharField
else:
    _Field = _Unsubscripted(models.Field)
    _BigIntegerField = _Unsubscripted(models.BigIntegerField)
    _UUIDField = _Unsubscripted(models.UUIDField)
    _CharField = _Unsubscripted(models.CharField)

_IntSet = int | str | Combinable

__all__ = [
    "LocalityUUIDField",
    "ShardedBigIntField",
    "SnowflakeField",
    "UidField",
    "UniqIdField",
    "database_made_generators",
]


#: The system checks of a uid field. ``uid_fields.django.checks`` adds its own when the app
#: is ready, so this module needs no import of the checks (which import the fields).
FIELD_CHECKS: list[Callable[[UidField], list[checks.CheckMessage]]] = []


def database_made_generators() -> set[str]:
    """Generators whose ids only a database makes: every field using them has
    ``database_default=True``, so no process makes their ids in Python. Check E016
    skips them, and ``conf.uid_config()`` builds them (to decode and route ids)."""
    used: dict[str, bool] = {}
    for model in apps.get_models():
        for field in model._meta.local_fields:
            if isinstance(field, UidField):
                name = field.generator_name
                used[name] = used.get(name, True) and field.database_default
    return {name for name, only in used.items() if only}


conf.DATABASE_MADE.append(database_made_generators)


class _Default:
    """The field's ``default``: a fresh id, or None until the shard key is known."""

    def __init__(self, field: UidField) -> None:
        self.field = field

    def __call__(self) -> Any:
        field = self.field
        if field.shard_key or field.database_default:
            return None
        return field.keyless_id()


class UidField(_Field[_ST, _GT]):
    """What the id fields share: a named generator, an optional shard map, decoding."""

    if not TYPE_CHECKING:

        def __class_getitem__(cls, *types: Any) -> type[Self]:
            return cls  # generic for type checkers only (see _Unsubscripted)

    kinds: tuple[str, ...] = ()
    default_generator = "default"
    #: What ``contribute_to_class`` put at ``<name>_parts``: the check E010 tells it
    #: from an attribute of the model's own that the decoded parts cannot replace.
    parts_attribute: object = None

    def __init__(
        self,
        *args: Any,
        generator: str | None = None,
        shards: str | None = None,
        shard_key: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.generator_name = generator or self.default_generator
        self.shards_name = shards
        self.shard_key = shard_key
        self.database_default = bool(kwargs.pop("database_default", False))
        self.db_function = kwargs.pop("function", "uid_next_id")
        # Tokens for the public (``obj.public_id``); no database attribute, no migration.
        self.public_prefix: str | None = kwargs.pop("public_prefix", None)
        if self.database_default and _DatabaseDefault is not None:
            kwargs["db_default"] = NextId(self.db_function)  # (E009 explains it on 4.2)
        else:
            kwargs["default"] = _Default(self)
        if kwargs.get("primary_key"):
            kwargs.setdefault("editable", False)
        kwargs.setdefault("blank", True)
        # Derived from the settings once per settings generation (every row asks):
        self._placement: Placement | None = None
        self._placement_generation = -1
        self._shard_map: tuple[int, ShardMap | None] | None = None
        self._keyless_maker: tuple[int, Callable[[], Any]] | None = None
        self._key_attname: str | None = None
        self._key_placer: _KeyPlacer | None = None
        super().__init__(*args, **kwargs)

    # -- settings-backed objects ---------------------------------------------------------
    @property
    def generator(self) -> conf.Generator:
        return conf.get_generator(self.generator_name)

    @property
    def shard_map(self) -> ShardMap | None:
        if self.shards_name is None:
            return None
        cached = self._shard_map
        generation = conf.settings_generation()
        if cached is None or cached[0] != generation:
            built = conf.get_shard_map(self.shards_name, self.generator_name)
            cached = self._shard_map = (generation, built)
        return cached[1]

    @property
    def layout(self) -> IntLayout | None:
        layout = getattr(self.generator, "layout", None)
        return layout if isinstance(layout, IntLayout) else None

    @property
    def placement(self) -> Placement:
        """The core's answer to where rows of this field live (rebuilt when settings change).

        Asked several times for every row written: looked up through the settings once
        per settings generation (``override_settings`` starts a new one)."""
        cached = self._placement
        if cached is not None and self._placement_generation == conf.settings_generation():
            return cached
        return self._build_placement()

    def _build_placement(self) -> Placement:
        generation = conf.settings_generation()
        generator, shard_map = self.generator, self.shard_map
        parent = self.parent_field()
        parent_placement = parent.placement if parent is not None else None
        cached = self._placement
        if (
            cached is None
            or cached.generator is not generator
            or cached.shard_map is not shard_map
            or cached.parent is not parent_placement
        ):
            cached = self._placement = Placement(
                generator,
                shard_map,
                parent=parent_placement,
                name=f"{self.model.__name__}.{self.name}",
                key_name=f"{self.model.__name__}.{self.shard_key}" if self.shard_key else None,
            )
        self._placement_generation = generation
        return cached

    @property
    def public_ids(self) -> PublicIds:
        """The codec of this field's public tokens (``public_prefix``); see public_ids."""
        return codec_for(self)

    def parent_field(self) -> UidField | None:
        """The sharded id field of the row this field's shard key points at, if any."""
        if not self.shard_key:
            return None
        key_field = self.shard_key_field()
        return _sharded_pk(key_field.related_model) if key_field.is_relation else None

    # -- generation ----------------------------------------------------------------------
    def keyless_id(self) -> Any:
        """A new id for a row without a shard key, at the cost of the generator's call:
        every model instance built asks for one, so the maker is looked up once per
        settings generation instead of through the settings each time."""
        made = self._keyless_maker
        generation = conf.settings_generation()
        if made is None or made[0] != generation:
            made = self._keyless_maker = (generation, self.placement.keyless_maker())
        return made[1]()

    def key_placer(self) -> _KeyPlacer:
        """What the construction hook needs for every object built, per settings
        generation: the placement, its ``key_placer()`` and the key's attribute."""
        cached = self._key_placer
        generation = conf.settings_generation()
        if cached is None or cached.generation != generation:
            placement = self.placement
            cached = self._key_placer = _KeyPlacer(
                generation, placement, placement.key_placer(), self.shard_key_attname()
            )
        return cached

    def generate(self, instance: models.Model | None) -> Any:
        """A new id for ``instance``; None while its shard key is unknown."""
        if not self.shard_key:
            return self.keyless_id()
        if instance is None:
            return None
        key = self.shard_key_value(instance)
        if key is None:
            return None
        return self.placement.new_id(key)

    def shard_key_field(self) -> models.Field:  # type: ignore[type-arg]
        assert self.shard_key is not None
        return self.model._meta.get_field(self.shard_key)  # type: ignore[return-value]

    def shard_key_attname(self) -> str:
        """The attribute holding the shard key's raw value (``owner_id``), looked up once."""
        name = self._key_attname
        if name is None:
            name = self._key_attname = self.shard_key_field().attname
        return name

    def shard_key_value(self, instance: models.Model) -> Any:
        """The raw value of an instance's shard key (a parent's id for a foreign key)."""
        return getattr(instance, self.shard_key_attname())

    def logical_shard_for(self, instance: models.Model) -> int | None:
        """The logical shard an instance's shard key picks, or None if the key is unset."""
        return self.logical_shard_for_key(self.shard_key_value(instance))

    def logical_shard_for_key(self, key: Any) -> int | None:
        """The logical shard a shard key value picks (None for no key).

        ``ShardKeyError`` (a ``ValueError``) for a value no shard can be picked by.
        """
        if isinstance(key, models.Model):
            key = key.pk
        if key is None:
            return None
        return self.placement.logical_shard_for_key(key)

    def databases_for_key(self, key: Any) -> tuple[str, ...] | None:
        """Every database rows with this shard key can be on (None for no key): one,
        or two when the key's own database is closed to new keys."""
        if isinstance(key, models.Model):
            key = key.pk
        if key is None:
            return None
        return self.placement.databases_for_key(key)

    def fill(self, instance: models.Model) -> Any:
        """Make sure ``instance`` has an id (when it can have one) and return it.

        The core decides (``uid_fields.placement.id_for_new_object``), as it does for
        SQLAlchemy: a new object without an id gets one from its shard key (or by the
        keyless choice); an id this field made for a key that has changed since is made
        again, so the row follows its key; an id the caller gave is kept when its key
        agrees, and refused with ``WrongShardError`` when not (stored on the id's
        database, ``filter(owner_id=...)`` would never find it), unless inside
        ``allow_off_shard_writes()``. A stored row's id is never replaced.
        """
        value = getattr(instance, self.attname)
        missing = value is None or _is_db_default(value)
        if missing and self.database_default:
            return value  # the database makes it
        if not missing and (not self.shard_key or not instance._state.adding):
            return value  # no key for it to disagree with, or a stored row's
        placement = self.placement
        key = self.shard_key_value(instance) if self.shard_key else None
        entry = None if missing else made_entry(instance, self.attname, value)
        chosen = id_for_new_object(
            placement,
            None if missing else value,
            key,
            keyed=bool(self.shard_key),
            ours=entry is not None,
            made_for_key=made_for_key(entry, key, placement),
            database_made=self.database_default,
            what=type(instance).__name__,
            key_name=self.shard_key_attname() if self.shard_key else "shard key",
        )
        if chosen.made:
            record_made(instance, self.attname, Made(chosen.value, key, placement))
        return chosen.value

    # -- Django hooks --------------------------------------------------------------------
    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        if add and not self.database_default:
            value = model_instance.__dict__.get(self.attname)
            if type(value) is int:
                return value  # filled at construction (bulk inserts ask once per row)
            if value is not None and not _is_db_default(value):
                return value  # filled at construction: the usual case, once per row in bulk
            if value is None and self.null and not self.primary_key:
                return None  # set to None on purpose (the default made an id): NULL
            return self.fill(model_instance)
        return super().pre_save(model_instance, add)

    def get_pk_value_on_save(self, instance: models.Model) -> Any:
        if self.database_default:
            return super().get_pk_value_on_save(instance)
        return self.fill(instance)

    def contribute_to_class(
        self, cls: type[models.Model], name: str, private_only: bool = False
    ) -> None:
        super().contribute_to_class(cls, name, private_only=private_only)
        parts_name = f"{name}_parts"
        declared = cls.__dict__.get(parts_name)
        if isinstance(declared, IdParts):  # id_parts = IdParts(SnowflakeParts): bind it
            self.parts_attribute = declared.bind(self.attname, self._decode_or_none, None)
            setattr(cls, parts_name, self.parts_attribute)
        elif parts_name not in cls.__dict__:
            self.parts_attribute = _PartsDescriptor(self)
            setattr(cls, parts_name, self.parts_attribute)
        add_public_id(self, cls, name)
        if self.shard_key and not cls._meta.abstract:
            post_init.connect(
                _fill_after_init,
                sender=cls,
                weak=False,
                dispatch_uid=f"uid_fields:{cls._meta.label}.{name}",
            )

    def decode(self, value: Any) -> Any:
        """The decoded parts of an id of this field (``.datetime`` and the rest)."""
        return self.generator.decompose(value)

    def _decode_or_none(self, value: Any) -> Any:
        """``decode``, and None for the database default a new row holds before its
        INSERT (as ``<field>_parts`` is None while the id is)."""
        return None if _is_db_default(value) else self.decode(value)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        path = (
            f"uid_fields.django.{type(self).__name__}"
            if path.startswith("uid_fields.django.fields.")
            else path
        )
        kwargs.pop("default", None)
        kwargs.pop("db_default", None)
        if kwargs.get("blank") is True:
            del kwargs["blank"]
        if self.primary_key and kwargs.get("editable") is False:
            del kwargs["editable"]
        if self.generator_name != self.default_generator:
            kwargs["generator"] = self.generator_name
        for key in ("shards", "shard_key"):
            value = getattr(self, "shards_name" if key == "shards" else key)
            if value is not None:
                kwargs[key] = value
        if self.database_default:
            kwargs["database_default"] = True
        if self.db_function != "uid_next_id":
            kwargs["function"] = self.db_function
        return name, path, args, kwargs

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [*super().check(**kwargs), *(m for c in FIELD_CHECKS for m in c(self))]


try:  # Django 5.0+: the placeholder an unsaved object holds for a db_default column
    from django.db.models.expressions import DatabaseDefault as _DatabaseDefault
except ImportError:  # Django 4.2 has no db_default
    _DatabaseDefault = None  # type: ignore[assignment, misc]


def _is_db_default(value: Any) -> bool:
    return _DatabaseDefault is not None and isinstance(value, _DatabaseDefault)


def _sharded_pk(model: Any) -> UidField | None:
    if model is None:
        return None
    pk = model._meta.pk
    return pk if isinstance(pk, UidField) and pk.shards_name is not None else None


class Made(NamedTuple):
    """An id a uid field made for an unsaved object, and what it was made for: the shard
    key, the placement and (when known) the database. While the object still holds the
    id and neither the key nor the settings changed, the id fits its key by
    construction: no later step (routing, ``bulk_create``) places the key again."""

    value: Any
    key: Any = None
    placement: Placement | None = None
    database: str | None = None


def _made(instance: models.Model) -> dict[str, Made]:
    """The ids uid fields made for this (unsaved) object, by attribute name."""
    state = instance._state
    made: dict[str, Made] | None = getattr(state, "uid_made", None)
    if made is None:
        made = state.uid_made = {}  # type: ignore[attr-defined]
    return made


def record_made(instance: models.Model, attname: str, made: Made) -> None:
    """Give ``instance`` the id a uid field made for it, and remember what for."""
    setattr(instance, attname, made.value)
    _made(instance)[attname] = made


def made_entry(instance: models.Model, attname: str, value: Any) -> Made | None:
    """What the field made the id ``instance`` holds (``value``) for; None when the
    field did not make it (the caller chose it)."""
    made: dict[str, Made] | None = getattr(instance._state, "uid_made", None)
    entry = None if made is None else made.get(attname)
    return entry if entry is not None and entry.value == value else None


def made_for_key(entry: Made | None, key: Any, placement: Placement) -> bool:
    """Whether an id the field made was made by ``placement`` for ``key`` (unchanged)."""
    return (
        entry is not None and entry.placement is placement and key is not None and entry.key == key
    )


class _KeyPlacer(NamedTuple):
    generation: int
    placement: Placement
    place: Callable[[object], tuple[Any, str | None]]
    key_attname: str


def _fill_after_init(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    # Runs for every object of a keyed model built, from the database too: the early
    # exits come first, and everything looked up per row is kept per settings generation.
    pk = sender._meta.pk
    attname = pk.attname
    if getattr(instance, attname) is not None or not isinstance(pk, UidField):
        return
    if not pk.shard_key:
        value = pk.generate(instance)
        if value is not None:
            record_made(instance, attname, Made(value))
        return
    placer = pk._key_placer
    if placer is None or placer.generation != conf.settings_generation():
        placer = pk.key_placer()
    key = getattr(instance, placer.key_attname)
    if key is not None:  # else made when the key is known (fill)
        value, database = placer.place(key)
        setattr(instance, attname, value)
        state = instance._state
        made: dict[str, Made] | None = getattr(state, "uid_made", None)
        # tuple.__new__: a NamedTuple's own __new__ is a Python function, once per row
        entry = _new_tuple(Made, (value, key, placer.placement, database))
        if made is None:
            state.uid_made = {attname: entry}  # type: ignore[attr-defined]
        else:
            made[attname] = entry


_new_tuple = tuple.__new__


class _PartsDescriptor:
    """``obj.<field>_parts``: the decoded value, computed from the plain attribute."""

    def __init__(self, field: UidField) -> None:
        self.field = field

    def __get__(self, instance: models.Model | None, owner: type) -> Any:
        if instance is None:
            return self
        value = getattr(instance, self.field.attname)
        if value is None or _is_db_default(value):
            return None
        return self.field.decode(value)


class IdFormField(forms.CharField):
    """A text input for 64-bit ids: no number spinner, no thousand separators."""

    default_error_messages = {"invalid": _("Enter a valid id.")}

    def __init__(self, *, coerce: Callable[[Any], int], **kwargs: Any) -> None:
        self.coerce = coerce
        kwargs.pop("max_length", None)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> int | None:  # type: ignore[override]
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return self.coerce(value)
        except (TypeError, ValueError):
            raise exceptions.ValidationError(
                self.error_messages["invalid"], code="invalid"
            ) from None

    def prepare_value(self, value: Any) -> Any:
        return "" if value is None else str(value)


_PLAIN_INT_VENDORS = frozenset({"postgresql", "sqlite", "mysql"})


class _IntIdField(UidField[_IntSet, int], _BigIntegerField[_IntSet, int]):
    description = _("64-bit id")

    def get_internal_type(self) -> str:
        # Django asks for every value it binds: answer from the generator already built
        # (that cache is cleared when the setting changes) before reading the settings.
        built = conf._generators.get(self.generator_name)
        if built is not None:
            decimal = isinstance(built, DecimalGenerator)
        else:
            config = conf.conf.GENERATORS.get(self.generator_name, {})
            decimal = config.get("kind") == "decimal"
        # 20 digits need unsigned on MySQL/MariaDB
        return "PositiveBigIntegerField" if decimal else "BigIntegerField"

    def get_db_prep_value(
        self, value: Any, connection: BaseDatabaseWrapper, prepared: bool = False
    ) -> Any:
        # A plain int id is already what these backends bind: skip Django's per-value
        # conversion chain, which bulk inserts would otherwise run for every row.
        if type(value) is int and connection.vendor in _PLAIN_INT_VENDORS:
            return value
        return super().get_db_prep_value(value, connection, prepared)

    def rel_db_type(self, connection: BaseDatabaseWrapper) -> Any:
        return (
            models.PositiveBigIntegerField().db_type(connection)
            if (self.get_internal_type() == "PositiveBigIntegerField")
            else models.BigIntegerField().db_type(connection)
        )

    def _coerce(self, value: Any) -> int:
        layout = self.layout
        if layout is not None:
            return layout.coerce(value)
        return coerce_id(value, max_value=2**64 - 1)  # ASCII digits only, never "١٢"

    def to_python(self, value: Any) -> int | None:
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        try:
            return self._coerce(value)
        except (TypeError, ValueError):
            raise exceptions.ValidationError(
                self.error_messages["invalid"], code="invalid", params={"value": value}
            ) from None

    def formfield(self, **kwargs: Any) -> Any:
        return super(models.BigIntegerField, self).formfield(
            **{"form_class": IdFormField, "coerce": self._coerce, **kwargs}
        )


class SnowflakeField(_IntIdField):
    """A snowflake (or decimal) id; routes by the mixed modulo or a named node field."""

    kinds = ("snowflake", "decimal")


class ShardedBigIntField(_IntIdField):
    """An Instagram-style id that carries its logical shard."""

    kinds = ("sharded",)


class LocalityUUIDField(
    UidField[str | uuid.UUID, uuid.UUID], _UUIDField[str | uuid.UUID, uuid.UUID]
):
    """A Groupon locality UUID, stored as a plain ``uuid.UUID``."""

    kinds = ("locality",)

    def to_python(self, value: Any) -> uuid.UUID | None:
        """The core's rule for a UUID id (``coerce_uuid``), as SQLAlchemy's column binds."""
        if value is None:
            return None
        try:
            return coerce_uuid(value)
        except (TypeError, ValueError):
            raise exceptions.ValidationError(
                self.error_messages["invalid"], code="invalid", params={"value": value}
            ) from None


class UniqIdField(UidField[str | Combinable, str], _CharField[str | Combinable, str]):
    """A shard-prefixed PHP uniqid (18 characters) that routes by its shard digit."""

    kinds = ("uniqid",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 18)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Any:
        name, path, args, kwargs = super().deconstruct()
        if kwargs.get("max_length") == 18:
            del kwargs["max_length"]
        return name, path, args, kwargs

    def validate(self, value: Any, model_instance: models.Model | None) -> None:
        # Checked here, not in to_python: lookups such as __startswith take fragments.
        super().validate(value, model_instance)
        if value in self.empty_values:
            return
        try:
            self.generator.decompose(value)
        except (TypeError, ValueError, LookupError) as exc:
            raise exceptions.ValidationError(str(exc), code="invalid") from None
