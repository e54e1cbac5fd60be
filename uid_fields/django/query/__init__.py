"""The sharded QuerySet and its fan-out: plans and vetting before a query runs, the
id lookups that route it, the merge of rows from every shard, writes and pages.
"""
