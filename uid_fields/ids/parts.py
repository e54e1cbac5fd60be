"""``id_parts = IdParts(SnowflakeParts)``: the decoded-id attribute, declared with its type.

Both adapters give every model a ``<attribute>_parts`` attribute that decodes the id
(``order.id_parts.datetime``). They add it when the class is built, so a type checker
never sees it. Declaring it in the class body says what it returns:

    class Order(Base):
        id: Mapped[int] = SnowflakeField(generator=orders_gen, primary_key=True)
        id_parts = IdParts(SnowflakeParts)

The declared object is a placeholder: the adapter replaces it, when the class is mapped,
with one bound to the column's own decoder, after checking that the column's ids decode
to the declared type (a ``SnowflakeParts`` declared on a locality UUID column is a
``TypeError`` then, not a wrong type at run time).

Like the id it decodes, the attribute is typed without ``None``: it is None exactly when
the id is (a database-made id before the flush, an id set to None), as SQLAlchemy's
``Mapped[int]`` primary key is None until then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

__all__ = ["IdParts"]

P = TypeVar("P")

_SUFFIX = "_parts"


class IdParts(Generic[P]):
    """A typed ``<attribute>_parts`` descriptor: the decoded parts of ``<attribute>``.

    ``parts`` is the class the ids decode to (``SnowflakeParts``, ``DecimalParts``,
    ``LocalityParts``, ``UniqIdParts``); ``of`` names the id attribute, by default the
    declared name without its ``_parts`` suffix. Adapters call ``bind`` with the
    column's decoder; an unbound one (its attribute is no uid field) raises TypeError
    when read.
    """

    def __init__(
        self,
        parts: type[P],
        *,
        of: str | None = None,
        decode: Callable[[Any], P] | None = None,
    ) -> None:
        if not isinstance(parts, type):
            raise TypeError(f"IdParts() takes the class of the decoded parts, got {parts!r}")
        self.parts = parts
        self.of = of
        self.decode = decode
        self.name = f"{of}{_SUFFIX}" if of is not None else None

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        if self.of is None and name.endswith(_SUFFIX) and name != _SUFFIX:
            self.of = name[: -len(_SUFFIX)]

    def target(self, owner: type) -> str:
        """The id attribute this decodes; TypeError when its name does not say."""
        if self.of is None:
            raise TypeError(
                f"{owner.__name__}.{self.name}: name it <id attribute>_parts, or say which "
                "attribute it decodes with IdParts(..., of='id')"
            )
        return self.of

    def bind(self, of: str, decode: Callable[[Any], Any], decodes_to: type | None) -> IdParts[P]:
        """A copy that decodes attribute ``of`` with ``decode``, for the adapters.

        ``decodes_to`` is the class ``decode`` returns, checked against the declared one
        now; None when the adapter cannot know it yet (Django builds generators on first
        use), and then each decoded value is checked instead.
        """
        if decodes_to is not None and not issubclass(decodes_to, self.parts):
            raise TypeError(self._mismatch(of, decodes_to))
        if decodes_to is None:
            decode = self._checked(of, decode)
        bound: IdParts[P] = IdParts(self.parts, of=of, decode=decode)
        bound.name = self.name or bound.name
        return bound

    def _checked(self, of: str, decode: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def checked(value: Any) -> Any:
            parts = decode(value)
            if parts is not None and not isinstance(parts, self.parts):
                raise TypeError(self._mismatch(of, type(parts)))
            return parts

        return checked

    def _mismatch(self, of: str, decodes_to: type) -> str:
        return (
            f"{self.name} is declared IdParts({self.parts.__name__}), but the ids of "
            f"{of!r} decode to {decodes_to.__name__}: declare IdParts({decodes_to.__name__})"
        )

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> IdParts[P]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> P: ...

    def __get__(self, obj: object, owner: type | None = None) -> IdParts[P] | P:
        if obj is None:
            return self
        if self.decode is None or self.of is None:
            raise TypeError(
                f"{type(obj).__name__}.{self.name}: {self.of!r} is not a uid field of this "
                "model, so there is nothing to decode"
            )
        value = getattr(obj, self.of)
        # None exactly when the id is None (see the module docstring).
        return None if value is None else self.decode(value)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<IdParts({self.parts.__name__}) of {self.of!r}>"
