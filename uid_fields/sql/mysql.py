"""Decimal ids made by MySQL/MariaDB, rendered from the same ``DecimalLayout``.

The decimal post computes its SQL variant by concatenating the seconds with
``RIGHT(..., 9)`` of a random string; when that string starts with zeros the id comes out
short, and its digits decode to another time (``50158384011259375`` for the second
``501583840``, read as 2012-08-03). Here the id is arithmetic, never text:
``unit * 10**(random + server digits) + random * 10**server digits + server``, so every
random value lands in its own digits and the id decodes with ``layout.decompose`` to the
second (or millisecond) it was made.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._internal import validate as check
from ..ids.layouts import DecimalLayout
from .postgres import sql_identifier

__all__ = ["DecimalIdFunction"]


@dataclass(frozen=True)
class DecimalIdFunction:
    """``name()`` on one database: a decimal id with that database's server digits.

    ``expression`` is the same computation for a column ``DEFAULT (...)``; MariaDB
    accepts it there, stored functions it does not.
    """

    layout: DecimalLayout
    server: int = 0
    name: str = "uid_decimal_id"

    def __post_init__(self) -> None:
        sql_identifier(self.name, "function name")
        if not isinstance(self.layout, DecimalLayout):
            raise TypeError(f"layout must be a DecimalLayout, got {self.layout!r}")
        check.integer("server", self.server, 0, self.layout.max_server)

    @property
    def expression(self) -> str:
        layout = self.layout
        unit = (
            f"((CAST(FLOOR(UNIX_TIMESTAMP(NOW(3)) * 1000) AS UNSIGNED) - {layout.epoch_ms})"
            f" DIV {layout.time_unit_ms})"
        )
        random = f"CAST(FLOOR(RAND() * {layout.max_random + 1}) AS UNSIGNED)"
        return f"({unit} * {layout.time_scale} + {random} * {layout.server_scale} + {self.server})"

    @property
    def call(self) -> str:
        return f"{self.name}()"

    def create_statements(self) -> list[str]:
        return [
            f"DROP FUNCTION IF EXISTS {self.name}",
            f"CREATE FUNCTION {self.name}() RETURNS BIGINT UNSIGNED NOT DETERMINISTIC NO SQL "
            f"RETURN {self.expression}",
        ]

    def drop_statements(self) -> list[str]:
        return [f"DROP FUNCTION IF EXISTS {self.name}"]
