from __future__ import annotations

from django.apps import AppConfig, apps


class UidFieldsConfig(AppConfig):
    name = "uid_fields.django"
    label = "uid_fields"
    verbose_name = "uid_fields"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .choices import install_choice_hooks
        from .conf import conf
        from .connections import fences, replicas
        from .relations.deletion import install_for_sharded_models
        from .routing import parent_link, sharded_pk, watch_writes
        from .web.converters import register

        register()
        # Execute wrappers on the connections of shard databases only: a shard move's
        # fence refuses writes (ShardMoveFencedError), a write pins its primary for
        # read-your-writes when the primary has replicas.
        fences.install()
        replicas.install()
        # The write checks on the signals of the models whose rows live on shards
        # (sender=), nothing for the others.
        on_shards = [
            model for model in apps.get_models(include_auto_created=True) if watch_writes(model)
        ]
        # Deletes run each on_delete where the referring rows live (on one database,
        # exactly as Django's own Collector); the admin lists those rows before. Only a
        # project with rows on shards has such deletes: without, Django's are left alone.
        if apps.is_installed("django.contrib.admin"):
            from . import admin  # noqa: F401  (its delete confirmation joins the install)
        if on_shards:
            install_for_sharded_models()
            # Choice lists of rows on shards come from every shard: each relation to
            # such a model says so where Django, DRF and django-filter read it
            # (get_limit_choices_to(), a reverse relation's get_choices()).
            for model in apps.get_models(include_auto_created=True):
                install_choice_hooks(
                    model, lambda m: sharded_pk(m) is not None or parent_link(m) is not None
                )
        # Opt-in: DRF is left alone unless the project asks for string ids process-wide.
        # Without the setting neither rest_framework nor .rest is imported here.
        if conf.DRF_STRING_IDS and apps.is_installed("rest_framework"):
            from .rest import install

            install()
