"""A small DRF API over the test models: string ids come from the opt-in serializer bases."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from uid_fields.django.rest import IdTimeFilter, UidModelSerializer, UidSerializerMixin

from .models import Customer, Order, PageView, Purchase


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
