from __future__ import annotations

import importlib.util

from django.apps import AppConfig


class UidFieldsConfig(AppConfig):
    name = "uid_fields.django"
    label = "uid_fields"
    verbose_name = "uid_fields"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .conf import conf
        from .converters import register

        register()
        drf = importlib.util.find_spec("rest_framework") is not None
        if drf and conf.DRF_STRING_IDS:
            from .rest import install

            install()
