"""No secret or password appears in any message, repr or check output (issue 37, item 4).

An unreachable Redis's error is checked in ``test_redis_sequence.py`` (it needs redis-py)."""

from __future__ import annotations

import pytest

from uid_fields import PublicIds
from uid_fields._internal.redact import redact, redact_url
from uid_fields.config.public_ids import public_ids_problems
from uid_fields.errors import ConfigurationError
from uid_fields.ids.sequences import RedisSequence

SECRET = "s3cr3t-key-material-of-32-bytes!!"
PASSWORD = "hunter2-pass"


def test_a_secret_given_as_a_version_is_not_quoted() -> None:
    """``{SECRET: 1}`` swaps the secret and its version: the error says so, unquoted."""
    with pytest.raises(ConfigurationError) as raised:
        PublicIds("ord", {SECRET: 1})  # type: ignore[dict-item]
    assert SECRET not in str(raised.value)
    assert "swapped" in str(raised.value)
    problems = public_ids_problems({"KEYS": {SECRET: 1}})
    assert problems and all(SECRET not in f"{p.path} {p.message}" for p in problems)


def test_a_short_secret_is_not_printed_either() -> None:
    with pytest.raises(ConfigurationError) as raised:
        PublicIds("ord", {1: "short-secret"})
    assert "short-secret" not in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        f"redis://:{PASSWORD}@127.0.0.1:1/0",
        f"redis://user:{PASSWORD}@127.0.0.1:1/0",
        f"redis://127.0.0.1:1/0?password={PASSWORD}",
        f"redis://127.0.0.1:1/0?db=0&token={PASSWORD}&socket_timeout=1",
        f"postgresql://app:{PASSWORD}@127.0.0.1:1/db?sslpassword={PASSWORD}",
    ],
)
def test_urls_lose_their_userinfo_password_and_secret_parameters(url: str) -> None:
    assert PASSWORD not in redact_url(url)
    assert "127.0.0.1:1" in redact_url(url)
    assert PASSWORD not in redact(f"cannot reach {url} (refused)")


def test_the_repr_of_a_redis_sequence_has_no_password() -> None:
    """repr() reads only the URL and the mode: shown for a sequence whose server is
    not asked (this Redis has no password, so one with a password cannot connect)."""
    sequence = object.__new__(RedisSequence)
    sequence.url, sequence.mode = f"redis://127.0.0.1:6379/0?password={PASSWORD}", "php"
    assert PASSWORD not in repr(sequence) and "127.0.0.1:6379" in repr(sequence)
