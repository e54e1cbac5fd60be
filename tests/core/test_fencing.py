"""Fencing in the generator: a lease is checked once per time unit and in next_ids,
never per id, and a lost lease stops ids after at most the unit already started."""

from __future__ import annotations

import pytest

from uid_fields import TWITTER, LeaseLostError, ManualClock, SnowflakeGenerator
from uid_fields.errors import UidFieldsError
from uid_fields.ids.nodes import FencedSource, FromEnv, is_fenced


class Switch:
    """A leased worker id that the test revokes or replaces (a real FencedSource)."""

    per_process = True

    def __init__(self, value: int) -> None:
        self.value = value
        self.valid = True
        self.checks = 0

    def acquire(self, field: str, maximum: int) -> int:
        return self.value

    def current(self, field: str) -> int:
        self.checks += 1
        if not self.valid:
            raise LeaseLostError(f"{field} lease revoked by the test")
        return self.value


def test_the_check_runs_once_per_time_unit_not_per_id() -> None:
    clock = ManualClock()
    lease = Switch(7)
    gen = SnowflakeGenerator(TWITTER, worker=lease, clock=clock)
    ids = [gen.next_id() for _ in range(4096)]  # one unit's whole block
    assert lease.checks == 1
    clock.advance_ms(1)
    gen.next_id()
    assert lease.checks == 2
    gen.next_ids(10)  # bulk: checked on every call
    assert lease.checks == 3
    assert {TWITTER.decompose(i).worker for i in ids} == {7}


def test_a_lost_lease_issues_nothing_after_the_unit_already_started() -> None:
    clock = ManualClock()
    lease = Switch(7)
    gen = SnowflakeGenerator(TWITTER, worker=lease, clock=clock)
    first = gen.next_id()
    lease.valid = False  # the deadline passes inside this time unit
    same_unit = gen.next_id()  # the lock-free path may finish the unit it is in
    assert TWITTER.decompose(same_unit).timestamp_ms == TWITTER.decompose(first).timestamp_ms
    with pytest.raises(LeaseLostError):
        gen.next_ids(1)  # bulk calls check first
    clock.advance_ms(1)
    for _ in range(3):
        with pytest.raises(LeaseLostError):
            gen.next_id()  # no id of a later unit
    assert issubclass(LeaseLostError, UidFieldsError)


def test_a_freshly_claimed_id_resumes_with_the_new_node_in_a_later_unit() -> None:
    clock = ManualClock()
    lease = Switch(7)
    gen = SnowflakeGenerator(TWITTER, worker=lease, clock=clock)
    before = gen.next_ids(5)
    lease.valid = False
    clock.advance_ms(1)
    with pytest.raises(LeaseLostError):
        gen.next_id()
    lease.value, lease.valid = 9, True  # the lease claimed a fresh id
    after = gen.next_ids(5)
    assert gen.node == {"worker": 9}
    parts = [TWITTER.decompose(i) for i in after]
    assert {p.worker for p in parts} == {9}
    assert min(p.timestamp_ms for p in parts) > TWITTER.decompose(before[-1]).timestamp_ms


def test_a_new_node_within_the_same_unit_starts_at_the_next_unit() -> None:
    clock = ManualClock()
    lease = Switch(7)
    gen = SnowflakeGenerator(TWITTER, worker=lease, clock=clock)
    first = TWITTER.decompose(gen.next_id())
    lease.value = 9  # replaced (stolen and re-claimed) within the unit
    after = [TWITTER.decompose(i) for i in gen.next_ids(3)]
    assert {p.worker for p in after} == {9}
    assert after[0].sequence == 0 and after[0].timestamp_ms == first.timestamp_ms + 1


@pytest.mark.parametrize(
    "value",
    [0, 7, True, Switch(3), FromEnv("UID_FIELDS_TEST_WORKER"), "7", None, 7.0],
    ids=["zero", "int", "bool", "lease-like", "from-env", "text", "none", "float"],
)
def test_is_fenced_answers_as_the_protocol_does(value: object) -> None:
    assert is_fenced(value) == isinstance(value, FencedSource)
