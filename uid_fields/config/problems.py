"""Problems: one mistake in a settings dict, with its key path and check code, and the
report that collects them. Validation never raises; callers decide what a problem means.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

E_SHARD_MAP = "E004"


E_GENERATOR = "E005"


E_UNKNOWN_KEY = "E013"


E_TYPE = "E014"


E_PROCESSES = "E016"


@dataclass(frozen=True)
class Problem:
    """One mistake in a settings dict: where (a dotted key path), what, and its code."""

    path: str
    message: str
    code: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def describe(problems: Collection[Problem]) -> str:
    """The message of a ``ConfigurationError``: every problem on a line of its own."""
    if len(problems) == 1:
        return str(next(iter(problems)))
    return f"{len(problems)} problems in the settings:\n" + "\n".join(
        f"  {problem}" for problem in problems
    )


def key_path(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def type_name(value: object) -> str:
    return type(value).__name__


class Report:
    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str, code: str) -> None:
        self.problems.append(Problem(path, message, code))

    def mapping(self, path: str, value: object, what: str) -> Mapping[Any, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.add(path, f"{what} must be a dict, got {type_name(value)} {value!r}", E_TYPE)
        return None

    def keys(self, path: str, config: Mapping[Any, Any], allowed: Collection[str]) -> None:
        for key in config:
            if key in allowed:
                continue
            near = difflib.get_close_matches(str(key), list(allowed), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; allowed: {sorted(allowed)}"
            self.add(key_path(path, key), f"unknown key {key!r}{hint}", E_UNKNOWN_KEY)

    def flag(self, path: str, value: object) -> None:
        if not isinstance(value, bool):
            self.add(path, f"must be True or False, got {value!r}", E_TYPE)

    def text(self, path: str, value: object, what: str = "a string") -> bool:
        if isinstance(value, str) and value:
            return True
        self.add(path, f"must be {what}, got {value!r}", E_TYPE)
        return False

    def call(self, path: str, code: str, checker: Callable[[], object]) -> bool:
        """Run a core checker; a TypeError is a type problem, a ValueError ``code``."""
        try:
            checker()
        except TypeError as exc:
            self.add(path, str(exc), E_TYPE)
        except (ValueError, OverflowError) as exc:
            self.add(path, str(exc), code)
        else:
            return True
        return False
