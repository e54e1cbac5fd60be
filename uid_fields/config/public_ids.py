"""``UID_FIELDS["PUBLIC_IDS"]``: the keys of the public ids, validated and built.

One key ring serves every prefix: each prefix (and each kind, and each key version) is
bound into the round keys, so the tokens of one model never decode as another's.
Problems are reported with the shared codes (E013 unknown key, E014 wrong type) and
E030 for keys that cannot be used (a secret under 16 bytes, a version outside 0-31, no
key at all); the messages never quote a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ConfigurationError
from ..ids.public import Kind, PublicIds, key_problems
from .problems import E_PUBLIC_IDS, E_TYPE, Problem, Report, key_path

__all__ = ["PUBLIC_IDS_KEYS", "build_public_ids", "public_ids_problems"]

#: The keys of the ``PUBLIC_IDS`` entry.
PUBLIC_IDS_KEYS = frozenset({"KEYS"})


def public_ids_problems(value: object) -> list[Problem]:
    """The problems of a ``PUBLIC_IDS`` entry (paths start ``PUBLIC_IDS``)."""
    report = Report()
    entry = report.mapping("PUBLIC_IDS", value, "PUBLIC_IDS")
    if entry is None:
        return report.problems
    report.keys("PUBLIC_IDS", entry, PUBLIC_IDS_KEYS)
    if "KEYS" in entry:
        path = "PUBLIC_IDS.KEYS"
        for version, message, is_type in key_problems(entry["KEYS"]):
            where = path if version is None else key_path(path, version)
            report.add(where, message, E_TYPE if is_type else E_PUBLIC_IDS)
    return report.problems


def build_public_ids(settings: Mapping[str, Any], prefix: str, kind: Kind | None) -> PublicIds:
    """The codec of ``prefix`` from a validated settings dict; a ``ConfigurationError``
    that says what to set when no keys are configured (the first use of a public id)."""
    keys = settings.get("PUBLIC_IDS", {}).get("KEYS")
    if not keys:
        raise ConfigurationError(
            f"public ids of prefix {prefix!r} need keys: set UID_FIELDS['PUBLIC_IDS']"
            "['KEYS'] = {1: '<a secret of 16 bytes or more>'} (check uid_fields.E031)"
        )
    return PublicIds(prefix, keys, kind=kind)
