from __future__ import annotations

from django.apps import AppConfig


class UidFieldsConfig(AppConfig):
    name = "uid_fields.django"
    label = "uid_fields"
    verbose_name = "uid_fields"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
