"""The one rule for what the project never prints: passwords and secrets.

Messages, reprs, logs and system checks name servers by URL and report bad settings by
value. Before any of them is shown, a URL loses the password of its userinfo and the
values of query parameters that carry credentials (``?password=``, ``sslpassword``,
``token``, ``secret``, ``key``...), and text that contains URLs gets the same treatment;
key material is described (its type and length), never quoted.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["MASK", "describe_secret", "redact", "redact_url"]

MASK = "***"

#: Query parameters whose values are credentials (matched as substrings of the name).
_SECRET_PARAMETERS = ("pass", "secret", "token", "key", "auth", "credential")

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>()]+")


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in _SECRET_PARAMETERS)


def redact_url(url: str) -> str:
    """``url`` without the password of its userinfo and without the values of its
    credential parameters."""
    try:
        parts = urlsplit(url)
        password = parts.password
        port = parts.port
    except ValueError:  # not a URL we can take apart: nothing of it is shown
        return f"<a URL of {len(url)} characters>"
    netloc = parts.netloc
    if password is not None:
        host = parts.hostname or ""
        if port is not None:
            host = f"{host}:{port}"
        netloc = f"{parts.username or ''}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret(name) for name, _ in pairs):
            query = urlencode(
                [(name, MASK if _is_secret(name) else value) for name, value in pairs], safe="*"
            )
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def redact(text: str) -> str:
    """``text`` with every URL in it redacted (``redact_url``)."""
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


def describe_secret(value: object) -> str:
    """What a secret is, for a message about it, without any of its characters."""
    if isinstance(value, (str, bytes)):
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"a {type(value).__name__} of {len(value)} {unit}"
    return f"a {type(value).__name__}"
