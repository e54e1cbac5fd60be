"""Ids given in another form than the column's, and the session's own argument checks.

- An id assigned as text (``Order(id="384...")``) is stored as the column's Python type
  at once, so the identity map holds one key per row: a later ``get(Order, 384...)``
  finds the same object, without a SELECT.
- Text is an id under one rule, the core's (``uid_fields.ids.layouts.coerce_id``):
  1 to 20 ASCII digits, nothing else (no sign, no space, no newline); leading zeros
  are allowed (a decimal id's 20-digit form has them). Django follows the same rule
  (``tests/django/test_id_text.py``).
- ``sharded_session`` refuses SQLAlchemy's choosers by name: its routing replaces them.
- A shard key that is no key is reported under the key's name, not the id's.
"""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from uid_fields import ShardKeyError
from uid_fields.ids.layouts import SIGNED_MAX, coerce_id
from uid_fields.sqlalchemy import sharded_session

from .conftest import recording
from .models import Event, Item, Order, Photo


def test_an_id_given_as_text_becomes_the_columns_type(shards: dict[str, Engine]) -> None:
    made = Order().id
    order = Order(id=str(made))
    assert type(order.id) is int and order.id == made
    event_id = Event().id
    event = Event(id=str(event_id))
    assert type(event.id) is uuid.UUID and event.id == event_id
    item = Item(order_id=str(made), line=1)
    assert type(item.order_id) is int
    photo = Photo(owner_id=5)
    photo.id = str(photo.id)  # type: ignore[assignment]
    assert type(photo.id) is int
    with sharded_session(shards, expire_on_commit=False) as session:
        session.add_all([order, event, item, photo])
        session.commit()
        assert all(type(key[1][0]) is not str for key in session.identity_map)
        with recording(shards) as log:
            assert session.get(Order, made) is order  # the identity map: no SELECT
            assert session.get(Event, event_id) is event
        assert log.count() == 0
        assert session.get(Order, str(made)) is order
        assert session.get(Order, f"0{made}") is order  # leading zeros: the same id


def test_text_that_is_no_id_is_refused_on_assignment() -> None:
    for bad in ["abc", " 384", "384\n", "+384", "-1", "3_84", "١٢", ""]:
        with pytest.raises(ValueError, match=r"not an id|out of range"):
            Order(id=bad)
    with pytest.raises(ValueError, match="is not a UUID"):
        Event(id="not-a-uuid")


@pytest.mark.parametrize("form", ["{} ", " {}", "{}\n", "\t{}", "+{}", "{}.0", "0x{:x}"])
def test_get_follows_the_core_rule_for_text(shards: dict[str, Engine], form: str) -> None:
    made = Order().id
    with sharded_session(shards) as session:
        session.add(Order(id=made))
        session.commit()
        session.expunge_all()
        assert session.get(Order, form.format(made)) is None
        assert session.get(Order, f"00{made}") is not None


def test_the_core_rule_for_id_text() -> None:
    assert coerce_id("384", max_value=SIGNED_MAX) == 384
    assert coerce_id("000384", max_value=SIGNED_MAX) == 384
    assert coerce_id("0" * 20, max_value=SIGNED_MAX) == 0  # a decimal id's zero-padded form
    for bad in [" 384", "384 ", "384\n", "+384", "-384", "3_84", "٣٨٤", "", "0" * 21]:
        with pytest.raises(ValueError, match="not an id"):
            coerce_id(bad, max_value=SIGNED_MAX)


@pytest.mark.parametrize("chooser", ["shard_chooser", "identity_chooser", "execute_chooser"])
def test_sqlalchemys_choosers_are_refused_by_name(
    sqlite_shards: dict[str, Engine], chooser: str
) -> None:
    with pytest.raises(TypeError, match=f"{chooser}=.*routing.*replaces"):
        sharded_session(sqlite_shards, **{chooser: lambda *args, **kwargs: None})


def test_a_bad_shard_key_in_a_query_names_the_key(sqlite_shards: dict[str, Engine]) -> None:
    with sharded_session(sqlite_shards) as session:
        with pytest.raises(ShardKeyError) as raised:
            session.scalars(select(Photo).where(Photo.owner_id == "abc")).all()
        assert "photos.owner_id='abc'" in str(raised.value)
        with pytest.raises(ShardKeyError, match=r"photos\.owner_id"):
            Photo(owner_id="abc")
