"""Type checks of user code: the docs' Python and typed example modules (``run``)."""
