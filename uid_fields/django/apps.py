from __future__ import annotations

from django.apps import AppConfig, apps


class UidFieldsConfig(AppConfig):
    name = "uid_fields.django"
    label = "uid_fields"
    verbose_name = "uid_fields"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (
            checks,  # noqa: F401  (registers the system checks)
            compat,
            fences,
        )
        from .conf import conf
        from .converters import register
        from .deletion import ShardedCollector

        register()
        fences.install()  # a shard move's fence refuses writes: ShardMoveFencedError
        # Deletes run each on_delete where the referring rows live (on one database,
        # exactly as Django's own Collector); the admin lists those rows before.
        compat.install_collector(ShardedCollector)
        if apps.is_installed("django.contrib.admin"):
            from .admin import ShardedNestedObjects

            compat.install_nested_objects(ShardedNestedObjects)
        # Opt-in: DRF is left alone unless the project asks for string ids process-wide.
        # Without the setting neither rest_framework nor .rest is imported here.
        if conf.DRF_STRING_IDS and apps.is_installed("rest_framework"):
            from .rest import install

            install()
