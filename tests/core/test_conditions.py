"""The databases an AND or an OR of routing conditions names (``placement.conditions``),
the one rule Django's ``Q`` objects and SQLAlchemy's WHERE clauses both use."""

from __future__ import annotations

from uid_fields.placement import all_of, any_of


def test_an_and_keeps_what_every_routing_part_allows() -> None:
    assert all_of([{"a", "b"}, None, {"b", "c"}]) == {"b"}
    assert all_of([None, {"a"}]) == {"a"}  # a part naming none only narrows further
    assert all_of([None, None]) is None
    assert all_of([]) is None
    assert all_of([{"a"}, {"b"}]) == frozenset()  # no row can match both


def test_an_or_is_known_only_when_every_branch_routes() -> None:
    assert any_of([{"a"}, {"b"}, {"a"}]) == {"a", "b"}
    assert any_of([{"a"}, None]) is None
    assert any_of([]) == frozenset()  # an empty OR matches nothing
    assert any_of([set(), {"c"}]) == {"c"}
