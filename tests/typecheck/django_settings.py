"""Settings the django-stubs mypy plugin reads for ``django_example`` (its models are the
``shop`` app's); nothing connects to a database."""

SECRET_KEY = "typecheck"
INSTALLED_APPS = ["django.contrib.contenttypes", "uid_fields.django", "tests.typecheck.shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
USE_TZ = True
