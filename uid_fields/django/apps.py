from __future__ import annotations

from django.apps import AppConfig, apps


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
        # Opt-in: DRF is left alone unless the project asks for string ids process-wide.
        # Without the setting neither rest_framework nor .rest is imported here.
        if conf.DRF_STRING_IDS and apps.is_installed("rest_framework"):
            from .rest import install

            install()
