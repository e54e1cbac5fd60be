from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import Order, OrderLine


class OrderLineInline(admin.TabularInline):
    model = OrderLine
    extra = 0


@admin.register(Order)
class OrderAdmin(ShardedModelAdmin):
    list_display = ["customer", "status", "total_cents", "note"]
    list_filter = ["status"]
    inlines = [OrderLineInline]
    autocomplete_fields = ["customer"]  # customers of every shard, searched by name
