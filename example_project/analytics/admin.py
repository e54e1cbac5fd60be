from django.contrib import admin

from uid_fields.django.admin import ShardedModelAdmin

from .models import PageView


@admin.register(PageView)
class PageViewAdmin(ShardedModelAdmin):
    list_display = ["path", "customer_id"]
