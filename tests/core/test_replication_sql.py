"""The names, connection strings and refusals of the move by logical replication."""

from __future__ import annotations

import re

from uid_fields import INSTAGRAM, TWITTER, ShardMap
from uid_fields.ops.replication import PgTable, logical_refusal
from uid_fields.placement import Placement
from uid_fields.placement.shards import ByField, ByModulo
from uid_fields.sql.replication import conninfo, create_publication_sql, move_name


def test_move_names_are_valid_slot_names_within_63_bytes_and_tell_moves_apart() -> None:
    long = "a_map_with_a_very_long_name_that_goes_on_and_on_and_on"
    names = {move_name(long, "shard_1", "shard_2", f"{low}:8192") for low in (4096, 6144)}
    assert len(names) == 2
    for name in names:
        assert len(name.encode()) <= 63
        assert re.fullmatch(r"[a-z0-9_]+", name)  # what a replication slot accepts
    assert move_name("Shop", "db-1", "db-2", "0:4096") == move_name(
        "Shop", "db-1", "db-2", "0:4096"
    )  # a rerun finds its objects by name


def test_conninfo_quotes_its_values_and_leaves_empty_ones_out() -> None:
    info = conninfo(host="db.internal", port=5433, dbname="shop", user="o'neil", password="")
    assert info == "host='db.internal' port='5433' dbname='shop' user='o\\'neil'"


def test_the_publication_filters_each_table_and_publishes_no_truncate() -> None:
    statement = create_publication_sql("uidf_mv_x", [('"t"', "a > 1"), ('"c"', "b > 2")])
    assert 'TABLE "t" WHERE (a > 1), TABLE "c" WHERE (b > 2)' in statement
    assert "publish = 'insert, update, delete'" in statement


def test_a_route_sql_cannot_compute_is_refused_with_the_way_out() -> None:
    by_field = Placement(None, ShardMap(route=ByField(INSTAGRAM, "shard"), ranges={"a": (0, 8192)}))
    mixed = Placement(
        None,
        ShardMap(route=ByModulo(8192, max_value=TWITTER.max_value), ranges={"a": (0, 8192)}),
    )
    photos = PgTable("photos", "photos", "id", by_field, 4096, 8192)
    events = PgTable("events", "events", "id", mixed, 4096, 8192)
    assert logical_refusal([photos]) is None
    refusal = logical_refusal([photos, events])
    assert refusal is not None and "events" in refusal and "--method portable" in refusal
