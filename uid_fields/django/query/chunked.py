"""A shard's rows read in keyset chunks (``uid_fields.ops.chunks`` says why): the stream
of a fan-out over PostgreSQL shards whose settings disable server-side cursors, as
Django's docs require behind a pooler in transaction mode."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.db import connections, models
from django.db.models import F, OrderBy, Q

from ...ops import chunks, merge
from ..compat import limited, limits, ordering_request

__all__ = ["keyset_chunks", "without_server_cursors"]


def without_server_cursors(alias: str) -> bool:
    """Whether a stream from ``alias`` is read in keyset chunks (``ops.chunks``): its
    PostgreSQL settings disable server-side cursors, as Django's docs require behind a
    pooler in transaction mode, where a cursor does not outlive its transaction."""
    connection = connections[alias]
    return connection.vendor == "postgresql" and bool(
        connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")
    )


def keyset_chunks(
    source: models.QuerySet[Any], keys: list[merge.SortKey], chunk_size: int
) -> Iterator[Any]:
    """The rows of ``source`` (one shard's query, ``[:high]`` at most) read ``chunk_size``
    at a time, each chunk the rows past the last one read in the order of ``keys``
    (the query's terms, then the primary key): no cursor is held between two queries,
    and no more than a chunk is in memory."""
    alias = source.db
    vendor = connections[alias].vendor
    terms = [chunks.ChunkTerm(k.name, k.descending, merge.null_position(k, vendor)) for k in keys]
    unsliced = limited(source, None)
    if not ordering_request(unsliced)[1]:  # reverse(): the terms are reversed already
        unsliced = unsliced.reverse()
    ordered = unsliced.order_by(*(_order_by(term) for term in terms))
    _, high = limits(source)
    read, last = 0, None
    while high is None or read < high:
        size = chunk_size if high is None else min(chunk_size, high - read)
        query = ordered if last is None else ordered.filter(_q_beyond(terms, last))
        rows = list(query[:size])
        yield from rows
        read += len(rows)
        if len(rows) < size:
            return
        last = [key.get(rows[-1]) for key in keys]


def _order_by(term: chunks.ChunkTerm) -> OrderBy:
    """The term as an ORDER BY, its NULLs placed where ``rows_beyond`` expects them."""
    field = F(term.name)
    first, last = term.nulls == "first", term.nulls == "last"
    if term.descending:
        return field.desc(nulls_first=first or None, nulls_last=last or None)
    return field.asc(nulls_first=first or None, nulls_last=last or None)


def _q_beyond(terms: list[chunks.ChunkTerm], last: list[Any]) -> Q:
    """``chunks.rows_beyond`` as a ``Q``: an OR of ANDs."""
    lookups = {"=": "exact", ">": "gt", "<": "lt"}
    beyond = Q(pk__in=[])  # no alternative: no row follows
    for alternative in chunks.rows_beyond(terms, last):
        both = Q()
        for c in alternative:
            if c.op in lookups:
                both &= Q(**{f"{c.name}__{lookups[c.op]}": c.value})
            else:
                both &= Q(**{f"{c.name}__isnull": c.op == "is null"})
        beyond |= both
    return beyond
