from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import include, path
from rest_framework.routers import DefaultRouter

from .testapp.api import (
    FilteredPurchaseViewSet,
    OrderViewSet,
    PurchaseViewSet,
    TicketViewSet,
    WorkspaceViewSet,
)
from .testapp.models import Customer, Order, PageView, Purchase

router = DefaultRouter()
router.register("orders", OrderViewSet, basename="order")
router.register("purchases", PurchaseViewSet, basename="purchase")
router.register("workspaces", WorkspaceViewSet, basename="workspace")
router.register("tickets", TicketViewSet, basename="ticket")
router.register("filtered-purchases", FilteredPurchaseViewSet, basename="filtered-purchase")


def order_detail(request: HttpRequest, pk: int) -> HttpResponse:
    order = get_object_or_404(Order, pk=pk)
    return JsonResponse({"id": str(order.pk), "shard": order._state.db})


def customer_purchases(request: HttpRequest, customer_id: int) -> HttpResponse:
    purchases = Purchase.objects.filter(customer_id=customer_id)
    if not purchases.exists():
        get_object_or_404(Customer, pk=customer_id)
    return JsonResponse({"purchases": [str(p.pk) for p in purchases]})


def pageview_detail(request: HttpRequest, pk: object) -> HttpResponse:
    view = get_object_or_404(PageView, pk=pk)
    return JsonResponse({"id": str(view.pk)})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(router.urls)),
    path("orders/<snowflake:pk>/", order_detail, name="order-detail"),
    path("sharded/<sharded:pk>/", order_detail, name="order-sharded"),
    path("views/<locality_uuid:pk>/", pageview_detail, name="pageview-detail"),
    path(
        "customers/<snowflake:customer_id>/purchases/",
        customer_purchases,
        name="customer-purchases",
    ),
]
