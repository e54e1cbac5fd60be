"""The rules both adapters follow are decided once, in the core, and the adapters agree:
each test here runs the same case through the Django adapter and the SQLAlchemy one."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from sqlalchemy import create_engine, select
from sqlalchemy.engine import Engine

from tests.django.testapp.models import Order
from tests.sqlalchemy.models import Base
from tests.sqlalchemy.models import Order as SqlaOrder
from uid_fields.django import DeepOffsetWarning
from uid_fields.ops import pages
from uid_fields.sqlalchemy import sharded_session

pytestmark = pytest.mark.django_db(databases="__all__")

THRESHOLD = 8


@pytest.fixture
def sqlalchemy_shards(tmp_path: Path) -> Iterator[dict[str, Engine]]:
    engines = {f"s{n}": create_engine(f"sqlite:///{tmp_path / f's{n}.db'}") for n in range(2)}
    for engine in engines.values():
        Base.metadata.create_all(engine)
    yield engines
    for engine in engines.values():
        engine.dispose()


def _deep_offset_warnings(run: Callable[[], Any]) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [str(w.message) for w in caught if issubclass(w.category, DeepOffsetWarning)]


def test_a_deep_offset_warns_alike_in_both_adapters(
    sqlalchemy_shards: dict[str, Engine],
) -> None:
    """Above the threshold, once per query shape, whatever DEBUG says (tests run with
    it off, as production does: where a deep OFFSET costs)."""
    assert not settings.DEBUG
    limits = {**settings.UID_FIELDS, "FAN_OUT_OFFSET_WARNING": THRESHOLD}
    offsets = (THRESHOLD, THRESHOLD + 1, THRESHOLD + 5)
    pages.forget_deep_offsets()
    try:
        with override_settings(UID_FIELDS=limits):
            django = [
                _deep_offset_warnings(partial(list, Order.objects.on_all_shards()[o : o + 2]))
                for o in offsets
            ]
        with sharded_session(sqlalchemy_shards, fan_out_offset_warning=THRESHOLD) as session:
            statement = select(SqlaOrder.id).order_by(SqlaOrder.id).limit(2)

            def page(offset: int) -> list[Any]:
                return list(session.on_all_shards(statement.offset(offset)).all())

            sqlalchemy = [_deep_offset_warnings(partial(page, o)) for o in offsets]
    finally:
        pages.forget_deep_offsets()
    assert [len(found) for found in django] == [0, 1, 0]  # at it: none; above: once
    assert [len(found) for found in sqlalchemy] == [0, 1, 0]
    said = f"OFFSET {THRESHOLD + 1}"
    assert said in django[1][0] and said in sqlalchemy[1][0]
