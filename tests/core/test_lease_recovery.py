"""A coordinator that loses its state never gives a live worker id away.

Redis restarted empty, lease keys gone, lease rows deleted: a live holder keeps its id
(its renewal re-takes it), and a process that claims meanwhile waits until every
earlier holder's deadline has passed (a quarantine) or takes another id. The leases run
on a manual monotonic clock: the quarantine and the renewals happen in the order and at
the times they would in real time, against the real coordinators, without the waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.core.lease_databases import Database
from tests.redis_servers import key_prefix, redis_server
from uid_fields import TWITTER, LeaseLostError, RedisLease, SnowflakeGenerator
from uid_fields.clock import ManualMonotonicClock
from uid_fields.ids.leases.state import Lease

TTL, MARGIN = 2.0, 0.25  # an outage up to ttl / 2 - margin (0.75 s) goes unnoticed
QUARANTINE = TTL + MARGIN


class Issuer:
    """A thread making ids with one leased generator until stopped; counts fences."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.gen = SnowflakeGenerator(TWITTER, datacenter=3, worker=lease)
        self.ids: list[int] = [self.gen.next_id()]  # claims (at the first id), in order
        self.fenced = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.ids += self.gen.next_ids(20)
            except LeaseLostError:
                self.fenced += 1
            time.sleep(0.003)

    def finish(self) -> list[int]:
        self.stop.set()
        self.thread.join(10)
        return self.ids


def unique(*issuers: Issuer) -> bool:
    ids = [i for issuer in issuers for i in issuer.ids]
    return len(ids) == len(set(ids))


@pytest.fixture
def prefix() -> Iterator[str]:
    with key_prefix() as value:
        yield value


def test_a_renewal_that_finds_its_key_gone_keeps_its_id(prefix: str) -> None:
    client = services.redis_client()
    clock = ManualMonotonicClock()
    options = {"ttl": TTL, "margin": MARGIN, "prefix": prefix, "clock": clock}
    a = RedisLease(services.REDIS_URL, "vanish", **options)  # type: ignore[arg-type]
    b = RedisLease(services.REDIS_URL, "vanish", **options)  # type: ignore[arg-type]
    first, second = Issuer(a), Issuer(b)
    assert (a.value, b.value) == (0, 1)
    client.delete(a.key(0), b.key(1))  # the coordinator forgot both live keys
    clock.advance(TTL / 3)  # one renewal each
    assert client.exists(a.key(0)) and client.exists(b.key(1))
    clock.advance(TTL)  # and three more
    time.sleep(0.05)  # the issuers make ids meanwhile
    for issuer in (first, second):
        issuer.finish()
    # Re-taken by their holders: no loss, no fresh claim, no fenced call.
    assert (a.value, b.value) == (0, 1)
    assert (a.losses, a.claims, b.losses, b.claims) == (0, 1, 0, 1)
    assert first.fenced == second.fenced == 0
    assert unique(first, second)
    a.release()
    b.release()


def test_a_redis_restarted_empty_gives_no_live_id_away(tmp_path: Path) -> None:
    clock = ManualMonotonicClock()
    with redis_server(tmp_path) as server:
        a = RedisLease(server.url, "restart", ttl=TTL, margin=MARGIN, clock=clock)
        b = RedisLease(server.url, "restart", ttl=TTL, margin=MARGIN, clock=clock)
        issuers = [Issuer(a), Issuer(b)]  # on a new server: each waited out its claim
        assert a.quarantines == 1  # the server had just started
        server.kill()
        server.start()  # empty: both live keys are gone
        restarted = clock.now()
        late = RedisLease(server.url, "restart", ttl=TTL, margin=MARGIN, clock=clock)
        newcomer = Issuer(late)  # blocks until no earlier holder can still be issuing
        assert clock.now() - restarted >= QUARANTINE - 1.0  # uptime counts whole s
        clock.advance(TTL / 2)
        time.sleep(0.05)  # every issuer makes ids
        for issuer in [*issuers, newcomer]:
            issuer.finish()
        assert late.value not in (a.value, b.value)
        assert (a.value, b.value) == (0, 1) and a.losses == b.losses == 0
        assert all(issuer.fenced == 0 for issuer in issuers)  # the outage went unnoticed
        assert unique(*issuers, newcomer)
        for lease in (a, b, late):
            lease.release()


def test_a_new_table_needs_no_quarantine(db: Database) -> None:
    lease = db.lease("fresh", ttl=TTL, margin=MARGIN)
    SnowflakeGenerator(TWITTER, worker=lease).next_id()
    assert lease.quarantines == 0  # issued without waiting out a quarantine
    lease.release()


def test_deleted_lease_rows_give_no_live_id_away(db: Database) -> None:
    clock = ManualMonotonicClock()
    a = db.lease("wiped", ttl=TTL, margin=MARGIN, clock=clock)
    b = db.lease("wiped", ttl=TTL, margin=MARGIN, clock=clock)
    issuers = [Issuer(a), Issuer(b)]
    assert (a.value, b.value) == (0, 1) and a.quarantines == 0
    db.execute(f"DELETE FROM {db.table}", ())  # a restore, or a careless cleanup
    wiped = clock.now()
    late = db.lease("wiped", ttl=TTL, margin=MARGIN, clock=clock)
    newcomer = Issuer(late)  # claims 0 (gone), which its live holder takes back
    assert clock.now() - wiped >= QUARANTINE - 0.1
    assert late.quarantines >= 1
    clock.advance(TTL / 2)
    time.sleep(0.05)  # every issuer makes ids
    for issuer in [*issuers, newcomer]:
        issuer.finish()
    assert late.value not in (a.value, b.value)
    assert (a.value, b.value) == (0, 1) and a.losses == b.losses == 0
    assert all(issuer.fenced == 0 for issuer in issuers)
    assert unique(*issuers, newcomer)
    held = db.execute(
        f"SELECT node, token FROM {db.table} WHERE name = %s AND token IS NOT NULL ORDER BY node",
        ("wiped",),
    )
    assert [node for node, _ in held] == sorted([0, 1, late.value])
    assert not [token for _, token in held if token.startswith("q:")]
    for lease in (a, b, late):
        lease.release()
