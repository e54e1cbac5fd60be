"""Which published extra installs which optional dependency, so a missing one is named.

``import uid_fields.django`` without Django used to end in a bare
``ModuleNotFoundError: No module named 'django'``; it now says
``pip install 'uid-fields[django]'``. The error is still a ``ModuleNotFoundError`` (its
``name`` is the missing module), so code that probes for an integration keeps working.
"""

from __future__ import annotations

from ..errors import MissingExtraError

__all__ = ["EXTRAS", "missing"]

#: top-level module -> (the extra that installs it, what needs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "django": ("django", "uid_fields.django"),
    "sqlalchemy": ("sqlalchemy", "uid_fields.sqlalchemy"),
    "greenlet": ("asyncio", "the asyncio sessions"),
    "redis": ("redis", "Redis leases and sequences"),
    "psycopg": ("postgres", "PostgreSQL connections of database leases"),
    "pymysql": ("mysql", "MariaDB/MySQL connections of database leases"),
    "rest_framework": ("drf", "uid_fields.django.rest"),
    "alembic": ("alembic", "uid_fields.sqlalchemy.alembic"),
    "flask": ("flask", "uid_fields.sqlalchemy.flask"),
    "flask_sqlalchemy": ("flask", "uid_fields.sqlalchemy.flask"),
}


def missing(module: str, error: ModuleNotFoundError) -> MissingExtraError:
    """The error to raise (``from error``) when importing ``module`` failed."""
    absent = error.name or module
    top = absent.partition(".")[0]
    if top not in EXTRAS:  # something else is missing: not ours to explain
        return MissingExtraError(str(error), name=absent)
    extra, needed_by = EXTRAS[top]
    return MissingExtraError(
        f"{needed_by} needs {top!r}, which is not installed: pip install 'uid-fields[{extra}]'",
        name=absent,
    )
