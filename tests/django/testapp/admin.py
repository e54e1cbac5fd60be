from __future__ import annotations

from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import (
    Customer,
    LegacyRow,
    Note,
    Order,
    PageView,
    Photo,
    PhpRow,
    Purchase,
    PurchaseLine,
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


@admin.register(Purchase)
class PurchaseAdmin(ShardedModelAdmin):
    list_display = ["total", "customer"]
    inlines = [PurchaseLineInline]


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


for model in (Photo, PageView, LegacyRow, PhpRow):
    admin.site.register(model, ShardedModelAdmin)


@admin.register(Workspace)
class WorkspaceAdmin(ShardedModelAdmin):
    list_display = ["slug", "domain"]


@admin.register(Ticket)
class TicketAdmin(ShardedModelAdmin):
    list_display = ["number", "reference"]
    list_filter = ["workspace"]  # the admin builds its choices with Field.get_choices()
