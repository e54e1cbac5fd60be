"""Data migrations run on each shard under the write guard (issue 35, item 2).

``run_migrations_on_shards`` runs every revision on each shard's connection in turn,
outside any session. A Core ``insert(Order)`` without an id there took its id from the
column default, made for any shard: most rows landed where no read by id finds them, and
with the guard on, most inserts failed. Now each shard's connection runs under the guard
and its id columns make ids of that shard.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine

from uid_fields import WrongShardError
from uid_fields.sqlalchemy import audit, sharded_session

from .models import Base, Order, Photo

ENVIRONMENT = Path(__file__).parent / "alembic_data"


def config(engines: dict[str, Engine], **attributes: Any) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ENVIRONMENT))
    cfg.attributes["engines"] = engines
    cfg.attributes.update(attributes)
    return cfg


def clean(engines: dict[str, Engine]) -> None:
    for engine in engines.values():
        Base.metadata.drop_all(engine)
        with engine.begin() as connection:
            connection.execute(text("DROP TABLE IF EXISTS alembic_version"))


@pytest.fixture(params=["sqlite", "postgresql"])
def engines(request: pytest.FixtureRequest) -> Iterator[dict[str, Engine]]:
    name = {"sqlite": "sqlite_engines", "postgresql": "postgres_engines"}[request.param]
    found: dict[str, Engine] = request.getfixturevalue(name)
    clean(found)
    for engine in found.values():
        Base.metadata.create_all(engine)
    yield found
    clean(found)


def _count(engine: Engine, entity: Any) -> int:
    with engine.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(entity)).scalar_one())


def test_inserts_without_ids_get_ids_of_the_shard_they_run_on(
    engines: dict[str, Engine],
) -> None:
    command.upgrade(config(engines, orders=5), "head")
    assert {name: _count(e, Order) for name, e in engines.items()} == dict.fromkeys(engines, 5)
    with sharded_session(engines) as session:
        assert sum(r.misplaced for r in audit(session, Order)) == 0
        for name, engine in engines.items():
            with engine.connect() as connection:
                ids = connection.execute(select(Order.__table__.c.id)).scalars().all()
            assert all(session.shard_of(session.get(Order, value)) == name for value in ids)
    command.downgrade(config(engines), "base")
    assert sum(_count(e, Order) for e in engines.values()) == 0


def test_a_row_off_the_shard_it_runs_on_is_refused(engines: dict[str, Engine]) -> None:
    owner = 7
    with pytest.raises(WrongShardError) as caught:
        command.upgrade(config(engines, photo_owner=owner), "head")
    with sharded_session(engines) as session:
        route = session.router.table_route(Photo.__table__)  # type: ignore[arg-type]
        assert route is not None
        home = route.placement.database_for_key(owner)
        assert caught.value.expected == home and caught.value.database != home
        assert sum(r.misplaced for r in audit(session, Photo)) == 0
    stored = {name: _count(e, Photo) for name, e in engines.items()}
    assert sum(stored.values()) <= 1 and {n for n, c in stored.items() if c} <= {home}
