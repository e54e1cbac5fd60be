"""Test helpers: queries per database alias."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from django.conf import settings
from django.db import connections
from django.test.utils import CaptureQueriesContext


class QueryLog:
    """Queries run on every database alias while the block ran."""

    def __init__(self) -> None:
        self.by_alias: dict[str, CaptureQueriesContext] = {}

    def count(self, alias: str | None = None, verb: str | None = None) -> int:
        aliases = [alias] if alias else list(self.by_alias)
        return sum(
            1
            for a in aliases
            for q in self.by_alias[a].captured_queries
            if verb is None or q["sql"].lstrip().upper().startswith(verb)
        )

    def aliases(self, verb: str | None = None) -> set[str]:
        return {a for a in self.by_alias if self.count(a, verb)}

    def sql(self, alias: str) -> list[str]:
        return [q["sql"] for q in self.by_alias[alias].captured_queries]


@contextmanager
def capture_all() -> Iterator[QueryLog]:
    log = QueryLog()
    with ExitStack() as stack:
        for alias in settings.DATABASES:
            log.by_alias[alias] = stack.enter_context(CaptureQueriesContext(connections[alias]))
        yield log
