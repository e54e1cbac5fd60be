from rest_framework import viewsets

from uid_fields.django.rest import IdTimeFilter, UidModelSerializer

from .models import Order


class OrderSerializer(UidModelSerializer):
    class Meta:
        model = Order
        fields = ["id", "customer", "status", "total_cents", "note"]


class OrderViewSet(viewsets.ModelViewSet):
    """Orders on every shard, newest first; ids are strings in the JSON."""

    serializer_class = OrderSerializer
    filter_backends = [IdTimeFilter]

    def get_queryset(self):
        return Order.objects.on_all_shards().order_by("-id")
