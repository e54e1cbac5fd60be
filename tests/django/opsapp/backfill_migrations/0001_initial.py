"""The app's real first migration, unchanged."""

from importlib import import_module

Migration = import_module("tests.django.opsapp.migrations.0001_initial").Migration
