"""``uid_fields.uniqid``: the public name of ``uid_fields.ids.uniqid``.

``from uid_fields import uniqid`` and ``import uid_fields.uniqid`` give this real module, which
type checkers and IDEs see, with the names of ``uid_fields.ids.uniqid``.
"""

from .ids.uniqid import *  # noqa: F403
from .ids.uniqid import __all__ as __all__
