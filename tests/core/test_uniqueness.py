"""The ORM-free rule of unique sets on shards (``uid_fields.placement.uniqueness``)."""

from __future__ import annotations

import pytest

from uid_fields.placement import (
    UniqueSet,
    databases_to_check,
    enforced_by_databases,
    named_unique_set,
)

DATABASES = ("db0", "db1", "db2", "db3")
PLACING = frozenset({"id", "tenant"})  # the id and the shard key


@pytest.mark.parametrize(
    ("fields", "enforced"),
    [
        (("slug",), False),  # any shard can hold each slug once
        (("tenant", "slug"), True),  # one key, one database: its index sees both rows
        (("slug", "id"), True),
        (("owner", "number"), False),
    ],
)
def test_a_set_is_enforced_when_it_includes_what_places_a_row(
    fields: tuple[str, ...], enforced: bool
) -> None:
    assert enforced_by_databases(fields, PLACING, len(DATABASES)) is enforced
    assert enforced_by_databases(UniqueSet(fields), PLACING, len(DATABASES)) is enforced


def test_one_database_enforces_every_set() -> None:
    assert enforced_by_databases(("slug",), PLACING, 1)
    assert not enforced_by_databases(("slug",), PLACING, 2)


def test_a_date_field_that_places_rows_counts() -> None:
    per_day = UniqueSet(("title",), "unique_for_date", date_field="tenant")
    assert per_day.names == ("title", "tenant")
    assert enforced_by_databases(per_day, PLACING, 4)
    assert str(per_day) == "(title, tenant)"


def test_databases_to_check() -> None:
    # a set the databases enforce: the row's own databases (two when its key's
    # database was closed to new keys)
    assert databases_to_check(("tenant", "slug"), PLACING, DATABASES, ("db2",)) == ("db2",)
    assert databases_to_check(("tenant", "s"), PLACING, DATABASES, ("db1", "db3")) == (
        "db1",
        "db3",
    )
    # any other set: every database, whatever the row's own
    assert databases_to_check(("slug",), PLACING, DATABASES, ("db2",)) == DATABASES
    # a key not set yet: every database
    assert databases_to_check(("tenant", "slug"), PLACING, DATABASES, None) == DATABASES


def test_a_filter_names_a_whole_set_by_exact_values() -> None:
    slug = UniqueSet(("slug",))
    pair = UniqueSet(("owner", "number"), "unique_together")
    dated = UniqueSet(("title",), "unique_for_date", date_field="published")
    sets = [slug, pair, dated]
    assert named_unique_set({"slug": {"exact"}}, sets) is slug
    assert named_unique_set({"slug": {"exact"}, "name": {"icontains"}}, sets) is slug
    assert named_unique_set({"slug": {"startswith"}}, sets) is None
    assert named_unique_set({"slug": {"in"}}, sets) is slug  # one field: a list of values
    assert named_unique_set({"owner": {"in"}, "number": {"exact"}}, sets) is None
    assert named_unique_set({"owner": {"exact"}}, sets) is None  # part of a set only
    assert named_unique_set({"owner": {"exact"}, "number": {"exact"}}, sets) is pair
    by_day = {"title": {"exact"}, "published": {"year", "month", "day"}}
    assert named_unique_set(by_day, sets) is dated
    assert named_unique_set({"title": {"exact"}}, sets) is None
    assert named_unique_set({}, sets) is None
