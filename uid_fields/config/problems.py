"""Problems: one mistake in a settings dict, with its key path and check code, and the
report that collects them. Validation never raises; callers decide what a problem means.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._internal.validate import shown

E_SHARD_MAP = "E004"


E_GENERATOR = "E005"


E_UNKNOWN_KEY = "E013"


E_TYPE = "E014"


E_PROCESSES = "E016"


E_PUBLIC_IDS = "E030"


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


def key_text(key: object) -> str:
    """A key of a settings dict as a path segment: a string as it is, anything else
    (an int, None, a tuple, an int too long to print) as ``shown`` writes it."""
    return key if isinstance(key, str) else shown(key)


def key_path(path: str, key: object) -> str:
    return f"{path}.{key_text(key)}" if path else key_text(key)


def key_names(keys: Iterable[object]) -> list[str]:
    """Keys of any types, as sorted text: ``sorted()`` of the keys themselves raises
    TypeError when a dict mixes str and int keys."""
    return sorted(key_text(key) for key in keys)


def type_name(value: object) -> str:
    return type(value).__name__


class Report:
    """The problems found so far, and the checks that find them.

    Every check here takes any value at all (settings are arbitrary data) and reports
    instead of raising: values are compared with ``==`` after an ``isinstance``, never
    looked up in a dict or set, where a list or a dict raises ``TypeError: unhashable``;
    messages quote them with ``shown``, which never raises.
    """

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: str, message: str, code: str) -> None:
        self.problems.append(Problem(path, message, code))

    def mapping(self, path: str, value: object, what: str) -> Mapping[Any, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.add(path, f"{what} must be a dict, got {type_name(value)} {shown(value)}", E_TYPE)
        return None

    def keys(self, path: str, config: Mapping[Any, Any], allowed: Collection[str]) -> None:
        for key in config:
            if isinstance(key, str) and key in allowed:
                continue
            near = difflib.get_close_matches(key_text(key), list(allowed), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f"; allowed: {sorted(allowed)}"
            self.add(key_path(path, key), f"unknown key {shown(key)}{hint}", E_UNKNOWN_KEY)

    def flag(self, path: str, value: object) -> None:
        if not isinstance(value, bool):
            self.add(path, f"must be True or False, got {shown(value)}", E_TYPE)

    def text(self, path: str, value: object, what: str = "a string") -> bool:
        if isinstance(value, str) and value:
            return True
        self.add(path, f"must be {what}, got {shown(value)}", E_TYPE)
        return False

    def choice(
        self,
        path: str,
        value: object,
        choices: Collection[str],
        code: str,
        what: str = "",
    ) -> bool:
        """Whether ``value`` is one of the names ``choices``; a problem otherwise.

        The one check for every option that names something (a kind, a preset, a hash,
        a lease, a mode, a language): anything but a string is a type problem (E014),
        whatever its type, and is never used as a dict key or set member, where an
        unhashable value raises ``TypeError``; an unknown string is ``code``. ``what``
        words the rule ("must be 'redis' or 'database'"; by default the list).
        """
        if isinstance(value, str) and value in choices:
            return True
        rule = what or f"must be one of {list(choices)}"
        if isinstance(value, str):
            self.add(path, f"{rule}, got {shown(value)}", code)
        else:
            self.add(path, f"{rule} (a string), got {shown(value)}", E_TYPE)
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
