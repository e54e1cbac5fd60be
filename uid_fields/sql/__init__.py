"""SQL that makes ids inside the database, rendered from the same layouts."""

from .postgres import NextIdFunction

__all__ = ["NextIdFunction"]
