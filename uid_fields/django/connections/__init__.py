"""Which connection a statement uses and under which transaction: replica pins,
``sharded_atomic``, two-phase commits, move fences and the connection pool's followers.
Below ``routing``, which asks it where writes go.
"""
