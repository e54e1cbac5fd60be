"""SQLAlchemy's own sharding examples, redone on uid_fields, give the originals' answers.

SQLAlchemy ships four variants of one program (``examples/sharding``): weather
locations placed on a shard by their continent, each with weather reports stored beside
it, on four separate databases, on four schemas of one database (schema translation), on
four sets of tables in one database (a table-name prefix), and with asyncio. The
originals make ids from a counter table and hand-write three chooser functions; here the
ids are Instagram-style and carry their logical shard, the continent picks that shard
through ``KeyRanges``, and the reports have uid ids of their own, placed with their
location by ``shard_key="location_id"``. The assertions are the originals' own, plus the
fan-out the original runs by default when no continent is given.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import BigInteger, DateTime, Float, ForeignKey, String, create_engine, event, select
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.pool import StaticPool

from uid_fields import INSTAGRAM, KeyRanges, ShardedIdGenerator, ShardMap
from uid_fields.placement.shards import ByField
from uid_fields.sqlalchemy import ShardedBigIntField, ShardRoutingError, sharded_session

pytestmark = pytest.mark.versions

LAYOUT = INSTAGRAM.replace(epoch_ms=1_704_067_200_000)
SHARDS = {
    "North America": "north_america",
    "Asia": "asia",
    "Europe": "europe",
    "South America": "south_america",
}
SHARD_MAP = ShardMap(list(SHARDS.values()), route=ByField(LAYOUT, "shard"))
CONTINENTS = KeyRanges.of_databases(SHARD_MAP, SHARDS)


def weather_models(prefix: str = "") -> tuple[type[DeclarativeBase], Any, Any]:
    """The example's two mapped classes (on a base of their own), tables named with
    ``prefix`` (the separate-tables variant rewrites it per shard)."""

    class Base(DeclarativeBase):
        pass

    location_ids = ShardedIdGenerator(LAYOUT)
    report_ids = ShardedIdGenerator(LAYOUT)

    class WeatherLocation(Base):
        __tablename__ = f"{prefix}weather_locations"
        id: Mapped[int] = ShardedBigIntField(
            generator=location_ids, shard_key="region", key_hash="modulo", primary_key=True
        )
        region: Mapped[int] = mapped_column(BigInteger)  # the continent's logical shard
        continent: Mapped[str] = mapped_column(String(30))
        city: Mapped[str] = mapped_column(String(50))
        reports: Mapped[list[Report]] = relationship(back_populates="location")

        def __init__(self, continent: str, city: str) -> None:
            self.continent = continent
            self.city = city
            self.region = CONTINENTS.logical_shard(continent)

    class Report(Base):
        __tablename__ = f"{prefix}weather_reports"
        id: Mapped[int] = ShardedBigIntField(
            generator=report_ids, shard_key="location_id", primary_key=True
        )
        location_id: Mapped[int] = mapped_column(
            BigInteger, ForeignKey(f"{prefix}weather_locations.id")
        )
        temperature: Mapped[float] = mapped_column(Float)
        report_time: Mapped[datetime.datetime] = mapped_column(
            DateTime, default=datetime.datetime.now
        )
        location: Mapped[WeatherLocation] = relationship(back_populates="reports")

        def __init__(self, temperature: float) -> None:
            self.temperature = temperature

    return Base, WeatherLocation, Report


def separate_databases(tmp_path: Path) -> tuple[dict[str, Engine], str]:
    return {s: create_engine(f"sqlite:///{tmp_path / s}.db") for s in SHARDS.values()}, ""


def schema_translates(tmp_path: Path) -> tuple[dict[str, Engine], str]:
    """One engine; each shard is a schema (an attached SQLite file), chosen per shard by
    ``schema_translate_map``."""
    engine = create_engine(f"sqlite:///{tmp_path / 'main.db'}")

    @event.listens_for(engine, "connect")
    def attach(dbapi_connection: Any, record: Any) -> None:
        for shard in SHARDS.values():
            dbapi_connection.execute(f"ATTACH DATABASE '{tmp_path / shard}.db' AS {shard}")

    return {
        s: engine.execution_options(schema_translate_map={None: s}) for s in SHARDS.values()
    }, ""


def separate_tables(tmp_path: Path) -> tuple[dict[str, Engine], str]:
    """One database; each shard's tables carry the shard's name, put in per statement.

    As in the original, one in-memory SQLite connection serves every shard (so the
    shards share its transaction: one file cannot take four writers at once).
    """
    engine = create_engine("sqlite://", poolclass=StaticPool)

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def name_tables(
        conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool
    ) -> tuple[str, Any]:
        prefix = context.execution_options.get("table_prefix")
        return (statement.replace("_prefix_", prefix) if prefix else statement), parameters

    return {s: engine.execution_options(table_prefix=s) for s in SHARDS.values()}, "_prefix_"


VARIANTS: dict[str, Callable[[Path], tuple[dict[str, Engine], str]]] = {
    "separate_databases": separate_databases,
    "schema_translates": schema_translates,
    "separate_tables": separate_tables,
}


@pytest.fixture(params=list(VARIANTS))
def weather(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Any, ...]]:
    engines, prefix = VARIANTS[request.param](tmp_path)
    base, location, report = weather_models(prefix)
    for engine in engines.values():
        base.metadata.create_all(engine)
    yield engines, location, report
    for engine in engines.values():
        engine.dispose()


def cities(weather_location: Any) -> tuple[Any, ...]:
    made = [
        weather_location("Asia", "Tokyo"),
        weather_location("North America", "New York"),
        weather_location("North America", "Toronto"),
        weather_location("Europe", "London"),
        weather_location("Europe", "Dublin"),
        weather_location("South America", "Brasila"),
        weather_location("South America", "Quito"),
    ]
    return tuple(made)


def test_the_weather_example(weather: tuple[Any, ...]) -> None:
    engines, WeatherLocation, Report = weather
    tokyo, newyork, toronto, london, dublin, brasilia, quito = cities(WeatherLocation)
    tokyo.reports.append(Report(80.0))
    newyork.reports.append(Report(75))
    quito.reports.append(Report(85))

    with sharded_session(engines, shard_map=SHARD_MAP) as sess:
        sess.add_all([tokyo, newyork, toronto, london, dublin, brasilia, quito])
        sess.commit()

        t = sess.get(WeatherLocation, tokyo.id)
        assert t.city == tokyo.city
        assert t.reports[0].temperature == 80.0

        north_america = CONTINENTS.logical_shard("North America")
        north_american_cities = sess.execute(
            select(WeatherLocation).filter(WeatherLocation.region == north_america)
        ).scalars()
        assert {c.city for c in north_american_cities} == {"New York", "Toronto"}

        regions = [CONTINENTS.logical_shard(c) for c in ("Europe", "Asia")]
        asia_and_europe = sess.execute(
            select(WeatherLocation).filter(WeatherLocation.region.in_(regions))
        ).scalars()
        assert {c.city for c in asia_and_europe} == {"Tokyo", "London", "Dublin"}

        # The original's chooser scans every shard when no continent is given; here that
        # is said out loud, and the answer is the same.
        by_name = select(WeatherLocation).filter(WeatherLocation.continent == "North America")
        with pytest.raises(ShardRoutingError):
            sess.execute(by_name)
        assert {c.city for c in sess.on_all_shards(by_name).scalars()} == {
            "New York",
            "Toronto",
        }

        # Reports have uid ids of their own (the original's repeat across databases, and
        # only the identity token tells them apart): each lives with its location.
        newyork_report = newyork.reports[0]
        tokyo_report = tokyo.reports[0]
        assert sa_inspect(newyork_report).identity_key == (
            Report,
            (newyork_report.id,),
            "north_america",
        )
        assert sa_inspect(tokyo_report).identity_token == "asia"
        assert sa_inspect(newyork_report).identity_token == "north_america"
        assert newyork_report.id != tokyo_report.id
        ids = {"tokyo": tokyo.id, "quito": quito.id, "tokyo report": tokyo_report.id}

    with sharded_session(engines, shard_map=SHARD_MAP) as fresh:  # loaded from the shards
        tokyo_again = fresh.get(WeatherLocation, ids["tokyo"])
        assert [r.temperature for r in tokyo_again.reports] == [80.0]
        quito_again = fresh.get(WeatherLocation, ids["quito"])
        assert [r.temperature for r in quito_again.reports] == [85.0]
        report = fresh.get(Report, ids["tokyo report"])
        assert report.location.city == "Tokyo"
        assert sa_inspect(report).identity_token == "asia"


def test_key_ranges() -> None:
    assert CONTINENTS.logical_shard("Asia") == SHARD_MAP.ranges["asia"][0]
    low, high = SHARD_MAP.ranges["europe"]
    spread = {CONTINENTS.logical_shard("Europe", within=user) for user in range(2000)}
    assert len(spread) > 1000 and all(low <= s < high for s in spread)
    assert CONTINENTS.logical_shard("Europe", within=7) == CONTINENTS.logical_shard("Europe", 7)
    assert CONTINENTS.key_of(SHARD_MAP.ranges["asia"][0]) == ["Asia"]
    with pytest.raises(ValueError, match="'Atlantis' is not one of the keys"):
        CONTINENTS.logical_shard("Atlantis")
    with pytest.raises(ValueError, match="not in the shard map"):
        KeyRanges.of_databases(SHARD_MAP, {"Mars": "mars"})
    with pytest.raises(ValueError, match=r"within 0\.\.8192"):
        KeyRanges({"x": (8000, 9000)}, logical_shards=8192)
