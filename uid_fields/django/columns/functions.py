"""The database default that calls the installed ``next_id`` function."""

from __future__ import annotations

from typing import Any

from django.db.models import BigIntegerField, Func


class NextId(Func):
    """``uid_next_id()``: an id made by the database (see ``InstallNextId``)."""

    template = "%(function)s()"
    allowed_default = True
    output_field = BigIntegerField()

    def __init__(self, function: str = "uid_next_id", **extra: Any) -> None:
        super().__init__(function=function, **extra)
