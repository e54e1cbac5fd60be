"""Operations over several shards: fan-out merge rules, parallel execution, shard
moves, two-phase commit, replicas and audits. Built on ids and placement."""
