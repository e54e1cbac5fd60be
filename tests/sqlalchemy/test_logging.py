"""What fan-outs, shard moves and next_id installs log, on which logger and at which level.

Real databases only: a fan-out fails because one shard's table is missing, a move runs
over SQLite files, ``next_id`` is installed on the PostgreSQL shards and the decimal
function on MariaDB. See docs/logging.md for every event.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine

from uid_fields.ids.layouts import DECIMAL
from uid_fields.ops import move_reports
from uid_fields.sqlalchemy import DatabaseIds, DecimalIds, shard_move, sharded_session

from .models import PHOTO_LAYOUT, Order
from .test_move_shards import BEFORE, Old, write


def levels(caplog: pytest.LogCaptureFixture, logger: str, pattern: str) -> list[str]:
    """The level names of the records of ``logger`` whose message matches ``pattern``."""
    return [
        r.levelname for r in caplog.records if r.name == logger and re.search(pattern, r.message)
    ]


@pytest.fixture(autouse=True)
def capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="uid_fields")


# -- uid_fields.fanout ---------------------------------------------------------------------
def test_a_shard_that_fails_in_a_fan_out_is_a_warning_naming_it(
    shards: dict[str, Engine], caplog: pytest.LogCaptureFixture
) -> None:
    """Parallel on the server backends, one shard after another on SQLite: the same line."""

    def rename(old: str, new: str) -> None:
        with shards["shard_2"].begin() as connection:
            connection.execute(text(f"ALTER TABLE {old} RENAME TO {new}"))

    rename("orders", "orders_away")  # the query fails on shard_2 only
    try:
        with sharded_session(shards) as session, pytest.raises(Exception, match="orders"):
            session.on_all_shards(select(func.count()).select_from(Order)).scalar()
    finally:
        rename("orders_away", "orders")
    assert levels(caplog, "uid_fields.fanout", r"shard_2 failed") == ["WARNING"]
    assert not levels(caplog, "uid_fields.fanout", r"shard_[013] failed")


# -- uid_fields.moves ----------------------------------------------------------------------
@pytest.fixture
def three(sqlite_engines: dict[str, Engine]) -> Iterator[dict[str, Engine]]:
    engines = {name: sqlite_engines[name] for name in ("shard_0", "shard_1", "shard_2")}
    metadata = Old[0].metadata
    for engine in engines.values():
        metadata.drop_all(engine)
        metadata.create_all(engine)
    yield engines
    for engine in engines.values():
        metadata.drop_all(engine)


def test_a_move_logs_each_pass_and_warns_about_differences(
    three: dict[str, Engine], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(move_reports, "LOG_EVERY_S", 0.0)  # every batch is a long pass's
    old_shards = {k: three[k] for k in BEFORE}
    write(old_shards, Old, 60, "a")
    with sharded_session(old_shards) as session:
        move = shard_move(
            session,
            Old,
            source="shard_1",
            target="shard_2",
            engines={"shard_2": three["shard_2"]},
            low=6144,
            high=8192,
            batch=10,
        )
        move.copy()
        for phase in ("copy", "catch-up"):
            for table in ("mv_photos", "mv_comments", "mv_events"):
                found = levels(caplog, "uid_fields.moves", rf"{phase} +{table}: \d+ rows read")
                assert found == ["INFO"], (phase, table)
        assert levels(caplog, "uid_fields.moves", r"shard_1 -> shard_2 .*copy") == ["INFO"]
        progress = levels(caplog, "uid_fields.moves", r"copy +mv_photos +\[[#.]+\] \d+/\d+ rows")
        assert progress and set(progress) == {"INFO"}
        with three["shard_2"].begin() as connection:  # the copy loses a row
            first = connection.execute(text("SELECT MIN(id) FROM mv_comments")).scalar()
            connection.execute(text("DELETE FROM mv_comments WHERE id = :id"), {"id": first})
        reports = move.verify(repair=False)
        assert not all(report.ok for report in reports)
        assert levels(caplog, "uid_fields.moves", r"verify +mv_comments: .*DIFFER") == ["WARNING"]
        assert levels(caplog, "uid_fields.moves", r"verify +mv_photos: .*match") == ["INFO"]


# -- uid_fields.next_id --------------------------------------------------------------------
def test_next_id_installs_on_postgresql_are_info(
    postgres_engines: dict[str, Engine], caplog: pytest.LogCaptureFixture
) -> None:
    ids = DatabaseIds(PHOTO_LAYOUT, name="uid_log_next_id")
    engine = postgres_engines["shard_1"]
    try:
        with engine.begin() as connection:
            ids.install(connection, 5)
        with engine.begin() as connection:
            ids.install(connection, 6)
    finally:
        with engine.begin() as connection:
            ids.uninstall(connection)
    found = [(r.levelname, r.message) for r in caplog.records if r.name == "uid_fields.next_id"]
    assert [level for level, _ in found] == ["INFO"] * 3
    assert re.search(r"installed uid_log_next_id\(\) .*logical shard 5", found[0][1])
    assert re.search(r"replaced uid_log_next_id\(\) .*logical shard 6", found[1][1])
    assert re.search(r"dropped uid_log_next_id\(\)", found[2][1])
    assert all(engine.url.database in message for _, message in found)  # type: ignore[operator]


def test_decimal_id_installs_on_mariadb_are_info(
    mariadb_engines: dict[str, Engine], caplog: pytest.LogCaptureFixture
) -> None:
    ids = DecimalIds(DECIMAL, name="uid_log_decimal")
    engine = mariadb_engines["shard_0"]
    try:
        with engine.begin() as connection:
            ids.install(connection, 3)
    finally:
        with engine.begin() as connection:
            ids.uninstall(connection)
    assert levels(caplog, "uid_fields.next_id", r"installed uid_log_decimal\(\) .*server 3") == [
        "INFO"
    ]
    assert levels(caplog, "uid_fields.next_id", r"dropped uid_log_decimal\(\)") == ["INFO"]
