from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import Order, OrderLine


class OrderLineInline(admin.TabularInline):
    model = OrderLine
    extra = 0


@admin.register(Order)
class OrderAdmin(ShardedModelAdmin):
    list_display = ["customer", "status", "channel", "placed_on", "total_cents", "note"]
    # over "All shards" too: the channels are the distinct values of every shard, the
    # date hierarchy their dates(), facets counted by aggregate(Count(filter=...))
    list_filter = ["status", "channel"]
    date_hierarchy = "placed_on"
    search_fields = ["customer__name"]
    inlines = [OrderLineInline]
    autocomplete_fields = ["customer"]  # customers of every shard, searched by name
