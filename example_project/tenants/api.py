"""Tenants and tasks in DRF, filtered with django-filter (``?tenant=<id>``, ``?project=``)."""

from django_filters import rest_framework as filters
from rest_framework import serializers, viewsets

from uid_fields.django.rest import UidModelSerializer

from .models import Task, Tenant


class TenantSerializer(UidModelSerializer):
    """A duplicate slug on any shard is a 400 (DRF's UniqueValidator reads every shard)."""

    class Meta:
        model = Tenant
        fields = ["id", "name", "slug"]


class TaskSerializer(UidModelSerializer):
    tenant = serializers.PrimaryKeyRelatedField(read_only=True)

    class Meta:
        model = Task
        fields = ["id", "tenant", "project", "title", "done", "created_by"]
        read_only_fields = ["created_by"]


class TaskFilter(filters.FilterSet):
    """The generated choice lists (tenants, projects) read every shard."""

    class Meta:
        model = Task
        fields = ["tenant", "project", "done"]


class TenantViewSet(viewsets.ModelViewSet):
    serializer_class = TenantSerializer

    def get_queryset(self):
        return Tenant.objects.on_all_shards().order_by("id")


class TaskViewSet(viewsets.ModelViewSet):
    """Tasks of every shard; ``?tenant=<id>`` reads that tenant's shard only."""

    serializer_class = TaskSerializer
    filter_backends = [filters.DjangoFilterBackend]
    filterset_class = TaskFilter

    def get_queryset(self):
        return Task.objects.on_all_shards().select_related("created_by").order_by("-id")

    def perform_create(self, serializer: TaskSerializer) -> None:
        user = self.request.user
        serializer.save(created_by=user if user.is_authenticated else None)
