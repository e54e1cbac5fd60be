"""A frozen shard (a server that stops answering, as under SIGSTOP: a TCP proxy that stops
forwarding) gives ``on_all_shards`` a deadline error naming it; fan-outs to the other
shards and routed reads go on; after it thaws, fan-outs work again without a restart. A
pooled connection the server dropped while idle is replaced once, for reads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import Engine, make_url

from tests.tcp_proxy import FreezableProxy, freezable_proxy
from uid_fields.errors import FanOutTimeoutError
from uid_fields.ops import parallel
from uid_fields.sqlalchemy import bulk_insert, sharded_session

from .conftest import DATABASES
from .models import Order

pytestmark = pytest.mark.stress


@pytest.fixture
def proxied(
    postgres_engines: dict[str, Engine],
) -> Iterator[tuple[dict[str, Engine], FreezableProxy]]:
    """The four PostgreSQL shards, shard_3 reached through a proxy that can freeze."""
    from .models import Base

    for engine in postgres_engines.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    target = make_url(str(postgres_engines["shard_3"].url.render_as_string(hide_password=False)))
    with freezable_proxy(target.port or 5432) as proxy:
        engine = create_engine(target.set(host="127.0.0.1", port=proxy.port))
        shards = {**postgres_engines, "shard_3": engine}
        parallel.shutdown()
        try:
            yield shards, proxy
        finally:
            proxy.thaw()
            parallel.shutdown()
            engine.dispose()
    for engine in postgres_engines.values():
        Base.metadata.drop_all(engine)


def test_a_frozen_shard_is_named_and_starves_nothing(
    proxied: tuple[dict[str, Engine], FreezableProxy],
) -> None:
    shards, proxy = proxied
    count = select(func.count()).select_from(Order)
    with sharded_session(shards, fan_out_timeout=1.5) as session:
        bulk_insert(session, Order, [{"customer": f"c{i}"} for i in range(40)])
        session.commit()
        assert session.on_all_shards(count).scalar() == 40  # the pools connect
    proxy.freeze()
    with (
        sharded_session(shards, fan_out_timeout=1.5) as session,
        pytest.raises(FanOutTimeoutError, match="shard_3") as raised,
    ):
        session.on_all_shards(count).scalar()
    assert raised.value.shards == ["shard_3"]  # the deadline's error: only it names a shard
    healthy = {name: engine for name, engine in shards.items() if name != "shard_3"}
    with sharded_session(healthy, fan_out_timeout=1.5) as session:
        assert session.on_all_shards(count).scalar() < 40  # the other shards answer meanwhile
    proxy.thaw()
    with sharded_session(shards, fan_out_timeout=5) as session:
        assert session.on_all_shards(count).scalar() == 40  # no restart needed


def test_a_page_that_must_connect_to_a_frozen_shard_keeps_its_deadline(
    proxied: tuple[dict[str, Engine], FreezableProxy],
) -> None:
    """A page of objects (sent to every shard at once from the calling thread when each
    has a pooled connection) to a shard it must connect to, which accepts and never
    answers: the deadline names it; the connecting counts inside it."""
    shards, proxy = proxied
    page = select(Order).order_by(Order.id.desc()).limit(5)
    with sharded_session(shards, fan_out_timeout=1.5) as session:
        bulk_insert(session, Order, [{"customer": f"c{i}"} for i in range(40)])
        session.commit()
        assert len(session.on_all_shards(page).scalars().all()) == 5
    shards["shard_3"].dispose()  # no pooled connection left: the next page connects
    proxy.freeze()
    with (
        sharded_session(shards, fan_out_timeout=1.5) as session,
        pytest.raises(FanOutTimeoutError, match="shard_3") as raised,
    ):
        session.on_all_shards(page).scalars().all()
    assert raised.value.shards == ["shard_3"]


def test_a_connection_the_server_dropped_is_replaced_once_for_a_read(
    postgres_engines: dict[str, Engine],
) -> None:
    from .models import Base

    for engine in postgres_engines.values():
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
    parallel.shutdown()
    count = select(func.count()).select_from(Order)
    try:
        with sharded_session(postgres_engines) as session:
            bulk_insert(session, Order, [{"customer": "x"} for _ in range(12)])
            session.commit()
            assert session.on_all_shards(count).scalar() == 12  # pooled connections made
        with postgres_engines["shard_0"].connect() as admin:  # a restart, as the app sees it
            admin.execute(  # this run's shard databases only (other runs use other names)
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid() AND datname = ANY(:names)"
                ),
                {"names": DATABASES},
            )
        for _ in range(5):
            with sharded_session(postgres_engines) as session:
                assert session.on_all_shards(count).scalar() == 12
    finally:
        parallel.shutdown()
        for engine in postgres_engines.values():
            engine.dispose()  # no connection the server dropped is left for later tests
            Base.metadata.drop_all(engine)
