"""Layouts: vectors from the original systems, bounds, lifetimes and validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from uid_fields import (
    DECIMAL,
    DECIMAL_SQL,
    DISCORD,
    INSTAGRAM,
    PHP_REDIS,
    SONYFLAKE,
    TWITTER,
    DecimalLayout,
    LayoutExhaustedError,
    SnowflakeLayout,
)
from uid_fields._internal.timeutil import ms_from_datetime
from uid_fields.config import build_generator


class TestVectors:
    def test_discord_documented_id(self) -> None:
        # Discord developer docs, Reference > Snowflakes (also asserted by
        # nyxx-discord/nyxx test/unit/models/snowflake_test.dart).
        parts = DISCORD.decompose(175928847299117063)
        assert parts.datetime == datetime(2016, 4, 30, 11, 18, 25, 796000, tzinfo=UTC)
        assert (parts.worker, parts.process, parts.sequence) == (1, 0, 7)
        assert parts.timestamp_ms - DISCORD.epoch_ms == 41944705796

    def test_twitter_tweet_ids(self) -> None:
        # client9/snowflake2time python/snowflake_test.py: tweet created
        # "Mon May 21 22:16:35 +0000 2012", 436 ms into that second.
        parts = TWITTER.decompose(204697221847986177)
        assert parts.timestamp_ms == 1337638595436
        assert (parts.datacenter, parts.worker, parts.sequence) == (1, 3, 1)
        # Twitter developer docs, Tweet object example: created_at Wed Oct 10 20:19:24 2018.
        parts = TWITTER.decompose(1050118621198921728)
        assert parts.datetime.replace(microsecond=0) == datetime(
            2018, 10, 10, 20, 19, 24, tzinfo=UTC
        )

    def test_instagram_blog_example(self) -> None:
        # "Sharding & IDs at Instagram": 1387263000 ms after the epoch, user 31341 on
        # logical shard 31341 % 2000 = 1341, nextval 5001 -> 5001 % 1024 = 905.
        layout = INSTAGRAM
        value = layout.compose(
            timestamp_ms=layout.epoch_ms + 1387263000, shard=31341 % 2000, sequence=5001 % 1024
        )
        assert value == (1387263000 << 23) | (1341 << 10) | 905 == 11637205501278089
        parts = layout.decompose(value)
        assert (parts.shard, parts.sequence) == (1341, 905)

    def test_sonyflake_machine_in_low_bits(self) -> None:
        # sony/sonyflake: elapsed<<(8+16) | sequence<<16 | machine, 10 ms units since
        # 2014-09-01 (StartTime default).
        at = datetime(2024, 1, 2, 3, 4, 5, 670000, tzinfo=UTC)
        elapsed = (ms_from_datetime(at) - 1409529600000) // 10
        value = (elapsed << 24) | (200 << 16) | 0xBEEF
        parts = SONYFLAKE.decompose(value)
        assert (parts.machine, parts.sequence, parts.datetime) == (0xBEEF, 200, at)
        assert (
            SONYFLAKE.compose(timestamp_ms=ms_from_datetime(at), sequence=200, machine=0xBEEF)
            == value
        )

    def test_php_redis_split(self) -> None:
        value = PHP_REDIS.compose(
            timestamp_ms=PHP_REDIS.epoch_ms + 1000, sequence=4095, server=31, worker=0
        )
        assert value == (1000 << 22) | (31 << 17) | 4095
        assert PHP_REDIS.decompose(value).server == 31

    def test_php_redis_epoch_is_midnight_in_the_posts_time_zone(self) -> None:
        # The PHP original takes strtotime("2019-05-05 00:00:00") in PHP's time zone:
        # Asia/Shanghai in the post, UTC under php-cli's default.
        shanghai = datetime(2019, 5, 5, tzinfo=ZoneInfo("Asia/Shanghai"))
        assert PHP_REDIS.epoch_ms == ms_from_datetime(shanghai)
        utc_epoch = ms_from_datetime(datetime(2019, 5, 5, tzinfo=UTC))
        at = ms_from_datetime(datetime(2026, 1, 1, tzinfo=UTC))
        made_under_utc = ((at - utc_epoch) << 22) | (1 << 17) | (2 << 12) | 1
        assert PHP_REDIS.decompose(made_under_utc).timestamp_ms == at - 8 * 3600 * 1000
        gen = build_generator(
            "php",
            {
                "kind": "snowflake",
                "layout": "php_redis",
                "epoch": "2019-05-05T00:00:00Z",
                "fields": {"server": 1, "worker": 2},
            },
        )
        assert gen.layout.decompose(made_under_utc).timestamp_ms == at


class TestLifetime:
    @pytest.mark.parametrize(
        ("layout", "expected"),
        [
            (TWITTER, "2080-07-10T17:30:30.209"),  # 41 bits of ms from 2010-11-04
            (DISCORD, "2084-09-06T15:47:35.552"),  # the sign bit, not its 42 bits
            (SONYFLAKE, "2188-11-16T03:28:58.880"),
            (INSTAGRAM, "2046-06-27T17:00:49.497"),  # 64 bits: negative 2**40 ms in
        ],
    )
    def test_exhausted_at(self, layout: SnowflakeLayout, expected: str) -> None:
        assert layout.exhausted_at.isoformat(timespec="milliseconds") == expected + "+00:00"

    def test_instagram_goes_negative_after_2_to_40_ms(self) -> None:
        assert INSTAGRAM.exhausted_at - INSTAGRAM.epoch == timedelta(milliseconds=2**40)

    def test_unix_epoch_with_41_bits_ends_in_2039(self) -> None:
        assert TWITTER.replace(epoch_ms=0).exhausted_at.date().isoformat() == "2039-09-07"

    def test_decimal_fits_signed_29_years_unsigned_58(self) -> None:
        signed = (DECIMAL.exhausted_at - DECIMAL.epoch).days / 365.25
        unsigned = (DECIMAL.replace(unsigned=True).exhausted_at - DECIMAL.epoch).days / 365.25
        assert 29 < signed < 29.3
        assert 58 < unsigned < 58.5

    def test_last_id_of_lifetime_fits_and_next_instant_refused(self) -> None:
        end_ms = ms_from_datetime(TWITTER.exhausted_at)
        last = TWITTER.max_id(end_ms - 1)
        assert last == 2**63 - 1
        with pytest.raises(LayoutExhaustedError, match="lifetime"):
            TWITTER.compose(timestamp_ms=end_ms)
        sixty_four = INSTAGRAM.max_id(ms_from_datetime(INSTAGRAM.exhausted_at) - 1)
        assert sixty_four == 2**63 - 1  # never the sign bit


class TestBounds:
    def test_min_max_cover_exactly_one_unit(self) -> None:
        at = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
        low, high = TWITTER.min_id(at), TWITTER.max_id(at)
        ms = ms_from_datetime(at)
        assert TWITTER.decompose(low).timestamp_ms == ms == TWITTER.decompose(high).timestamp_ms
        assert TWITTER.decompose(low - 1).timestamp_ms == ms - 1
        assert TWITTER.decompose(high + 1).timestamp_ms == ms + 1

    def test_clamp_outside_lifetime(self) -> None:
        before = TWITTER.epoch - timedelta(days=1)
        after = TWITTER.exhausted_at + timedelta(days=1)
        assert TWITTER.min_id(before, clamp=True) == 0
        assert TWITTER.max_id(before, clamp=True) == -1
        assert TWITTER.min_id(after, clamp=True) == 2**63
        assert TWITTER.max_id(after, clamp=True) == 2**63 - 1
        with pytest.raises(ValueError, match="before the layout's epoch"):
            TWITTER.min_id(before)

    def test_naive_datetime_refused(self) -> None:
        with pytest.raises(ValueError, match="naive"):
            TWITTER.min_id(datetime(2024, 1, 1))

    def test_decimal_bounds(self) -> None:
        at = DECIMAL.epoch_ms + 5000
        assert DECIMAL.min_id(at) == 5000 * 10**7
        assert DECIMAL.max_id(at) == 5000 * 10**7 + 9_999_999
        sql = DECIMAL_SQL.min_id(DECIMAL_SQL.epoch_ms + 2500)  # seconds: unit 2
        assert sql == 2 * 10**9


class TestValidation:
    def test_over_64_bits(self) -> None:
        with pytest.raises(ValueError, match="65 bits"):
            SnowflakeLayout(epoch_ms=0, time_bits=42, fields=(("w", 11),), sequence_bits=12)

    def test_field_value_out_of_range_names_value_and_range(self) -> None:
        with pytest.raises(ValueError, match=r"worker=32 is out of range 0\.\.31"):
            TWITTER.compose(timestamp_ms=TWITTER.epoch_ms, worker=32)
        with pytest.raises(ValueError, match=r"sequence=4096 is out of range 0\.\.4095"):
            TWITTER.compose(timestamp_ms=TWITTER.epoch_ms, sequence=4096)

    def test_unknown_field(self) -> None:
        with pytest.raises(ValueError, match="unknown field"):
            TWITTER.compose(timestamp_ms=TWITTER.epoch_ms, shard=1)

    @pytest.mark.parametrize("name", ["sequence", "datetime", "1x", "class", "_x"])
    def test_bad_field_names(self, name: str) -> None:
        with pytest.raises(ValueError):
            SnowflakeLayout(epoch_ms=0, fields=((name, 5),))

    def test_duplicate_field_names(self) -> None:
        with pytest.raises(ValueError, match="duplicate"):
            SnowflakeLayout(epoch_ms=0, fields=(("w", 5),), low_fields=(("w", 3),))

    @pytest.mark.parametrize("bad", [-1, True, 1.5])
    def test_bad_epoch(self, bad: object) -> None:
        with pytest.raises((ValueError, TypeError)):
            SnowflakeLayout(epoch_ms=bad)  # type: ignore[arg-type]

    def test_decompose_rejects_ids_outside_layout(self) -> None:
        with pytest.raises(ValueError, match="out of range"):
            TWITTER.decompose(-1)
        with pytest.raises(ValueError, match="out of range"):
            TWITTER.decompose(2**63)
        small = SnowflakeLayout(epoch_ms=0, time_bits=20, sequence_bits=4)
        with pytest.raises(ValueError, match="24-bit"):
            small.decompose(2**24)

    def test_decompose_accepts_digit_strings_only(self) -> None:
        assert TWITTER.decompose("204697221847986177").worker == 3
        assert TWITTER.decompose("0204697221847986177").worker == 3  # leading zeros: kept
        # The one rule for id text (coerce_id): digits only, so no surrounding spaces.
        for bad in ["", "12a", "-5", "+5", "1e9", "١٢٣", " 204697221847986177 ", "5\n"]:
            with pytest.raises(ValueError):
                TWITTER.decompose(bad)
        with pytest.raises(TypeError):
            TWITTER.decompose(1.0)


class TestValueSemantics:
    def test_replace_and_equality(self) -> None:
        moved = TWITTER.replace(epoch_ms=1704067200000)
        assert moved.epoch_ms == 1704067200000
        assert moved.fields == TWITTER.fields
        assert moved != TWITTER
        assert moved.replace(epoch_ms=TWITTER.epoch_ms) == TWITTER
        assert hash(moved.replace(epoch_ms=TWITTER.epoch_ms)) == hash(TWITTER)
        with pytest.raises(TypeError, match="unknown parameter"):
            TWITTER.replace(worker_bits=3)

    def test_repr_is_readable(self) -> None:
        text = repr(TWITTER)
        assert "twitter" in text and "datacenter" in text and "2010-11-04T01:42:54.657Z" in text
        assert "low_fields=(('machine', 16),)" in repr(SONYFLAKE)
        assert "time_unit_ms=1000" in repr(DECIMAL_SQL)
        assert (
            TWITTER.diagram() == "1 unused | 41 time (ms) | 5 datacenter | 5 worker | 12 sequence"
        )

    def test_parts_repr_and_dict(self) -> None:
        parts = DISCORD.decompose(175928847299117063)
        assert repr(parts) == (
            "SnowflakeParts(id=175928847299117063, datetime=2016-04-30T11:18:25.796Z, "
            "worker=1, process=0, sequence=7)"
        )
        assert parts.as_dict()["datetime"] == "2016-04-30T11:18:25.796Z"
        with pytest.raises(AttributeError):
            _ = parts.shard

    def test_decimal_layout_parts(self) -> None:
        value = DECIMAL.compose(timestamp_ms=DECIMAL.epoch_ms + 123, random=456789, server=7)
        assert value == 123 * 10**7 + 456789 * 10 + 7
        parts = DECIMAL.decompose(value)
        assert (parts.timestamp_ms - DECIMAL.epoch_ms, parts.random, parts.server) == (
            123,
            456789,
            7,
        )
        with pytest.raises(ValueError, match="server=10"):
            DECIMAL.compose(timestamp_ms=DECIMAL.epoch_ms, server=10)
        with pytest.raises(ValueError, match="digits"):
            DecimalLayout(epoch_ms=0, time_digits=20, random_digits=19, server_digits=19)
