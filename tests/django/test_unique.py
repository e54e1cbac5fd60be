"""Uniqueness on sharded models (issue 25, items 2 and 4).

Each database enforces a unique index on its own rows only, so a unique value is held
once per shard. Check W002 names the unique sets the databases cannot enforce (those
without the shard key or the id); validation (``full_clean()``, ModelForms, the admin,
DRF's validators) reads every shard such a set can span, and one shard when the set
includes the shard key; none of these paths raises ``ShardRoutingError``.
"""

from __future__ import annotations

import json
from datetime import date
from typing import Any

import pytest
from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, router
from django.test import Client
from django.test.utils import isolate_apps, override_settings
from django.urls import reverse
from rest_framework import serializers
from rest_framework.test import APIClient

from uid_fields import ShardRoutingError
from uid_fields.django import ShardedManager, SnowflakeField, sharded_atomic
from uid_fields.django import checks as uid_checks

from .helpers import capture_all
from .testapp.models import Attachment, Order, Ticket, Workspace, WorkspaceSlug

pytestmark = [pytest.mark.versions, pytest.mark.django_db(databases="__all__")]

SHARDS: list[str] = settings.SHARDS


def shard_of(obj: models.Model) -> str:
    field = type(obj)._meta.pk
    return field.placement.database_of(field.value_from_object(obj))  # type: ignore[attr-defined]


def workspace_on(alias: str, slug: str, **fields: Any) -> Workspace:
    """A saved workspace whose id names ``alias``."""
    while True:
        workspace = Workspace(slug=slug, **fields)
        if shard_of(workspace) == alias:
            workspace.save()
            return workspace


def new_workspace_off(alias: str, **fields: Any) -> Workspace:
    """An unsaved workspace whose id names another shard than ``alias``."""
    while True:
        workspace = Workspace(**fields)
        if shard_of(workspace) != alias:
            return workspace


def two_workspaces() -> tuple[Workspace, Workspace]:
    return workspace_on(SHARDS[0], "w0"), workspace_on(SHARDS[2], "w2")


def messages(caught: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return caught.value.message_dict


# -- the check ---------------------------------------------------------------------------


def test_w002_names_each_unique_set_the_databases_cannot_enforce() -> None:
    warnings = uid_checks.unique_warnings([Workspace, Ticket])
    assert {w.id for w in warnings} == {"uid_fields.W002"}
    named = {(w.obj, w.msg.split(" ", 1)[0]) for w in warnings}
    heads = {(w.obj, w.msg.split(" holds ", 1)[0]) for w in warnings}
    assert heads == {
        (Workspace, "(slug) of Workspace (unique=True)"),
        (Workspace, "(domain) of Workspace (unique=True)"),
        (Ticket, "(reporter, number) of Ticket (unique_together)"),
        (Ticket, "(reference) of Ticket (constraint 'ticket_reference_unique')"),
        (Ticket, "(title) of Ticket (constraint 'ticket_open_title_unique')"),
        (Ticket, "(slot, due) of Ticket (unique_for_date)"),
    }, named
    warning = uid_checks.unique_warnings([Workspace])[0]
    assert "4 databases" in warning.msg and "once per shard" in warning.msg
    assert "default" in (warning.hint or "") and "shard key" in (warning.hint or "")
    # Sets with the shard key are held by the one database their rows share: the
    # message names them as the ones the databases enforce.
    for w in uid_checks.unique_warnings([Ticket]):
        enforced = w.msg.split("databases enforce", 1)[1]
        assert "(workspace, number)" in enforced and "(workspace, title)" in enforced


def test_w002_is_quiet_when_one_database_holds_every_row() -> None:
    config = {**settings.UID_FIELDS, "SHARDS": {"main": {"databases": [SHARDS[0]]}}}
    with override_settings(UID_FIELDS=config):
        assert uid_checks.unique_warnings([Workspace, Ticket]) == []


@isolate_apps("tests.django.testapp")
def test_w002_on_a_follower_model_spares_sets_with_its_parent_key() -> None:
    class Line(models.Model):
        id = SnowflakeField(primary_key=True)  # no shards=: lives with its order
        order = models.ForeignKey(Order, on_delete=models.CASCADE)
        sku = models.CharField(max_length=10, unique=True)
        code = models.CharField(max_length=10)
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"
            unique_together = [("order", "code")]

    texts = [w.msg for w in uid_checks.unique_warnings([Line])]
    assert len(texts) == 1 and "(sku)" in texts[0]


def test_unique_warnings_run_in_the_registered_checks() -> None:
    from django.core.checks import run_checks

    assert "uid_fields.W002" in {m.id for m in run_checks()}


# -- model validation --------------------------------------------------------------------


def test_full_clean_finds_a_duplicate_on_another_shard() -> None:
    existing = workspace_on(SHARDS[1], "acme")
    duplicate = new_workspace_off(SHARDS[1], slug="acme")
    with capture_all() as log, pytest.raises(ValidationError) as caught:
        duplicate.full_clean()
    assert "already exists" in messages(caught)["slug"][0]
    assert log.aliases("SELECT") >= {SHARDS[1]}
    existing.full_clean()  # the row itself is no duplicate of itself
    new_workspace_off(SHARDS[1], slug="other").full_clean()


def test_a_unique_check_reads_every_shard_it_can_span() -> None:
    workspace_on(SHARDS[3], "taken")
    with capture_all() as log:
        Workspace(slug="free").full_clean()
    assert log.aliases("SELECT") == set(SHARDS)


def test_nulls_never_conflict() -> None:
    workspace_on(SHARDS[0], "a", domain=None)
    workspace_on(SHARDS[1], "b", domain=None)
    workspace_on(SHARDS[2], "c", domain="c.example")
    new_workspace_off(SHARDS[0], slug="d", domain=None).full_clean()
    with pytest.raises(ValidationError) as caught:
        new_workspace_off(SHARDS[2], slug="e", domain="c.example").full_clean()
    assert list(messages(caught)) == ["domain"]


def test_a_unique_set_with_the_shard_key_reads_the_keys_shard_only() -> None:
    first, _second = two_workspaces()
    Ticket.objects.create(workspace=first, number=1)
    duplicate = Ticket(workspace=first, number=1)
    with capture_all() as log, pytest.raises(ValidationError) as caught:
        duplicate.validate_unique(exclude=["reporter"])
    assert "Workspace and Number already exists" in str(messages(caught))
    assert log.aliases() == {first._state.db}
    Ticket(workspace=_second, number=1).validate_unique()  # another workspace: no conflict


def test_unique_together_without_the_shard_key_spans_shards() -> None:
    first, second = two_workspaces()
    Ticket.objects.create(workspace=first, number=7, reporter="ann")
    with pytest.raises(ValidationError) as caught:
        Ticket(workspace=second, number=7, reporter="ann").full_clean()
    assert "Reporter and Number already exists" in str(messages(caught))
    Ticket(workspace=second, number=7, reporter="bob").full_clean()
    Ticket(workspace=second, number=7, reporter=None).full_clean()  # NULL: no conflict


def test_unique_for_date_spans_shards() -> None:
    first, second = two_workspaces()
    day = date(2026, 3, 1)
    Ticket.objects.create(workspace=first, number=1, slot="A", due=day)
    with pytest.raises(ValidationError) as caught:
        Ticket(workspace=second, number=1, slot="A", due=day).full_clean()
    assert "must be unique for Due date" in str(messages(caught)["slot"])
    Ticket(workspace=second, number=1, slot="A", due=date(2026, 3, 2)).full_clean()
    Ticket(workspace=second, number=1, slot="B", due=day).full_clean()


def test_validate_constraints_reads_every_shard_a_unique_constraint_spans() -> None:
    first, second = two_workspaces()
    saved = Ticket.objects.create(workspace=first, number=1, reference="R-1")
    duplicate = Ticket(workspace=second, number=2, reference="R-1")
    with pytest.raises(ValidationError) as caught:
        duplicate.validate_constraints()
    assert "already exists" in messages(caught)["reference"][0]
    saved.validate_constraints()  # excludes itself, on its own shard and the others
    Ticket(workspace=second, number=2, reference=None).validate_constraints()


def test_a_conditional_unique_constraint_across_shards() -> None:
    first, second = two_workspaces()
    Ticket.objects.create(workspace=first, number=1, title="Broken", open=True)
    Ticket.objects.create(workspace=first, number=2, title="Old", open=False)
    with pytest.raises(ValidationError):
        Ticket(workspace=second, number=3, title="Broken", open=True).validate_constraints()
    Ticket(workspace=second, number=3, title="Broken", open=False).validate_constraints()
    Ticket(workspace=second, number=3, title="Old", open=True).validate_constraints()


def test_a_unique_constraint_with_the_shard_key_is_checked_on_its_shard() -> None:
    first, second = two_workspaces()
    Ticket.objects.create(workspace=first, number=1, title="Same", open=False)
    with capture_all() as log, pytest.raises(ValidationError) as caught:
        Ticket(workspace=first, number=2, title="Same", open=False).validate_constraints(
            exclude={"reference", "open"}  # leaves the per-workspace constraint only
        )
    assert "Workspace and Title already exists" in str(caught.value)
    assert log.aliases("SELECT") == {first._state.db}
    Ticket(workspace=second, number=2, title="Same", open=False).validate_constraints()


def test_a_follower_model_is_validated_across_its_parents_shards() -> None:
    first, second = two_workspaces()
    ticket = Ticket.objects.create(workspace=first, number=1)
    other = Ticket.objects.create(workspace=second, number=1)
    Attachment.objects.create(ticket=ticket, name="log.txt", checksum="abc")
    assert uid_checks.unique_warnings([Attachment])[0].msg.startswith("(checksum)")
    with pytest.raises(ValidationError) as caught:
        Attachment(ticket=other, name="x", checksum="abc").full_clean()
    assert list(messages(caught)) == ["checksum"]
    with pytest.raises(ValidationError) as caught:
        Attachment(ticket=ticket, name="log.txt", checksum="def").full_clean()
    assert "Ticket and Name already exists" in str(messages(caught))
    Attachment(ticket=other, name="log.txt", checksum="def").full_clean()


@isolate_apps("tests.django.testapp")
def test_a_model_overriding_the_validation_keeps_its_own() -> None:
    from uid_fields.django import unique

    class Own(models.Model):
        id = SnowflakeField(primary_key=True, shards="main")
        objects = ShardedManager()

        class Meta:
            app_label = "testapp"

        def validate_constraints(self, exclude: Any = None) -> None:
            unique.validate_constraints(self, exclude)

    assert Own.validate_constraints is not unique.validate_constraints  # its own
    assert Own.validate_unique is unique.validate_unique  # installed
    assert Workspace.validate_constraints is unique.validate_constraints
    assert Order.validate_unique is unique.validate_unique


# -- forms and the admin (item 4: no exception) ------------------------------------------


class WorkspaceForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Workspace
        fields = ["slug", "domain"]


class TicketForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Ticket
        fields = ["workspace", "number", "reporter", "reference", "title", "open"]


def test_a_model_form_reports_a_duplicate_on_another_shard_and_never_raises() -> None:
    workspace_on(SHARDS[2], "acme")
    for _ in range(4):  # whichever shard the new instance's id names
        form = WorkspaceForm(data={"slug": "acme"})
        assert not form.is_valid()
        assert "already exists" in form.errors["slug"][0]
    fresh = WorkspaceForm(data={"slug": "fresh"})
    assert fresh.is_valid(), fresh.errors
    saved = fresh.save()
    assert Workspace.objects.get(pk=saved.pk).slug == "fresh"


def test_a_model_form_editing_a_row_keeps_its_own_value() -> None:
    existing = workspace_on(SHARDS[0], "mine", domain="mine.example")
    form = WorkspaceForm(data={"slug": "mine", "domain": "mine.example"}, instance=existing)
    assert form.is_valid(), form.errors


def test_a_model_form_of_co_located_rows_checks_constraints_across_shards() -> None:
    first, second = two_workspaces()
    Ticket.objects.create(workspace=first, number=1, reference="R-9")
    form = TicketForm(data={"workspace": str(second.pk), "number": "1", "reference": "R-9"})
    assert not form.is_valid()
    assert "already exists" in form.errors["reference"][0]


@pytest.fixture
def admin_client() -> Client:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_add_view_reports_a_duplicate_slug(admin_client: Client) -> None:
    workspace_on(SHARDS[3], "acme")
    url = reverse("admin:testapp_workspace_add")
    for _ in range(4):
        response = admin_client.post(url, {"slug": "acme", "domain": ""})
        assert response.status_code == 200
        assert "Workspace with this Slug already exists." in response.content.decode()
    assert Workspace.objects.filter(slug="acme").count() == 1
    created = admin_client.post(url, {"slug": "new-one", "domain": ""})
    assert created.status_code == 302
    assert Workspace.objects.get(slug="new-one").slug == "new-one"


def test_the_admin_change_view_saves_a_row_with_its_own_slug(admin_client: Client) -> None:
    existing = workspace_on(SHARDS[1], "kept")
    url = reverse("admin:testapp_workspace_change", args=[existing.pk])
    response = admin_client.post(url, {"slug": "kept", "domain": "kept.example"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Workspace.objects.get(pk=existing.pk).domain == "kept.example"


# -- DRF (item 4: a create was a 500 every time) -----------------------------------------


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def test_a_drf_create_validates_a_unique_field_across_shards(api: APIClient) -> None:
    created = api.post("/api/workspaces/", {"slug": "acme"}, format="json")
    assert created.status_code == 201, created.content
    for _ in range(4):
        again = api.post("/api/workspaces/", {"slug": "acme"}, format="json")
        assert again.status_code == 400
        assert "slug" in json.loads(again.content)
    assert Workspace.objects.filter(slug="acme").count() == 1
    pk = json.loads(created.content)["id"]
    same = api.patch(f"/api/workspaces/{pk}/", {"slug": "acme"}, format="json")
    assert same.status_code == 200, same.content  # the row itself is no conflict


def test_drf_plain_model_serializers_validate_across_shards() -> None:
    class PlainWorkspace(serializers.ModelSerializer):  # type: ignore[type-arg]
        class Meta:
            model = Workspace
            fields = ["slug", "domain"]

    class PlainTicket(serializers.ModelSerializer):  # type: ignore[type-arg]
        class Meta:
            model = Ticket
            fields = ["workspace", "number", "reporter"]

    first, second = two_workspaces()
    Ticket.objects.create(workspace=first, number=4, reporter="ann")
    taken = PlainWorkspace(data={"slug": first.slug})
    assert not taken.is_valid() and "slug" in taken.errors
    assert PlainWorkspace(data={"slug": "free"}).is_valid()
    pair = PlainTicket(data={"workspace": second.pk, "number": 4, "reporter": "ann"})
    assert not pair.is_valid() and "non_field_errors" in pair.errors
    assert PlainTicket(data={"workspace": second.pk, "number": 4, "reporter": "bob"}).is_valid()


def test_drf_unique_together_and_constraints_across_shards(api: APIClient) -> None:
    first, second = two_workspaces()
    Ticket.objects.create(workspace=first, number=5, reporter="ann", reference="R-5")
    Ticket.objects.create(workspace=first, number=6, title="Down", open=True)

    def post(**data: Any) -> Any:
        body = {"workspace": str(second.pk), "number": 9, **data}
        return api.post("/api/tickets/", body, format="json")

    assert post(number=5, reporter="ann").status_code == 400  # (reporter, number)
    assert post(reference="R-5").status_code == 400  # UniqueConstraint(reference)
    assert post(title="Down", open=True).status_code == 400  # open titles
    ok = post(number=5, reporter="bob", reference="R-6", title="Down", open=False)
    assert ok.status_code == 201, ok.content
    same_ws = api.post(
        "/api/tickets/", {"workspace": str(first.pk), "number": 5}, format="json"
    )  # (workspace, number), enforced on the workspace's shard
    assert same_ws.status_code == 400


# -- routing of a lookup by a unique set -------------------------------------------------


def test_a_lookup_by_a_whole_unique_set_reads_the_shards_it_can_span() -> None:
    workspace = workspace_on(SHARDS[2], "find-me")
    with capture_all() as log:
        assert Workspace.objects.get(slug="find-me") == workspace
    assert log.aliases("SELECT") == set(SHARDS)
    ticket = Ticket.objects.create(workspace=workspace, number=3, reporter="x")
    assert Ticket.objects.get(reporter="x", number=3) == ticket
    with capture_all() as log:
        assert Ticket.objects.get(workspace=workspace, number=3) == ticket
    assert log.aliases() == {workspace._state.db}
    with pytest.raises(ShardRoutingError):
        list(Workspace.objects.filter(slug__startswith="find"))  # not a unique lookup
    with pytest.raises(ShardRoutingError):
        list(Ticket.objects.filter(number=3))  # part of a set only


# -- the docs' key table on default ------------------------------------------------------


def create_workspace(slug: str, **fields: Any) -> Workspace:
    """docs/uniqueness.md: the slug is claimed on default in the same transaction."""
    workspace = Workspace(slug=slug, **fields)  # the id, so the shard, exists already
    shard = router.db_for_write(Workspace, instance=workspace)
    with sharded_atomic("default", shard):
        WorkspaceSlug.objects.create(slug=slug, workspace_id=workspace.pk)
        workspace.save(using=shard)
    return workspace


def rename_workspace(workspace: Workspace, slug: str) -> None:
    with sharded_atomic("default", workspace._state.db):
        WorkspaceSlug.objects.filter(workspace_id=workspace.pk).update(slug=slug)
        workspace.slug = slug
        workspace.save(update_fields=["slug"])


def delete_workspace(workspace: Workspace) -> None:
    with sharded_atomic("default", workspace._state.db):
        WorkspaceSlug.objects.filter(workspace_id=workspace.pk).delete()
        workspace.delete()


def test_the_key_table_on_default_makes_the_databases_enforce_it() -> None:
    first = create_workspace("solo")
    for _ in range(8):  # whatever shard each new id names
        with pytest.raises(IntegrityError):
            create_workspace("solo")
    assert Workspace.objects.on_all_shards().filter(slug="solo").count() == 1
    claimed = WorkspaceSlug.objects.get(slug="solo")
    assert Workspace.objects.get(pk=claimed.workspace_id) == first
    second = create_workspace("duo")
    with pytest.raises(IntegrityError):
        rename_workspace(second, "solo")
    assert Workspace.objects.get(pk=second.pk).slug == "duo"  # both sides rolled back
    assert WorkspaceSlug.objects.get(workspace_id=second.pk).slug == "duo"
    rename_workspace(second, "trio")
    assert WorkspaceSlug.objects.get(workspace_id=second.pk).slug == "trio"
    delete_workspace(first)
    create_workspace("solo")  # free again
    assert Workspace.objects.get(slug="solo").pk != first.pk
