"""Admin for sharded models: a shard selector, decoded times, views routed by the id.

Django's admin knows one database. Here the changelist reads the shard chosen in its
"shard" filter (the first one by default, or "All shards"); a search reads every shard
unless a shard was chosen; change, delete and history views find the object on the
shard its id names, because an id filter routes itself.
"""

from __future__ import annotations

from contextlib import ExitStack, suppress
from datetime import datetime, timedelta
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import NestedObjects
from django.contrib.admin.views.main import SEARCH_VAR, ChangeList
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from .._internal.timeutil import describe_ms
from ..errors import PublicIdError
from . import compat
from .fields import UidField
from .relations.deletion import ShardedCollector, also_install
from .routing import colocated, pin_shard, placing_field, sharded_pk

__all__ = [
    "ALL_SHARDS",
    "CreatedFilter",
    "ShardFilter",
    "ShardedAdminMixin",
    "ShardedChangeList",
    "ShardedModelAdmin",
    "ShardedNestedObjects",
]

SHARD_PARAM = "shard"
#: The shard filter's value for a changelist of every shard (``?shard=__all__``).
ALL_SHARDS = "__all__"
#: The "created" column of an id whose time no datetime holds (past the year 9999).
OUT_OF_RANGE = _("out of range")


def _uid_pk(model: type[models.Model]) -> UidField | None:
    pk = model._meta.pk
    return pk if isinstance(pk, UidField) else None


class ShardFilter(admin.SimpleListFilter):
    """Points the changelist at one shard database (the first by default), or at every
    shard ("All shards", also what a search without a chosen shard reads)."""

    title = _("shard")
    parameter_name = SHARD_PARAM

    def __init__(self, request: HttpRequest, params: Any, model: Any, model_admin: Any) -> None:
        super().__init__(request, params, model, model_admin)
        self.shown = model_admin.selected_shard(request) or ALL_SHARDS

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        aliases = [(alias, alias) for alias in model_admin.shard_aliases()]
        return [(ALL_SHARDS, _("All shards")), *aliases]

    def value(self) -> Any:
        return self.shown

    def choices(self, changelist: Any) -> Any:
        current = self.value()
        for lookup, title in self.lookup_choices:
            yield {
                "selected": current == str(lookup),
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        return queryset  # ShardedAdminMixin.get_queryset already pinned the shard


class CreatedFilter(admin.SimpleListFilter):
    """Time ranges read from the id itself (``id__time__gte``): no date column needed."""

    title = _("created")
    parameter_name = "created"
    ranges = {
        "1h": (_("Past hour"), timedelta(hours=1)),
        "24h": (_("Past 24 hours"), timedelta(days=1)),
        "7d": (_("Past 7 days"), timedelta(days=7)),
        "30d": (_("Past 30 days"), timedelta(days=30)),
        "365d": (_("Past year"), timedelta(days=365)),
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [(key, label) for key, (label, _span) in self.ranges.items()]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        choice = self.ranges.get(self.value() or "")
        if choice is None:
            return queryset
        pk = queryset.model._meta.pk
        return queryset.filter(**{f"{pk.name}__time__gte": timezone.now() - choice[1]})


class ShardedAdminMixin:
    """Shard-aware admin behaviour for a model whose primary key is a uid field."""

    model: type[models.Model]
    parts_label = _("decoded id")

    # -- shards --------------------------------------------------------------------------
    def shard_aliases(self) -> tuple[str, ...]:
        """The databases of the model's rows: its shard map's, or a follower's parent's."""
        field = placing_field(self.model)
        if field is None or field.shard_map is None:
            return ()
        return field.shard_map.databases

    def selected_shard(self, request: HttpRequest) -> str | None:
        """The one shard the changelist shows, or None for every shard.

        The shard its filter names; every shard for "All shards", and for a search that
        names no shard (a match may be on any of them, and "0 results" must mean none
        anywhere); else the first shard.
        """
        aliases = self.shard_aliases()
        if not aliases:
            return None
        chosen = request.GET.get(SHARD_PARAM)
        if chosen in aliases:
            return chosen
        if chosen == ALL_SHARDS or self._searches(request):
            return None
        return aliases[0]

    def _searches(self, request: HttpRequest) -> bool:
        return bool(request.GET.get(SEARCH_VAR)) and bool(self.get_search_fields(request))  # type: ignore[attr-defined]

    def _is_changelist(self, request: HttpRequest) -> bool:
        match = getattr(request, "resolver_match", None)
        return bool(match and match.url_name and match.url_name.endswith("_changelist"))

    def get_queryset(self, request: HttpRequest) -> Any:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        if not self.shard_aliases():
            return queryset
        alias = self.selected_shard(request) if self._is_changelist(request) else None
        if alias is not None:
            return queryset.using(alias)
        # Every shard, merged: the changelist of all shards (and its search), autocomplete,
        # raw-id lookups, choices.
        return queryset.on_all_shards()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> Any:
        return ShardedChangeList

    def get_sortable_by(self, request: HttpRequest) -> Any:
        """Columns a changelist of every shard can sort by: those a merge of the shards'
        rows can repeat (a field of the model, not a related path or an expression)."""
        sortable = super().get_sortable_by(request)  # type: ignore[misc]
        if not self.shard_aliases() or not self._is_changelist(request):
            return sortable
        if self.selected_shard(request) is not None:
            return sortable
        return [name for name in sortable if _merges(self.model, name, self)]

    def get_list_filter(self, request: HttpRequest) -> Any:
        filters = list(super().get_list_filter(request))  # type: ignore[misc]
        extra: list[Any] = []
        if self.shard_aliases() and ShardFilter not in filters:
            extra.append(ShardFilter)
        if _has_time(self.model) and CreatedFilter not in filters:
            extra.append(CreatedFilter)
        return [*extra, *filters]

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        """The object on the shard its id names; None (the admin's 404) for a bad id."""
        field = _uid_pk(self.model)
        if field is None or from_field is not None:
            return super().get_object(request, object_id, from_field)  # type: ignore[misc]
        try:
            value = field.to_python(object_id)
        except ValidationError:
            return None
        queryset = self.get_queryset(request)
        try:
            return queryset.get(pk=value)
        except (self.model.DoesNotExist, ValidationError, ValueError):
            return None

    # -- views: each runs its transaction on the shard it works on ----------------------
    def _object_shard(self, object_id: str | None) -> str | None:
        field = sharded_pk(self.model)
        if field is None or field.shard_map is None or object_id is None:
            return self._follower_shard(object_id)
        try:
            return field.shard_map.database_for(field.to_python(object_id))
        except (ValidationError, TypeError, ValueError):
            return None

    def _follower_shard(self, object_id: str | None) -> str | None:
        """Where a follower row is: its own id names no shard, so every shard is asked."""
        pk = _uid_pk(self.model)
        if pk is None or object_id is None or not self.shard_aliases():
            return None
        try:
            value = pk.to_python(object_id)
        except ValidationError:
            return None
        rows = self.model._default_manager.using(None).filter(pk=value)
        found = rows.first()
        return None if found is None else found._state.db

    def _on_shard(self, request: HttpRequest, object_id: str | None, view: Any) -> HttpResponse:
        aliases = self.shard_aliases()
        if not aliases:
            return view()  # type: ignore[no-any-return]
        alias = self._object_shard(object_id)
        request.uid_object_shard = alias  # type: ignore[attr-defined]  # for related choices
        with ExitStack() as stack:
            if object_id is None and request.method == "POST":
                # A new object: its shard is known only once the form builds it.
                for each in aliases:
                    stack.enter_context(transaction.atomic(using=each))
            pinned = alias or self.selected_shard(request) or aliases[0]
            for model in (self.model, *self._inline_models_with_it()):
                stack.enter_context(pin_shard(model, pinned))
            return view()  # type: ignore[no-any-return]

    def _inline_models_with_it(self) -> list[type[models.Model]]:
        """Inline models whose rows live on their parent's database (co-located children
        and followers): Django asks the router about them without naming a row (an
        inline row's delete check), and the answer is the parent's shard."""
        inlines = getattr(self, "inlines", ())
        return [i.model for i in inlines if colocated(i.model, self.model)]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        return self._on_shard(
            request,
            None,
            lambda: super(ShardedAdminMixin, self).changelist_view(request, extra_context),  # type: ignore[misc]
        )

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: Any = None,
    ) -> HttpResponse:
        return self._on_shard(
            request,
            object_id,
            lambda: super(ShardedAdminMixin, self).changeform_view(  # type: ignore[misc]
                request, object_id, form_url, extra_context
            ),
        )

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        return self._on_shard(
            request,
            object_id,
            lambda: super(ShardedAdminMixin, self).delete_view(request, object_id, extra_context),  # type: ignore[misc]
        )

    def carried_shard(self, request: HttpRequest) -> str | None:
        """The shard a filtered changelist's "Add" link carries (``_changelist_filters``)."""
        carried = QueryDict(request.GET.get("_changelist_filters", "")).get(SHARD_PARAM)
        return carried if carried in self.shard_aliases() else None

    def _related_choices(self, db_field: Any, request: HttpRequest, kwargs: dict[str, Any]) -> None:
        related = db_field.remote_field.model
        if "queryset" in kwargs or sharded_pk(related) is None:
            return
        # The edited object's shard, or the shard the list was filtered to; an add view
        # without a filter offers every shard (the pinned default shard is no choice).
        alias = getattr(request, "uid_object_shard", None) or self.carried_shard(request)
        if alias is not None and colocated(self.model, related):
            # Only rows on this object's shard (or the shard the list was filtered to)
            # can be related to it.
            kwargs["queryset"] = related._default_manager.using(alias)
            kwargs.setdefault("using", alias)  # raw_id_fields widgets look labels up there
        else:
            kwargs["queryset"] = related._default_manager.using(None)  # every shard

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        self._related_choices(db_field, request, kwargs)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        self._related_choices(db_field, request, kwargs)
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]

    # -- display -------------------------------------------------------------------------
    @admin.display(description=_("id"), ordering="pk")
    def id_text(self, obj: models.Model) -> str:
        """The id as plain digits: no thousand separators, whatever the locale."""
        return "" if obj.pk is None else str(obj.pk)

    @admin.display(description=_("created"), ordering="pk")
    def created(self, obj: models.Model) -> Any:
        """The id's time in the current time zone; "out of range" for a time no datetime
        holds (a locality UUID's 48 bits of ms reach the year 10889), in UTC when the
        zone would carry it past the year 9999."""
        parts = _parts(obj)
        if parts is None:
            return ""
        dt = _decoded_time(parts)
        if dt is None:
            return OUT_OF_RANGE
        with suppress(OverflowError):  # 9999-12-31 UTC is 10000 east of it: shown in UTC
            dt = timezone.localtime(dt)
        return dt.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    @admin.display(description=_("shard"))
    def shard(self, obj: models.Model) -> str:
        return obj._state.db or ""

    @admin.display(description=parts_label)
    def id_parts_panel(self, obj: models.Model) -> Any:
        parts = _parts(obj)
        if parts is None:
            return "-"
        dt = _decoded_time(parts)
        created = describe_ms(parts.timestamp_ms) if dt is None else dt.isoformat()
        rows = [("id", str(obj.pk)), ("created (UTC)", created)]
        for key, value in parts.as_dict().items():
            if key not in ("id", "datetime", "timestamp_ms"):
                rows.append((key, str(value)))
        if obj._state.db:
            rows.append(("database", obj._state.db))
        return format_html(
            '<table class="uid-parts">{}</table>',
            format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", rows),
        )

    def get_list_display(self, request: HttpRequest) -> Any:
        display = list(super().get_list_display(request))  # type: ignore[misc]
        if _uid_pk(self.model) is None:
            return display
        pk_names = {"pk", "__str__", self.model._meta.pk.name}
        display = [d for d in display if d not in pk_names]
        return ["id_text", "created", *display]

    def get_list_display_links(self, request: HttpRequest, list_display: Any) -> Any:
        if "id_text" in list_display and self.list_display_links == ():  # type: ignore[attr-defined]
            return ["id_text"]
        return super().get_list_display_links(request, list_display)  # type: ignore[misc]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))  # type: ignore[misc]
        if _uid_pk(self.model) is not None and "id_parts_panel" not in fields:
            fields.append("id_parts_panel")
        return fields

    # -- public ids ----------------------------------------------------------------------
    def get_search_results(
        self, request: HttpRequest, queryset: Any, search_term: str
    ) -> tuple[Any, bool]:
        """A search for this model's public token (``ord_...``, any case) finds its row
        on the shard its id names, whichever shard the list shows; other terms search
        as the admin does."""
        value = _public_id_in(self.model, search_term)
        if value is not None:
            return queryset.on_all_shards().filter(pk=value), False
        return super().get_search_results(request, queryset, search_term)  # type: ignore[misc, no-any-return]


def _parts(obj: models.Model) -> Any:
    field = _uid_pk(type(obj))
    if field is None or obj.pk is None:
        return None
    try:
        return field.decode(obj.pk)
    except (TypeError, ValueError):
        return None


def _merges(model: type[models.Model], name: Any, model_admin: Any) -> bool:
    """Whether a ``list_display`` column sorts by something a fan-out merge can repeat."""
    if isinstance(name, str) and "__" in name:
        return False  # a related path (Django 5.1+ list_display)
    if not isinstance(name, str):
        order: Any = getattr(name, "admin_order_field", None)
    else:
        try:
            model._meta.get_field(name)
        except FieldDoesNotExist:
            source = getattr(model_admin, name, None) or getattr(model, name, None)
            source = getattr(source, "fget", source)  # a property
            order = getattr(source, "admin_order_field", None)
        else:
            return True
    return order is None or _mergeable_order(order)


def _mergeable_order(order: Any) -> bool:
    """An ordering a fan-out merge repeats: a field of the model, not a related path or
    an expression (``uid_fields.django.query.fanout.order_terms`` refuses those)."""
    text = order.lstrip("-") if isinstance(order, str) else None
    return text is not None and "__" not in text and text != "?"


class ShardedChangeList(ChangeList):
    """A changelist that, when it shows every shard, ignores a sort the merge of the
    shards' rows cannot repeat (kept in the URL from a one-shard view) instead of failing."""

    def __init__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        model_admin = kwargs.get("model_admin") or args[10]
        self.every_shard = bool(model_admin.shard_aliases()) and (
            model_admin.selected_shard(request) is None
        )
        super().__init__(request, *args, **kwargs)

    def get_ordering_field(self, field_name: Any) -> Any:
        order = super().get_ordering_field(field_name)
        if self.every_shard and order is not None and not _mergeable_order(order):
            return None
        return order


def _decoded_time(parts: Any) -> datetime | None:
    """The aware UTC time of decoded parts, None when no datetime holds it."""
    try:
        return parts.datetime  # type: ignore[no-any-return]
    except (ValueError, OverflowError):
        return None


def _public_id_in(model: type[models.Model], term: str) -> Any:
    """The id a search term is the public token of (None when it is not one): terms
    without the model's prefix never reach the codec (nor need its keys)."""
    field = _uid_pk(model)
    term = term.strip()
    if field is None or field.public_prefix is None or " " in term:
        return None
    if not term.lower().startswith(field.public_prefix + "_"):
        return None
    try:
        return field.public_ids.decode(term)
    except PublicIdError:
        return None


def _has_time(model: type[models.Model]) -> bool:
    field = _uid_pk(model)
    return field is not None and field.layout is not None


class ShardedModelAdmin(ShardedAdminMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    """A ModelAdmin for sharded models (use ShardedAdminMixin with your own base class)."""


class ShardedNestedObjects(NestedObjects, ShardedCollector):  # type: ignore[misc]
    """What the admin's delete confirmation lists: with the rows on other databases that
    the delete takes with it (a user's tasks on every shard), or that protect the row.

    Installed in place of Django's ``NestedObjects`` when the app is ready, for every
    model admin (``auth.User``'s too). The collectors of the other databases add to this
    one's tree, protected rows and counts.
    """

    def adopt(self, member: ShardedCollector) -> None:
        assert isinstance(member, ShardedNestedObjects)
        member.edges = self.edges
        member.protected = self.protected
        member.model_objs = self.model_objs


# The admin's delete confirmation lists what a delete of rows on shards collects, once
# some model's rows live on shards (never in a project without).
also_install(lambda: compat.install_nested_objects(ShardedNestedObjects))
