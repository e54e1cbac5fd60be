"""Id arithmetic and id makers: layouts, generators, locality UUIDs, uniqids,
sequences, node values and their leases. Knows nothing of shards or databases' placement."""
