"""Keyset pages for DRF: ``KeysetPagination``, exported by ``uid_fields.django.rest``.

DRF's page-number and limit/offset paginations slice the queryset at an OFFSET. Over
shards an OFFSET cannot be pushed down (which rows the merged page skips is known only
after the merge), so each shard returns ``offset + limit`` rows for a page of ``limit``:
page 400 reads hundreds of times the rows it shows. This pagination asks each shard for
the rows past the last id shown instead (``WHERE id < :after ORDER BY id DESC LIMIT``),
merged by the core, so every page costs the same (``uid_fields.ops.pages``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.exceptions import ValidationError as DjangoValidationError

from ..._internal.extras import missing

try:
    import rest_framework  # noqa: F401
except ModuleNotFoundError as exc:  # name the extra, not just the module
    raise missing("rest_framework", exc) from exc

from rest_framework.exceptions import NotFound
from rest_framework.pagination import BasePagination
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils.urls import remove_query_param, replace_query_param

from ...errors import MalformedCursorError
from ...ids.public import PublicIds
from ...ops.pages import BIGINT_KEYS, Keyset, KeysetPage, cursor_key, token_key
from ..columns.public_ids import codec_for, shows_public_ids
from ..fields import UidField
from ..query.id_lookups import valid_id

__all__ = ["KeysetPagination", "public_codec"]


def public_codec(field: Any, view: Any) -> PublicIds | None:
    """The codec a view shows its primary keys with: the key's public ids when it has a
    ``public_prefix`` and the view's serializer shows it as tokens (``Meta.public_ids``);
    None when the results show stored ids (then so may the links)."""
    if not isinstance(field, UidField) or field.public_prefix is None:
        return None
    serializer = getattr(view, "get_serializer_class", None)
    if serializer is None or not shows_public_ids(serializer(), field.name):
        return None
    return codec_for(field)


class KeysetPagination(BasePagination):
    """Pages of rows by primary key, ``?after=<id>`` / ``?before=<id>``, that cost the
    same at any depth over shards: each shard returns at most ``page_size + 1`` rows.

    Newest first by default (``ordering = "-pk"``); ``ordering = "pk"`` pages oldest
    first. The response is ``{"next", "previous", "results"}`` with links to the pages
    beside this one (None at the ends). A malformed or impossible id in ``after`` /
    ``before``, or both at once, is a 404 (``invalid_cursor_message``), never a 500.
    The view's queryset names its shards as usual (``Model.objects.on_all_shards()``,
    or a filter that narrows it).
    """

    page_size: int | None = api_settings.PAGE_SIZE
    #: A query parameter that sets the page size (None: it cannot be set).
    page_size_query_param: str | None = None
    max_page_size: int | None = None
    #: The primary key, descending ("-pk") or ascending ("pk").
    ordering = "-pk"
    after_query_param = "after"
    before_query_param = "before"
    invalid_cursor_message = "Invalid cursor"
    _codec: PublicIds | None = None  # the key's public ids, set per page

    def paginate_queryset(self, queryset: Any, request: Any, view: Any = None) -> list[Any] | None:
        size = self.get_page_size(request)
        if not size:
            return None
        self.request = request
        field = queryset.model._meta.pk
        self._codec = public_codec(field, view)
        descending = self._descending(field)
        try:
            keyset = Keyset(
                descending,
                size,
                after=self._key(request, self.after_query_param, field),
                before=self._key(request, self.before_query_param, field),
            )
        except MalformedCursorError:
            raise NotFound(self.invalid_cursor_message) from None
        if keyset.comparison is not None:
            lookup = "pk__lt" if keyset.comparison == "<" else "pk__gt"
            queryset = queryset.filter(**{lookup: keyset.key})
        order = "-pk" if keyset.fetch_descending else "pk"
        rows = list(queryset.order_by(order)[: keyset.fetch_limit])
        self.page: KeysetPage[Any] = keyset.page(rows, lambda row: row.pk)
        return self.page.rows

    def _descending(self, field: Any) -> bool:
        name = self.ordering.removeprefix("-")
        if name not in ("pk", field.name, field.attname):
            raise ImproperlyConfigured(
                f"{type(self).__name__}.ordering must be the primary key ('pk' or '-pk'), "
                f"got {self.ordering!r}: only a unique key pages without gaps or repeats"
            )
        return self.ordering.startswith("-")

    def _key(self, request: Any, param: str, field: Any) -> Any:
        """The key of one cursor by the core's rule (``cursor_key``, SQLAlchemy's too);
        a ``MalformedCursorError`` for one that names no key (a 404 above)."""

        def decode(text: str) -> Any:
            try:
                return self.decode_key(text, field)
            except DjangoValidationError as exc:  # Django's own ValueError, for the core
                raise ValueError(" ".join(exc.messages)) from None

        return cursor_key(param, request.query_params.get(param), decode)

    def decode_key(self, text: str, field: Any) -> Any:
        """The primary key a link names; ValueError when it names none that can exist.
        A primary key shown as public ids (a ``public_prefix``) is named by its token,
        never by the stored id (``ops.pages.token_key``)."""
        codec = self._codec
        if codec is not None:
            return token_key(codec, lambda value: self._checked(field, value))(text)
        return self._checked(field, field.to_python(text))

    @staticmethod
    def _checked(field: Any, value: Any) -> Any:
        """``value`` if it is a key the field can hold, else ValueError."""
        if isinstance(field, UidField) and not valid_id(field, value):
            raise ValueError(f"{value!r} is no id of {field.name}")
        if isinstance(value, int) and value not in BIGINT_KEYS:
            raise ValueError(f"{value!r} is out of a 64-bit key's range")
        return value

    def encode_key(self, value: Any) -> str:
        """The primary key as a link writes it: its public token when the key has a
        ``public_prefix``, so no link shows a stored id."""
        codec = self._codec
        return codec.encode(value) if codec is not None else str(value)

    def get_page_size(self, request: Any) -> int | None:
        """``page_size``, or a positive int in ``page_size_query_param`` (at most
        ``max_page_size``), as DRF's paginations read it."""
        if self.page_size_query_param:
            text = request.query_params.get(self.page_size_query_param, "")
            if text.isascii() and text.isdigit() and int(text) > 0:
                size = int(text)
                return min(size, self.max_page_size) if self.max_page_size else size
        return self.page_size

    def _link(self, param: str, other: str, key: Any) -> str | None:
        if key is None:
            return None
        url = remove_query_param(self.request.build_absolute_uri(), other)
        return replace_query_param(url, param, self.encode_key(key))

    def get_next_link(self) -> str | None:
        return self._link(self.after_query_param, self.before_query_param, self.page.next_after)

    def get_previous_link(self) -> str | None:
        return self._link(
            self.before_query_param, self.after_query_param, self.page.previous_before
        )

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            OrderedDict(
                [
                    ("next", self.get_next_link()),
                    ("previous", self.get_previous_link()),
                    ("results", data),
                ]
            )
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {
            "type": "object",
            "required": ["results"],
            "properties": {"next": link, "previous": link, "results": schema},
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = [
            {
                "name": self.after_query_param,
                "required": False,
                "in": "query",
                "description": "The rows after this id (the next page).",
                "schema": {"type": "string"},
            },
            {
                "name": self.before_query_param,
                "required": False,
                "in": "query",
                "description": "The rows before this id (the previous page).",
                "schema": {"type": "string"},
            },
        ]
        if self.page_size_query_param:
            parameters.append(
                {
                    "name": self.page_size_query_param,
                    "required": False,
                    "in": "query",
                    "description": "Number of results to return per page.",
                    "schema": {"type": "integer"},
                }
            )
        return parameters
