"""A Django app of typed models, for ``django_example`` and the django-stubs plugin."""
