"""The web surfaces' helpers that are no public path of their own: URL converters for
public ids and DRF's pages (the public ``admin``, ``rest``, ``choices`` and
``middleware`` stay at the top of the adapter).
"""
