"""The test project's settings keep the suite fast on a loaded machine."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import check_password, get_hasher, make_password
from django.contrib.auth.models import User


def test_passwords_are_hashed_with_a_fast_hasher() -> None:
    """The admin tests log in a superuser; the default PBKDF2 takes ~1 M iterations per
    hash, which a loaded 2-core machine feels. MD5 is fine for test users."""
    assert get_hasher().algorithm == "md5"
    assert check_password("pw", make_password("pw"))


@pytest.mark.django_db
def test_a_superuser_is_made_with_it() -> None:
    user = User.objects.create_superuser("fast", "fast@example.com", "pw")
    assert user.password.startswith("md5$") and user.check_password("pw")
