"""SQL that makes ids inside the database, rendered from the same layouts."""

from .mysql import DecimalIdFunction
from .postgres import NextIdFunction

__all__ = ["DecimalIdFunction", "NextIdFunction"]
