"""Admin for sharded models: a shard selector, decoded times, views routed by the id.

Django's admin knows one database. Here the changelist reads the shard chosen in its
"shard" filter (the first one by default), while change, delete and history views
find the object on the shard its id names, because an id filter routes itself.
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from ..errors import PublicIdError
from .fields import UidField
from .routing import colocated, pin_shard, sharded_pk

__all__ = ["CreatedFilter", "ShardFilter", "ShardedAdminMixin", "ShardedModelAdmin"]

SHARD_PARAM = "shard"


def _uid_pk(model: type[models.Model]) -> UidField | None:
    pk = model._meta.pk
    return pk if isinstance(pk, UidField) else None


class ShardFilter(admin.SimpleListFilter):
    """Points the changelist at one shard database (the first by default)."""

    title = _("shard")
    parameter_name = SHARD_PARAM

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(alias, alias) for alias in model_admin.shard_aliases()]

    def value(self) -> Any:
        return super().value() or self.lookup_choices[0][0]

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
        field = sharded_pk(self.model)
        if field is None or field.shard_map is None:
            return ()
        return field.shard_map.databases

    def selected_shard(self, request: HttpRequest) -> str | None:
        aliases = self.shard_aliases()
        if not aliases:
            return None
        chosen = request.GET.get(SHARD_PARAM)
        return chosen if chosen in aliases else aliases[0]

    def _is_changelist(self, request: HttpRequest) -> bool:
        match = getattr(request, "resolver_match", None)
        return bool(match and match.url_name and match.url_name.endswith("_changelist"))

    def get_queryset(self, request: HttpRequest) -> Any:
        queryset = super().get_queryset(request)  # type: ignore[misc]
        alias = self.selected_shard(request)
        if alias is not None and self._is_changelist(request):
            return queryset.using(alias)
        if alias is not None:
            # Autocomplete, raw-id lookups, choices: rows of every shard, merged.
            return queryset.on_all_shards()
        return queryset

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
            return None
        try:
            return field.shard_map.database_for(field.to_python(object_id))
        except (ValidationError, TypeError, ValueError):
            return None

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
            stack.enter_context(
                pin_shard(self.model, alias or self.selected_shard(request) or aliases[0])
            )
            return view()  # type: ignore[no-any-return]

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
        parts = _parts(obj)
        dt = getattr(parts, "datetime", None)
        return "" if dt is None else timezone.localtime(dt).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    @admin.display(description=_("shard"))
    def shard(self, obj: models.Model) -> str:
        return obj._state.db or ""

    @admin.display(description=parts_label)
    def id_parts_panel(self, obj: models.Model) -> Any:
        parts = _parts(obj)
        if parts is None:
            return "-"
        rows = [("id", str(obj.pk)), ("created (UTC)", parts.datetime.isoformat())]
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
