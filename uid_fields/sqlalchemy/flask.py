"""Flask-SQLAlchemy with sharded ids: ``db = ShardedSQLAlchemy(shards=[...])``.

Flask-SQLAlchemy's ``db.session`` picks an engine per model (``__bind_key__``); a
sharded model's rows live on the engine their id names, so ``db.session`` here is a
``ShardedIdSession`` over the binds named as shards (``SQLALCHEMY_BINDS``), made in each
application context from that application's engines. ``db.session.on_all_shards(...)``
works on the scoped session itself (Flask-SQLAlchemy's proxy knows only ``Session``'s
own methods), and ``db.create_all()``/``db.drop_all()`` also create and drop the tables
of the models' metadata on every shard. What replaced ~15 lines of glue per application
(docs/flask.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from .._internal.extras import missing

try:
    import flask_sqlalchemy
except ModuleNotFoundError as exc:  # name the extra, not just the module
    raise missing("flask_sqlalchemy", exc) from exc

from flask_sqlalchemy.query import Query as FlaskQuery
from sqlalchemy.orm import scoped_session, sessionmaker
from sqlalchemy.util import ScopedRegistry

from ..errors import MalformedCursorError
from ..placement.shards import ShardMap
from .pages import bad_cursor_response
from .session import ShardedIdQuery, ShardedIdSession, refuse_choosers

__all__ = ["FlaskShardedSession", "ShardedSQLAlchemy", "ShardedScopedSession"]


class ShardedFlaskQuery(FlaskQuery, ShardedIdQuery[Any]):
    """``Model.query`` keeps Flask-SQLAlchemy's helpers (``first_or_404``, ``paginate``,
    ``get_or_404``) on the sharded session's legacy query."""


class FlaskShardedSession(ShardedIdSession):
    """The session of ``db.session``: shards are the engines of the current application
    named by ``shard_binds``; Flask-SQLAlchemy's ``db`` argument gives them."""

    def __init__(
        self, db: flask_sqlalchemy.SQLAlchemy, *, shard_binds: Sequence[str], **kwargs: Any
    ) -> None:
        engines = db.engines
        unknown = [key for key in shard_binds if key not in engines]
        if unknown:
            raise ValueError(
                f"shards {unknown} are not in SQLALCHEMY_BINDS (binds: "
                f"{sorted(k for k in engines if k is not None)})"
            )
        super().__init__({key: engines[key] for key in shard_binds}, **kwargs)


class ShardedScopedSession(scoped_session[FlaskShardedSession]):
    """``db.session``: a scoped session that also passes on the sharded session's own
    methods and attributes (``on_all_shards``, ``router``, ``shard_names``)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.registry(), name)


class ShardedSQLAlchemy(flask_sqlalchemy.SQLAlchemy):
    """``flask_sqlalchemy.SQLAlchemy`` whose ``db.session`` routes every row by its id.

    ``shards``: the bind keys of ``SQLALCHEMY_BINDS`` that are the shard databases, in
    the order of the shard map (or of the natural spread without one); ``shard_map``: as
    ``sharded_session``'s. ``session_options`` take ``sharded_session``'s other arguments
    (``default_shard``, ``strict``, ``two_phase``, ``replicas``, ...) and Session's;
    SQLAlchemy's choosers are refused there: the ids route. Other arguments are
    Flask-SQLAlchemy's.
    """

    def __init__(
        self,
        app: Any = None,
        *,
        shards: Sequence[str],
        shard_map: ShardMap | None = None,
        session_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.shard_binds = list(shards)
        if not self.shard_binds:
            raise ValueError("shards= names no bind key")
        options = dict(session_options or {})
        refuse_choosers(options)
        options.setdefault("class_", FlaskShardedSession)
        options.setdefault("query_cls", ShardedFlaskQuery)
        options["shard_binds"] = self.shard_binds
        options["shard_map"] = shard_map
        # Model.query (and dynamic relationships) are made from query_class, not from
        # the session's query_cls: the sharded one, so Model.query.get() is the session's.
        kwargs.setdefault("query_class", ShardedFlaskQuery)
        super().__init__(app, session_options=options, **kwargs)
        # The scoped session Flask-SQLAlchemy made, rebuilt as one that also passes on
        # the sharded session's own methods.
        plain: scoped_session[Any] = self.__dict__["session"]
        factory = cast("sessionmaker[FlaskShardedSession]", plain.session_factory)
        registry = cast("ScopedRegistry[FlaskShardedSession]", plain.registry)
        # Flask-SQLAlchemy declares its own Session class here; ours is a ShardedIdSession.
        self.session = ShardedScopedSession(  # type: ignore[assignment]
            factory, scopefunc=registry.scopefunc
        )

    def init_app(self, app: Any) -> None:
        """Flask-SQLAlchemy's ``init_app``; a malformed keyset cursor (``keyset_page``'s
        ``after``/``before`` from a link) answers 400, not 500 (an app's own handler for
        ``MalformedCursorError``, registered after, replaces it)."""
        super().init_app(app)
        app.register_error_handler(MalformedCursorError, bad_cursor_response)

    def create_all(self, bind_key: str | list[str | None] | None = "__all__") -> None:
        """Flask-SQLAlchemy's ``create_all``; with every bind (the default), the tables of
        the models' metadata are also created on every shard."""
        self._each_shard("create_all", bind_key)

    def drop_all(self, bind_key: str | list[str | None] | None = "__all__") -> None:
        """Flask-SQLAlchemy's ``drop_all``; with every bind, on every shard too."""
        self._each_shard("drop_all", bind_key)

    def _each_shard(self, operation: str, bind_key: str | list[str | None] | None) -> None:
        if bind_key != "__all__":
            getattr(super(), operation)(bind_key)
            return
        for key in self.shard_binds:
            getattr(self.metadata, operation)(bind=self.engines[key])
        engines = self.engines
        others: list[str | None] = [
            key
            for key in self.metadatas
            if key not in self.shard_binds and (key is not None or None in engines)
        ]
        if others:
            getattr(super(), operation)(others)
