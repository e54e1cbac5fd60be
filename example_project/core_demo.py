"""Generate and decode one id of every scheme, and route each to a shard.

Run with ``make demo``. Nothing but Python is needed.
"""

from __future__ import annotations

from uid_fields import (
    DECIMAL,
    DISCORD,
    INSTAGRAM,
    PHP_REDIS,
    SONYFLAKE,
    TWITTER,
    DecimalGenerator,
    LocalityUUIDGenerator,
    ShardedIdGenerator,
    ShardMap,
    SnowflakeGenerator,
    UniqIdGenerator,
    locality,
    uniqid,
)
from uid_fields._internal.timeutil import format_ms
from uid_fields.placement.shards import (
    ByDecimalServer,
    ByField,
    ByLocalityBlock,
    ByModulo,
    ByUniqIdDigit,
)

SHARDS = ["shard_0", "shard_1", "shard_2", "shard_3"]
EPOCH_2024 = 1704067200000


def rows() -> list[tuple[str, str, str, str, str]]:
    out = []
    twitter = TWITTER.replace(epoch_ms=EPOCH_2024)
    gen = SnowflakeGenerator(twitter, datacenter=1, worker=7)
    value = gen.next_id()
    parts = twitter.decompose(value)
    out.append(
        (
            "snowflake (twitter)",
            str(value),
            format_ms(parts.timestamp_ms),
            f"dc={parts.datacenter} worker={parts.worker} seq={parts.sequence}",
            ShardMap(SHARDS, route=ByModulo()).database_for(value),
        )
    )
    sharded = ShardedIdGenerator(INSTAGRAM.replace(epoch_ms=EPOCH_2024))
    value = sharded.next_id(shard_key=31341)
    parts = sharded.decompose(value)
    out.append(
        (
            "sharded (instagram)",
            str(value),
            format_ms(parts.timestamp_ms),
            f"shard={parts.shard} seq={parts.sequence}",
            ShardMap(SHARDS, route=ByField(sharded.layout)).database_for(value),
        )
    )
    for name, layout, fields in [
        ("sonyflake", SONYFLAKE, {"machine": 0x0A01}),
        ("discord", DISCORD, {"worker": 1, "process": 2}),
        ("php+redis", PHP_REDIS, {"server": 3, "worker": 4}),
    ]:
        value = SnowflakeGenerator(layout, **fields).next_id()
        parts = layout.decompose(value)
        detail = " ".join(f"{k}={v}" for k, v in parts.fields.items()) + f" seq={parts.sequence}"
        out.append(
            (
                name,
                str(value),
                format_ms(parts.timestamp_ms),
                detail,
                ShardMap(SHARDS, route=ByModulo()).database_for(value),
            )
        )
    decimal = DecimalGenerator(DECIMAL, server=5)
    value = decimal.next_id()
    dparts = DECIMAL.decompose(value)
    out.append(
        (
            "decimal (mysql uid)",
            str(value),
            format_ms(dparts.timestamp_ms),
            f"random={dparts.random} server={dparts.server}",
            ShardMap(["db_even", "db_odd"], route=ByDecimalServer(DECIMAL)).database_for(value),
        )
    )
    for mode, sequential in (("variable", False), ("sequential", True)):
        uid = LocalityUUIDGenerator(sequential=sequential).next_id()
        lparts = locality.decompose(uid)
        out.append(
            (
                f"locality uuid ({mode})",
                str(uid),
                format_ms(lparts.timestamp_ms),
                f"counter={lparts.block if sequential else lparts.counter} "
                f"pid={lparts.pid} mac={lparts.mac:07x}",
                ShardMap(SHARDS, route=ByLocalityBlock()).database_for(uid),
            )
        )
    text = UniqIdGenerator(4).next_id()
    uparts = uniqid.decompose(text, 4)
    out.append(
        (
            "uniqid (php)",
            text,
            uparts.datetime.isoformat(timespec="microseconds"),
            f"shard={uparts.shard} prefix={uparts.prefix:04x}",
            ShardMap(SHARDS, route=ByUniqIdDigit(4)).database_for(text),
        )
    )
    return out


def main() -> None:
    header = ("scheme", "id", "created (UTC)", "decoded parts", "routes to")
    table = [header, *rows()]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for n, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))
    print()
    for layout in (TWITTER, INSTAGRAM, SONYFLAKE, DISCORD):
        print(f"{layout.name:<10} {layout.diagram():<55} exhausted {layout.exhausted_at:%Y-%m-%d}")


if __name__ == "__main__":
    main()
