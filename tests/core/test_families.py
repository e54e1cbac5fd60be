"""Families (uid_fields.placement.families): the root of a chain of placement links, what
a relation between two models joins, and the write check of a key inside a family.

Models are plain names here: the rule knows no ORM.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uid_fields import (
    INSTAGRAM,
    ManualClock,
    ShardedIdGenerator,
    ShardMap,
    WrongShardError,
)
from uid_fields.placement import (
    ByField,
    Placement,
    Relation,
    allow_off_shard_writes,
    check_family_key,
    family_chain,
    family_root,
    relation_between,
)
from uid_fields.placement.families import colocated

# Tenant -> Project -> Task -> Comment, Label -> Tenant, TaskLabel -> Task; Customer and
# Photo are roots of their own; User lives on no shard.
PARENTS: dict[str, str | None] = {
    "Tenant": None,
    "Project": "Tenant",
    "Task": "Project",
    "Comment": "Task",
    "Label": "Tenant",
    "TaskLabel": "Task",
    "Customer": None,
    "Purchase": "Customer",
    "Photo": None,
}
ON_SHARDS = set(PARENTS)


def parent_of(model: str) -> str | None:
    return PARENTS.get(model)


def on_shards(model: str) -> bool:
    return model in ON_SHARDS


def relation(source: str, target: str, *, link: bool = False) -> Relation:
    return relation_between(source, target, parent_of=parent_of, on_shards=on_shards, link=link)


def test_the_chain_ends_at_the_root() -> None:
    assert family_chain("Comment", parent_of) == ("Comment", "Task", "Project", "Tenant")
    assert family_root("TaskLabel", parent_of) == "Tenant"
    assert family_root("Tenant", parent_of) == "Tenant"
    assert family_root("Purchase", parent_of) == "Customer"


def test_a_cycle_of_links_places_no_row() -> None:
    cycle = {"A": "B", "B": "C", "C": "A"}
    with pytest.raises(ValueError, match="cycle: A -> B -> C -> A"):
        family_root("A", cycle.get)


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        ("Project", "Tenant", Relation.FAMILY),  # the parent, declared as a key
        ("Task", "Tenant", Relation.FAMILY),  # the grandparent
        ("Comment", "Tenant", Relation.FAMILY),  # three levels up
        ("Task", "Task", Relation.FAMILY),  # a self-key below the root
        ("TaskLabel", "Label", Relation.FAMILY),  # a sibling under the same root
        ("Tenant", "Project", Relation.FAMILY),  # the root pointing down
        ("Tenant", "Tenant", Relation.ACROSS),  # two roots: two families
        ("Photo", "Photo", Relation.ACROSS),  # a root placed by a key of its own
        ("Task", "Customer", Relation.ACROSS),  # another family
        ("Purchase", "Task", Relation.ACROSS),
        ("Task", "User", Relation.ACROSS),  # a row on default
        ("User", "Task", Relation.ACROSS),
        ("User", "Group", Relation.ORDINARY),  # neither on shards
    ],
)
def test_what_a_relation_joins(source: str, target: str, expected: Relation) -> None:
    assert relation(source, target) is expected
    assert expected.same_database is (expected is not Relation.ACROSS)
    assert colocated(source, target, parent_of=parent_of, on_shards=on_shards) is (
        expected.same_database
    )


def test_the_placement_link_is_one_database_by_construction() -> None:
    assert relation("Project", "Tenant", link=True) is Relation.LINK
    assert relation("Task", "User", link=True) is Relation.ACROSS  # a key to no shard


@given(st.sampled_from(sorted(PARENTS)), st.sampled_from(sorted(PARENTS)))
def test_colocation_is_symmetric_and_follows_the_roots(first: str, second: str) -> None:
    together = colocated(first, second, parent_of=parent_of, on_shards=on_shards)
    assert together == colocated(second, first, parent_of=parent_of, on_shards=on_shards)
    same_root = family_root(first, parent_of) == family_root(second, parent_of)
    two_roots = first == second == family_root(first, parent_of)
    assert together == (same_root and not two_roots)


def test_a_key_inside_a_family_must_name_a_row_of_the_writing_rows_database() -> None:
    generator = ShardedIdGenerator(INSTAGRAM, clock=ManualClock(1_735_689_600_000))
    tenants = Placement(generator, ShardMap(["shard_0", "shard_1"], route=ByField(INSTAGRAM)))
    here = generator.next_id(shard=5)
    there = generator.next_id(shard=8000)
    assert tenants.database_of(here) == "shard_0" and tenants.database_of(there) == "shard_1"
    check_family_key(tenants, here, "shard_0", what="Task", key="tenant")
    with pytest.raises(WrongShardError, match=r"Task\.tenant names \d+, a row on 'shard_1'") as e:
        check_family_key(tenants, there, "shard_0", what="Task", key="tenant")
    assert (e.value.database, e.value.expected) == ("shard_0", "shard_1")
    check_family_key(tenants, "not an id", "shard_0", what="Task", key="tenant")  # the
    # database's constraint refuses what names no row
    with allow_off_shard_writes():  # copies and shard moves write what they read
        check_family_key(tenants, there, "shard_0", what="Task", key="tenant")
