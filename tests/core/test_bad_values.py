"""Values that used to slip through or crash get a clear error naming them."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest

from uid_fields import TWITTER, SnowflakeLayout, locality
from uid_fields.sql.postgres import NextIdFunction


@pytest.mark.parametrize("shard", [True, 5.5, "5", -1, 8192])
def test_next_id_function_refuses_a_shard_that_is_no_int_in_range(shard: object) -> None:
    from uid_fields import INSTAGRAM

    with pytest.raises((TypeError, ValueError), match="shard"):
        NextIdFunction(INSTAGRAM, shard=shard)  # type: ignore[arg-type]


def test_locality_times_past_the_year_9999_are_a_clear_value_error() -> None:
    value = uuid.UUID("5bcb4db0-2b9e-b000-0001-ffffffffffff")  # 48 bits of ms: year 10889
    parts = locality.decompose(value)
    with pytest.raises(ValueError, match=r"1\.\.9999"):
        _ = parts.datetime


def test_decoded_parts_past_the_year_9999_still_list_every_part() -> None:
    """as_dict() (the CLI, the admin's parts panel) says the time is out of range and
    keeps the rest; only .datetime, which must be a datetime, raises."""
    value = uuid.UUID("5bcb4db0-2b9e-b000-0001-ffffffffffff")
    described = locality.decompose(value).as_dict()
    assert described["datetime"].startswith("out of range")
    assert "281474976710655" in described["datetime"]
    assert (described["pid"], described["timestamp_ms"]) == (0x2B9E, (1 << 48) - 1)
    wide = SnowflakeLayout(epoch_ms=0, time_bits=50, sequence_bits=12)
    parts = wide.decompose(wide.compose(timestamp_ms=(1 << 50) - 1, sequence=3))
    assert parts.as_dict()["datetime"].startswith("out of range")
    assert "out of range" in repr(parts)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "uid_fields",
            "decode",
            str(value),
            "--layout",
            "locality",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert '"datetime": "out of range' in result.stdout


def test_a_layout_lasting_past_9999_reports_the_last_datetime() -> None:
    seconds = SnowflakeLayout(epoch_ms=0, time_bits=41, time_unit_ms=1000, sequence_bits=22)
    assert seconds.exhausted_at.year == 9999


def test_the_cli_names_bad_ids_without_python_internals() -> None:
    huge = "9" * 5000
    result = subprocess.run(
        [sys.executable, "-m", "uid_fields", "decode", huge, "--layout", "twitter"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "more than 20 digits" in result.stderr
    assert "4300" not in result.stderr and "set_int_max_str_digits" not in result.stderr
    assert TWITTER.coerce("1") == 1
