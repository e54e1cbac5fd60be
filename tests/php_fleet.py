"""The PHP+Redis generator, as its post runs it, for tests that join a PHP fleet.

The post's PHP computes the id without its sequence (41 bits of ms since its epoch,
5 server bits, 5 worker bits, 12 zero bits), passes that number in decimal as the key to
a Lua script that does ``INCR`` then ``PEXPIRE 1``, and ORs the answer in as the sequence,
retrying the millisecond when the answer is over 4096 (``>``, so 4096 itself is used and
carries into the worker bits). ``php_next_id`` does the same in Python; ``POST_LUA`` is
the script's behaviour, run unchanged in Redis.
"""

from __future__ import annotations

import time
from typing import Any

from uid_fields import PHP_REDIS

POST_LUA = """
local sequenceKey = KEYS[1]
local sequenceNumber = redis.call("incr", sequenceKey)
redis.call("pexpire", sequenceKey, 1)
return sequenceNumber
"""

#: The same script with a 10 s expiry: what a PHP fleet should run (same keys, same
#: counters), since a counter that lives 1 ms is started again by any process that is
#: delayed more than that between reading its clock and calling Redis.
FIXED_LUA = POST_LUA.replace('"pexpire", sequenceKey, 1)', '"pexpire", sequenceKey, 10000)')

MAX_SEQUENCE = 4096  # the post's bound, compared with ">"


def php_base(ms: int, server: int, worker: int) -> int:
    """The post's id without its sequence at Unix millisecond ``ms``."""
    return ((ms - PHP_REDIS.epoch_ms) << 22) | (server << 17) | (worker << 12)


def php_next_id(script: Any, server: int, worker: int, prefix: str = "") -> int:
    """One id as a PHP process of the fleet makes it (``script``: ``POST_LUA`` registered)."""
    while True:
        base = php_base(time.time_ns() // 1_000_000, server, worker)
        sequence = int(script(keys=[f"{prefix}{base}"]))
        if sequence > MAX_SEQUENCE:  # the original's check
            continue
        return base | sequence
