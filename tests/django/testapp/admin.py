from __future__ import annotations

from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import (
    Board,
    Card,
    CardStep,
    Customer,
    LegacyRow,
    Memo,
    Note,
    Order,
    PageView,
    Photo,
    PhpRow,
    Purchase,
    PurchaseLine,
    Remark,
    Review,
    Ticket,
    Workspace,
)


@admin.register(Order)
class OrderAdmin(ShardedModelAdmin):
    list_display = ["id", "note"]
    search_fields = ["note"]


class PurchaseLineInline(admin.TabularInline):  # type: ignore[type-arg]
    model = PurchaseLine
    extra = 1


class RemarkInline(admin.TabularInline):  # type: ignore[type-arg]
    """A follower (an id of its own, no shards=) edited under its sharded parent."""

    model = Remark
    extra = 1


@admin.register(Purchase)
class PurchaseAdmin(ShardedModelAdmin):
    list_display = ["total", "customer"]
    inlines = [PurchaseLineInline, RemarkInline]


@admin.register(Customer)
class CustomerAdmin(ShardedModelAdmin):
    search_fields = ["name"]


@admin.register(Review)
class ReviewAdmin(ShardedModelAdmin):
    autocomplete_fields = ["order"]


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """An ordinary model on default with a key to a sharded customer."""

    raw_id_fields = ["customer"]


@admin.register(Card)
class CardAdmin(ShardedModelAdmin):
    """Keys in ``list_display`` to a board on any shard and to ``auth.User`` on default:
    Django's changelist joins them (``select_related()``)."""

    list_display = ["title", "board", "created_by", "coupon"]
    search_fields = ["title"]


@admin.register(Board)
class BoardAdmin(ShardedModelAdmin):
    """A nullable key to ``default`` joined by the changelist (as Django 6.1 does for
    every key in ``list_display``)."""

    list_display = ["name", "owner"]
    list_select_related = ["owner"]
    search_fields = ["name"]


@admin.register(CardStep)
class CardStepAdmin(ShardedModelAdmin):
    """A column sorted through the co-located card: one shard joins it, a merge of every
    shard's rows cannot repeat it."""

    list_display = ["label", "card_title"]

    @admin.display(ordering="card__title")
    def card_title(self, obj: CardStep) -> str:
        return obj.card.title


@admin.register(Memo)
class MemoAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """An ordinary model's admin with a key to sharded rows in ``list_display``."""

    list_display = ["text", "board"]


for model in (Photo, PageView, LegacyRow, PhpRow, Remark):
    admin.site.register(model, ShardedModelAdmin)


@admin.register(Workspace)
class WorkspaceAdmin(ShardedModelAdmin):
    list_display = ["slug", "domain"]


@admin.register(Ticket)
class TicketAdmin(ShardedModelAdmin):
    """A changelist of every shard with what Django's admin runs as GROUP BY, DISTINCT
    and aggregates: a date hierarchy (``dates()``, Min/Max), a filter on a plain field
    (its distinct values), facets (``aggregate(Count(..., filter=Q(...)))``)."""

    list_display = ["number", "reference", "reporter", "due"]
    # the admin builds the workspace choices with Field.get_choices()
    list_filter = ["workspace", "reporter", "open"]
    date_hierarchy = "due"
    search_fields = ["title"]
