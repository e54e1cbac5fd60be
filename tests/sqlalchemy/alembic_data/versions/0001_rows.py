"""A data migration: rows inserted with Core, without ids (and a photo of one owner).

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import context, op

from tests.sqlalchemy.models import Order, Photo

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    attributes = context.config.attributes
    bind = op.get_bind()
    count = attributes.get("orders", 0)
    if count:  # no ids given: the column default makes them
        bind.execute(sa.insert(Order), [{"customer": f"migrated {i}"} for i in range(count)])
    owner = attributes.get("photo_owner")
    if owner is not None:  # a row whose key lives on one shard, inserted on every shard
        bind.execute(sa.insert(Photo).values(owner_id=owner, caption="migrated"))


def downgrade() -> None:
    op.execute(sa.delete(Photo).where(Photo.caption == "migrated"))
    op.execute(sa.delete(Order).where(Order.customer.like("migrated %")))
