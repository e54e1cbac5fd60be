"""A lazy many-to-one whose target lives on another shard is found by the target's id."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from uid_fields import TWITTER, SnowflakeGenerator
from uid_fields.sqlalchemy import SnowflakeField, SnowflakeType, sharded_session

pytestmark = pytest.mark.versions

LAYOUT = TWITTER.replace(epoch_ms=1_704_067_200_000)
authors = SnowflakeGenerator(LAYOUT, worker=5)
posts = SnowflakeGenerator(LAYOUT, worker=6)


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "lazy_authors"
    id: Mapped[int] = SnowflakeField(generator=authors, primary_key=True)


class Post(Base):
    """Routed by its own id; its author may be on any shard (a soft reference)."""

    __tablename__ = "lazy_posts"
    id: Mapped[int] = SnowflakeField(generator=posts, primary_key=True)
    author_id: Mapped[int] = mapped_column(SnowflakeType())
    author: Mapped[Author] = relationship(primaryjoin="foreign(Post.author_id) == Author.id")


def test_lazy_many_to_one_reads_the_targets_shard(tmp_path: Path) -> None:
    engines = {f"s{i}": create_engine(f"sqlite:///{tmp_path / f's{i}.db'}") for i in range(4)}
    for engine in engines.values():
        Base.metadata.create_all(engine)
    with sharded_session(engines) as session:
        author = Author()
        session.add(author)
        session.flush()
        author_shard = session.shard_of(author)
        made = [Post(author_id=author.id) for _ in range(40)]
        session.add_all(made)
        session.commit()
        elsewhere = [p for p in made if session.shard_of(p) != author_shard]
        assert elsewhere, "some posts live on another shard than their author"
        post_id, author_id = elsewhere[0].id, author.id
        session.expunge_all()
        seen: list[str] = []
        for name, engine in engines.items():
            event.listen(engine, "before_cursor_execute", lambda *a, n=name: seen.append(n))
        post = session.get(Post, post_id)
        assert post is not None
        seen.clear()
        assert post.author.id == author_id
        assert seen == [author_shard]
