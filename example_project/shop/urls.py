from django.contrib import admin
from django.urls import include, path
from orders.api import OrderViewSet
from rest_framework.routers import DefaultRouter
from tenants.api import TaskViewSet, TenantViewSet

router = DefaultRouter()
router.register("orders", OrderViewSet, basename="order")
router.register("tenants", TenantViewSet, basename="tenant")
router.register("tasks", TaskViewSet, basename="task")

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(router.urls)),
]
