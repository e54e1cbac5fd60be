"""Relations across databases: joins that stay on a shard, filters through relations,
and the deletion collector that cascades on each shard.
"""
