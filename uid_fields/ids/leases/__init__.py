"""Node ids leased from a coordinator, so that no two live processes share one.

``state`` holds what every lease does (claim, renew, fence, release, fork); ``redis``
and ``database`` are the coordinators. None of them imports an ORM: the Django and
SQLAlchemy adapters hand the database lease a connection factory.
"""

from .database import DatabaseLease
from .redis import RedisLease
from .state import Lease

__all__ = ["DatabaseLease", "Lease", "RedisLease"]
