from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import Customer


@admin.register(Customer)
class CustomerAdmin(ShardedModelAdmin):
    list_display = ["name", "email", "shard"]
    search_fields = ["name"]
