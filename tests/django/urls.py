from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import include, path, register_converter
from rest_framework.routers import DefaultRouter

from uid_fields.django.web.converters import PublicIdConverter

from .testapp.api import (
    FilteredPurchaseViewSet,
    OrderViewSet,
    PhotoViewSet,
    PublicOrderViewSet,
    PublicPurchaseViewSet,
    PurchaseViewSet,
    TicketViewSet,
    WorkspaceViewSet,
)
from .testapp.models import Customer, Order, PageView, Purchase

router = DefaultRouter()
router.register("orders", OrderViewSet, basename="order")
router.register("purchases", PurchaseViewSet, basename="purchase")
router.register("photos", PhotoViewSet, basename="photo")
router.register("workspaces", WorkspaceViewSet, basename="workspace")
router.register("tickets", TicketViewSet, basename="ticket")
router.register("filtered-purchases", FilteredPurchaseViewSet, basename="filtered-purchase")
router.register("public-orders", PublicOrderViewSet, basename="public-order")
router.register("public-purchases", PublicPurchaseViewSet, basename="public-purchase")
# Only customers' tokens match <customer:...>; <public:...> takes any model's.
register_converter(PublicIdConverter.for_model(Customer), "customer")


def order_detail(request: HttpRequest, pk: int) -> HttpResponse:
    order = get_object_or_404(Order, pk=pk)
    return JsonResponse({"id": str(order.pk), "shard": order._state.db})


def customer_purchases(request: HttpRequest, customer_id: int) -> HttpResponse:
    purchases = Purchase.objects.filter(customer_id=customer_id)
    if not purchases.exists():
        get_object_or_404(Customer, pk=customer_id)
    return JsonResponse({"purchases": [str(p.pk) for p in purchases]})


def order_by_token(request: HttpRequest, order: int) -> HttpResponse:
    """``orders/<public:order>/``: the converter gave the stored id, so this reads one shard."""
    found = get_object_or_404(Order, pk=order)
    return JsonResponse({"id": found.public_id, "note": found.note})


def customer_by_token(request: HttpRequest, pk: int) -> HttpResponse:
    found = get_object_or_404(Customer, pk=pk)
    return JsonResponse({"id": found.public_id, "name": found.name})


def pageview_detail(request: HttpRequest, pk: object) -> HttpResponse:
    view = get_object_or_404(PageView, pk=pk)
    return JsonResponse({"id": str(view.pk)})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(router.urls)),
    path("orders/<snowflake:pk>/", order_detail, name="order-detail"),
    path("orders/<public:order>/", order_by_token, name="order-public"),
    path("customers/t/<customer:pk>/", customer_by_token, name="customer-public"),
    path("sharded/<sharded:pk>/", order_detail, name="order-sharded"),
    path("views/<locality_uuid:pk>/", pageview_detail, name="pageview-detail"),
    path(
        "customers/<snowflake:customer_id>/purchases/",
        customer_purchases,
        name="customer-purchases",
    ),
]
