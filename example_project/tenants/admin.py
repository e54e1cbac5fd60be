from typing import Any

from django.contrib import admin
from django.forms import BaseInlineFormSet, ModelForm
from django.http import HttpRequest

from uid_fields.django.admin import ShardedModelAdmin

from .models import Comment, Project, Task, Tenant


@admin.register(Tenant)
class TenantAdmin(ShardedModelAdmin):
    list_display = ["name", "slug", "shard"]
    search_fields = ["name", "slug"]


@admin.register(Project)
class ProjectAdmin(ShardedModelAdmin):
    list_display = ["name", "tenant"]
    search_fields = ["name"]


class CommentInline(admin.TabularInline):
    """Comments live with their task: read and written on the task's shard."""

    model = Comment
    fields = ["body", "author"]
    extra = 1


@admin.register(Task)
class TaskAdmin(ShardedModelAdmin):
    list_display = ["title", "project", "tenant", "created_by", "done"]
    list_filter = ["done"]
    readonly_fields = ["tenant", "created_by"]
    inlines = [CommentInline]

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        if not change and obj.created_by_id is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def save_formset(
        self, request: HttpRequest, form: ModelForm, formset: BaseInlineFormSet, change: bool
    ) -> None:
        for comment in formset.save(commit=False):
            if comment.author_id is None:
                comment.author = request.user
            comment.save()
        for gone in formset.deleted_objects:
            gone.delete()
        formset.save_m2m()
