from __future__ import annotations

from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import Customer, LegacyRow, Order, PageView, Photo, PhpRow, Purchase, PurchaseLine


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


for model in (Customer, Photo, PageView, LegacyRow, PhpRow):
    admin.site.register(model, ShardedModelAdmin)
