"""A small DRF API over the test models: string ids come from the opt-in serializer bases."""

from __future__ import annotations

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import serializers, viewsets
from rest_framework.renderers import BrowsableAPIRenderer

from uid_fields.django.rest import (
    IdTimeFilter,
    PublicIdLookupMixin,
    UidJSONRenderer,
    UidModelSerializer,
    UidSerializerMixin,
)

from .models import Customer, Order, PageView, Photo, Purchase, Ticket, Workspace


class OrderSerializer(UidModelSerializer):
    class Meta:
        model = Order
        fields = ["id", "note"]


class PurchaseSerializer(UidSerializerMixin, serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Purchase
        fields = ["id", "customer", "total"]


class PageViewSerializer(UidModelSerializer):
    class Meta:
        model = PageView
        fields = ["id", "path"]


class OrderViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = OrderSerializer
    filter_backends = [IdTimeFilter]

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Order.objects.on_all_shards()


class PurchaseViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = PurchaseSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Purchase.objects.on_all_shards()


class CustomerSerializer(UidModelSerializer):
    class Meta:
        model = Customer
        fields = ["id", "name"]


class PlainCustomerSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """DRF's own ModelSerializer, which the app must leave as DRF made it."""

    class Meta:
        model = Customer
        fields = ["id", "name"]


class PlainPurchaseSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    class Meta:
        model = Purchase
        fields = ["id", "customer", "total"]


# -- uniqueness across shards, and choice lists of sharded rows (issue 25, items 2, 4, 6) --


class WorkspaceSerializer(UidModelSerializer):
    class Meta:
        model = Workspace
        fields = ["id", "slug", "domain"]


class TicketSerializer(UidModelSerializer):
    class Meta:
        model = Ticket
        fields = ["id", "workspace", "number", "reporter", "reference", "title", "open"]


class WorkspaceViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = WorkspaceSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Workspace.objects.on_all_shards()


class TicketViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = TicketSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Ticket.objects.on_all_shards()


class PurchaseFilter(django_filters.FilterSet):
    """django-filter's generated ModelChoiceFilter over a key to a sharded model."""

    class Meta:
        model = Purchase
        fields = ["customer"]


class FilteredPurchaseViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    """DRF's own ModelSerializer (a plain PrimaryKeyRelatedField) and a FilterSet."""

    serializer_class = PlainPurchaseSerializer
    renderer_classes = [UidJSONRenderer, BrowsableAPIRenderer]
    filter_backends = [DjangoFilterBackend]
    filterset_class = PurchaseFilter

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Purchase.objects.on_all_shards()


class PublicOrderSerializer(UidModelSerializer):
    """Orders by their public token: ``id`` is ``ord_...``, never the stored id."""

    class Meta:
        model = Order
        fields = ["id", "note"]
        public_ids = True


class PublicPurchaseSerializer(UidModelSerializer):
    """The purchase's own token and its customer's (``cus_...``), read and written."""

    class Meta:
        model = Purchase
        fields = ["id", "customer", "total"]
        public_ids = True


class PublicOrderViewSet(PublicIdLookupMixin, viewsets.ModelViewSet):  # type: ignore[type-arg]
    """``/api/public-orders/<token>/``: the token is decoded to the id, one shard is read."""

    serializer_class = PublicOrderSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Order.objects.on_all_shards()


class PublicPurchaseViewSet(PublicIdLookupMixin, viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = PublicPurchaseSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Purchase.objects.on_all_shards()


class PhotoSerializer(UidModelSerializer):
    """A plain shard key (``owner_id``): a PATCH of it is a key change."""

    class Meta:
        model = Photo
        fields = ["id", "owner_id", "caption"]


class PhotoViewSet(viewsets.ModelViewSet):  # type: ignore[type-arg]
    serializer_class = PhotoSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        return Photo.objects.on_all_shards()
