"""What operators run: shard moves and their replication, the migration state of every
shard, audits and fixtures. The commands in ``management`` call these.
"""
