"""``uid_fields.locality``: the public name of ``uid_fields.ids.locality``.

``from uid_fields import locality`` and ``import uid_fields.locality`` give this real module, which
type checkers and IDEs see, with the names of ``uid_fields.ids.locality``.
"""

from .ids.locality import *  # noqa: F403
from .ids.locality import __all__ as __all__
