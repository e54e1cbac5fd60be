"""``uid_fields audit``: rows stored on a database their id does not name."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.django.testapp.models import Order, Photo
from uid_fields.django import allow_off_shard_writes
from uid_fields.django.ops.audit import audit_model

pytestmark = pytest.mark.django_db(databases="__all__")


def _elsewhere(model: type, obj: object) -> str:
    placement = model._meta.pk.placement  # type: ignore[attr-defined]
    home = placement.database_of(obj.pk)  # type: ignore[attr-defined]
    return next(a for a in placement.databases if a != home)


@pytest.mark.parametrize(("model", "method"), [(Photo, "sql"), (Order, "scan")])
def test_audit_finds_exactly_the_rows_off_their_shard(model: type, method: str) -> None:
    extra = {"owner_id": 7} if model is Photo else {}
    for _ in range(20):
        model.objects.create(**extra)
    assert sum(r.misplaced for r in audit_model(model)) == 0
    stray = model(**extra)
    wrong = _elsewhere(model, stray)
    with allow_off_shard_writes():
        stray.save(using=wrong)
    results = {r.database: r for r in audit_model(model)}
    assert {r.method for r in results.values()} == {method}
    assert results[wrong].misplaced == 1 and results[wrong].samples == [stray.pk]
    assert sum(r.misplaced for r in results.values()) == 1


def test_the_command_reports_and_fails_on_misplaced_rows() -> None:
    Photo.objects.create(owner_id=1)
    out = StringIO()
    call_command("uid_fields", "audit", "testapp.Photo", stdout=out)
    assert "every row is on its shard" in out.getvalue()
    stray = Photo(owner_id=2)
    with allow_off_shard_writes():
        stray.save(using=_elsewhere(Photo, stray))
    out = StringIO()
    with pytest.raises(CommandError, match="1 rows are stored off their shard"):
        call_command("uid_fields", "audit", "testapp.Photo", stdout=out)
    assert str(stray.pk) in out.getvalue()


@pytest.mark.parametrize("label", ["nosuchapp.Nope", "nosuchapp", "testapp.Nope", "auth.User"])
def test_audit_of_what_is_not_a_sharded_model_is_an_error(label: str) -> None:
    """An unknown app or model (or one not on shards) checks nothing: saying "every row
    is on its shard" would be a false all-clear."""
    out = StringIO()
    with pytest.raises(CommandError, match=label.split(".")[-1]):
        call_command("uid_fields", "audit", label, stdout=out)
    assert "every row is on its shard" not in out.getvalue()
