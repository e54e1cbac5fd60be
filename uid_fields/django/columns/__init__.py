"""What a sharded-id column carries besides its value: the time lookups (``id__time__gte``),
the database default that calls ``next_id`` and the public-id codec. Imports nothing of
the adapter above ``conf``, so ``fields`` can build on it.
"""
