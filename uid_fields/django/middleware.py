"""``CanonicalPublicIdMiddleware``: one URL per object when paths carry public ids.

A public id has one spelling (``PublicIds.canonical``: what ``encode`` writes), but its
decoder also reads upper case, ``ORD_`` and the Crockford look-alikes I, L and O, so
``/orders/ORD_QK42.../`` and ``/orders/ord_qk42.../`` would be two URLs of one order:
two cache keys, two log lines, two entries to de-duplicate. The path converter matches
only the canonical spelling; this middleware answers a request for another spelling
with a permanent redirect (301) to the canonical path, query string kept, when that
path resolves. Without it such a request is a 404, never a second URL.

Add ``"uid_fields.django.middleware.CanonicalPublicIdMiddleware"`` to ``MIDDLEWARE``.
It does nothing for paths that resolve as they are, so it costs one resolve on a 404.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import Resolver404, get_resolver

from ..errors import ConfigurationError, PublicIdError
from .columns.public_ids import canonical_token

__all__ = ["CanonicalPublicIdMiddleware", "canonical_path"]

#: A path segment that may be a public id (its prefix, ``_``, its body).
_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9_]*_[0-9A-Za-z]+")


def canonical_path(path: str) -> str:
    """``path`` with every segment that is a public id of a model here spelt canonically
    (segments that are no such token are kept as they are)."""
    segments = path.split("/")
    for index, segment in enumerate(segments):
        if _TOKEN.fullmatch(segment):
            try:
                segments[index] = canonical_token(segment)
            except (PublicIdError, ConfigurationError):
                continue
    return "/".join(segments)


class CanonicalPublicIdMiddleware:
    """A 301 from a path with a non-canonical public id to its canonical path."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        resolver = get_resolver(getattr(request, "urlconf", None))
        try:
            resolver.resolve(request.path_info)
        except Resolver404:
            canonical = canonical_path(request.path_info)
            if canonical != request.path_info:
                try:
                    resolver.resolve(canonical)
                except Resolver404:
                    pass
                else:
                    prefix = request.path[: len(request.path) - len(request.path_info)]
                    query = request.META.get("QUERY_STRING", "")
                    target = prefix + canonical + (f"?{query}" if query else "")
                    return HttpResponsePermanentRedirect(target)
        return self.get_response(request)
