"""Whatever goes in, only the documented error types come out.

Every decoder (each preset layout, locality UUIDs, uniqids) with its decoded parts, the
CLI and the settings parser, fed arbitrary input: a value, or ``ValueError`` /
``TypeError`` (``ConfigurationError`` is a ``ValueError``) for the decoders and the
parser, an exit status for the CLI. Never an ``OverflowError``, ``KeyError``,
``AttributeError`` or a traceback.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from uid_fields import ConfigurationError, locality, uniqid
from uid_fields.cli import main
from uid_fields.config import UidConfig, validate
from uid_fields.ids.layouts import PRESETS

DOCUMENTED = (ValueError, TypeError)

ids = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789abcdef-", max_size=40),
    st.integers(-(2**70), 2**70),
    st.binary(max_size=20),
    st.none(),
    st.floats(allow_nan=True),
)


def read_parts(parts: Any) -> None:
    """Every attribute of decoded parts that users and the admin read."""
    for name in ("timestamp_ms", "datetime", "value"):
        getattr(parts, name, None)
    parts.as_dict()


@given(ids)
def test_every_preset_layout_decodes_or_says_valueerror(value: object) -> None:
    for layout in PRESETS.values():
        try:
            parts = layout.decompose(value)  # type: ignore[arg-type]
            read_parts(parts)
        except DOCUMENTED:
            continue


@given(ids)
def test_locality_decodes_or_says_valueerror(value: object) -> None:
    with contextlib.suppress(DOCUMENTED):
        read_parts(locality.decompose(value))  # type: ignore[arg-type]


@given(ids, st.one_of(st.integers(-3, 12), st.none(), st.text(max_size=3)))
def test_uniqid_decodes_or_says_valueerror(value: object, total: object) -> None:
    with contextlib.suppress(DOCUMENTED):
        read_parts(uniqid.decompose(value, total))  # type: ignore[arg-type]


words = st.one_of(
    st.sampled_from(
        [
            "decode",
            "generate",
            "inspect",
            "--layout",
            "--epoch",
            "--shards",
            "--json",
            "-n",
            "--field",
            "--shard",
            "--sequential",
            "twitter",
            "instagram",
            "locality",
            "uniqid",
            "decimal",
            "worker=3",
            "shard=9999",
            "2024-13-45",
            "-1",
            "0",
            "99999999999999999999999",
            str(2**64),
        ]
    ),
    st.text(max_size=12),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(words, max_size=7))
def test_the_cli_answers_with_an_exit_status(argv: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status: object = main(argv)
        except SystemExit as exit_:  # argparse's usage errors
            status = exit_.code
    assert status in (0, 1, 2, None)
    assert "Traceback" not in err.getvalue()


keys = st.sampled_from(
    [
        "GENERATORS",
        "SHARDS",
        "kind",
        "layout",
        "epoch",
        "fields",
        "databases",
        "max_backward_ms",
        "sequence",
        "single_process",
        "total_shards",
        "sequential",
        "worker",
        "datacenter",
        "lease",
        "url",
        "name",
        "ttl",
        "margin",
        "env",
        "redis",
        "default",
        "main",
        "key_hash",
        "logical_shards",
        "ranges",
    ]
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.sampled_from(["snowflake", "sharded", "locality", "decimal", "uniqid", "twitter"]),
    st.sampled_from(["instagram", "2024-01-01T00:00:00Z", "redis", "database", "modulo"]),
)
settings_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(settings_values, st.dictionaries(keys, settings_values, max_size=4)))
def test_the_settings_parser_reports_problems_never_crashes(value: object) -> None:
    problems = validate(value)
    assert isinstance(problems, list)
    try:
        UidConfig(value)
    except ConfigurationError as exc:
        assert problems, "UidConfig refused settings that validate() accepted"
        assert str(exc)
