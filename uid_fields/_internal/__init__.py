"""Private helpers of the core: argument checks, time conversion, the fork registry,
Redis plumbing and the key mixer. Nothing here knows ids, shards or any ORM."""
