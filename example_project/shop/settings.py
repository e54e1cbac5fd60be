"""Settings of the example shop: four shards, ids that route every row to one of them."""

from __future__ import annotations

import os

from .databases import SHARDS, databases

SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "example-only-not-secret")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",  # the tenants API's filters (django-filter: the dev group of `make`)
    "uid_fields.django",
    "customers",
    "orders",
    "analytics",
    "tenants",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "shop.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"

DATABASES = databases()
DATABASE_ROUTERS = ["uid_fields.django.ShardRouter"]
# Tenant.slug is validated unique on every shard (forms, the admin, DRF); the databases
# hold it once per shard only, which W002 says. The example accepts that (docs/uniqueness.md
# shows the key table on default that makes the databases enforce it).
SILENCED_SYSTEM_CHECKS = ["uid_fields.W002"]

UID_FIELDS = {
    "GENERATORS": {
        # Customers: Twitter's layout from a 2024 epoch. Each process needs its own
        # worker id; SHOP_WORKER_ID gives it (see the docs on worker ids in production).
        "default": {
            "kind": "snowflake",
            "layout": "twitter",
            "epoch": "2024-01-01T00:00:00Z",
            "fields": {"datacenter": 0, "worker": int(os.environ.get("SHOP_WORKER_ID", "1"))},
        },
        # Orders and their lines: Instagram's 41/13/10 layout, logical shard in the id.
        # The demo and `make serve` run one process. With several (gunicorn workers),
        # share the per-shard sequence instead: "sequence": {"redis": "redis://..."}.
        "orders": {
            "kind": "sharded",
            "layout": "instagram",
            "epoch": "2024-01-01T00:00:00Z",
            "single_process": True,
        },
        # Page views: locality UUIDs that spread writes (variable mode).
        "pageviews": {"kind": "locality", "sequential": False},
    },
    "SHARDS": {"shop": {"databases": SHARDS}},
}

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": [
        "uid_fields.django.rest.UidJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
}
