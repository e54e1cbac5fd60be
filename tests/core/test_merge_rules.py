"""The explicit NULLS position of an ordering is read by one core rule for both ORMs."""

from __future__ import annotations

import pytest

from uid_fields.errors import UnmergeableQueryError
from uid_fields.ops.merge import explicit_nulls, reversed_nulls


def test_an_explicit_nulls_position_is_named_once_for_both_orms() -> None:
    assert explicit_nulls(True, False) == "first"
    assert explicit_nulls(False, True) == "last"
    assert explicit_nulls(False, False) is None
    assert reversed_nulls(explicit_nulls(True, False)) == "last"
    with pytest.raises(UnmergeableQueryError, match="both first and last"):
        explicit_nulls(True, True)
