"""Public ids: a keyed permutation of the id space, so an id can be shown without
showing what it carries (time, node, shard, volume), and read back without a lookup.

``PublicIds("ord", {1: secret_v1, 2: secret_v2})`` turns a 64-bit id or a 128-bit UUID
into a token such as ``ord_n5b2m573c0n39b24kv8j1`` and back. The server decodes the
token to the stored id, so a request still routes to the one shard the id names.

The construction (cited in ``docs/security.md``):

* **A strong pseudorandom permutation from a Feistel network.** Luby and Rackoff (1988)
  proved that a balanced Feistel network with independent pseudorandom round functions
  is a pseudorandom permutation after 3 rounds and a *strong* one (secure when the
  attacker may also ask for decryptions) after 4, up to about ``2**(n/2)`` queries for
  ``n``-bit halves; Patarin (CRYPTO 2003/2004) showed that more rounds (5 to 7 and up)
  stay secure up to nearly ``2**n`` queries. ``ROUNDS`` = 10 rounds, as NIST SP 800-38G's
  FF1 uses, on halves of 50 bits (ids) or 80 bits (UUIDs).
* **Round functions: keyed BLAKE2s** (RFC 7693), a PRF in its keyed mode, each round
  with its own key. The round keys come from the secret by HMAC-SHA256 in the form of
  NIST SP 800-108's KDF in counter mode, whose context binds the library's label, the
  block kind (64-bit id or 128-bit UUID, and so the block size), the prefix, the key
  version and the round number. A token of one prefix, kind or version is therefore
  enciphered by an unrelated permutation from the one of another.
* **Authentication by redundancy ("encode-then-encipher", Bellare and Rogaway, ASIACRYPT
  2000).** The block enciphered is the id followed by zero bits: 36 for ids (a 100-bit
  block), 32 for UUIDs (a 160-bit block). Deciphering a changed, truncated, forged or
  foreign token gives a block that is random to anyone without the key, so its
  redundancy is zero with probability ``2**-36`` (ids) or ``2**-32`` (UUIDs) per try:
  such tokens are refused (``PublicIdError``), not decoded to some other id.

The token is ``<prefix>_<body><version>``: the body is the enciphered block in
Crockford's base32, lower-case (20 characters for ids, 32 for UUIDs), and the last
character is the key version (0 to 31) in the same alphabet. Decoding reads upper or
lower case and, as Crockford's alphabet says, I and L as 1 and O as 0; U, hyphens and
anything else are refused. The highest version encodes; every version given decodes,
so keys rotate without breaking links already handed out.

A token reveals nothing of the id without the key, except equality: the same id gives
the same token under one key (that is what makes it a link). See docs/security.md.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from .._internal.redact import describe_secret
from .._internal.validate import shown
from ..errors import ConfigurationError, PublicIdError

__all__ = [
    "INT_REDUNDANCY_BITS",
    "MAX_VERSION",
    "MIN_SECRET_BYTES",
    "ROUNDS",
    "UUID_REDUNDANCY_BITS",
    "Kind",
    "PublicIds",
    "key_problems",
    "prefix_problem",
    "spelling",
]

Kind = Literal["int", "uuid"]
KINDS: tuple[Kind, ...] = ("int", "uuid")

#: Feistel rounds, as FF1 (NIST SP 800-38G); 4 already give a strong PRP (Luby-Rackoff).
ROUNDS = 10
#: Zero bits enciphered after the id: the false-accept probability is 2**-these per try.
INT_REDUNDANCY_BITS = 36
UUID_REDUNDANCY_BITS = 32
#: The shortest secret accepted, in bytes (a str secret counts its UTF-8 bytes).
MIN_SECRET_BYTES = 16
#: Key versions are 0..MAX_VERSION: one character of the token.
MAX_VERSION = 31
#: The longest prefix accepted (Stripe's are 2 to 10 characters).
MAX_PREFIX_LENGTH = 32

_PREFIX = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
_MAX64 = (1 << 64) - 1
_LABEL = b"uid_fields public ids: Feistel round key"
_PERSON = b"uidfpid1"  # BLAKE2s personalization: this use of the round keys only

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
#: Every 10-bit value as its two characters: a block is written 10 bits at a time
#: (base64.b32hexencode runs a Python loop and cost 2 us of the 10 us budget).
_PAIRS = tuple(high + low for high in CROCKFORD for low in CROCKFORD)


def _from_crockford() -> dict[int, str]:
    """Crockford characters (either case) -> the digit ``int(text, 32)`` reads for the
    same value; I/L read as 1 and O as 0; U becomes a character ``int`` refuses."""
    python_digits = "0123456789abcdefghijklmnopqrstuv"
    table: dict[int, str] = {}
    for value, char in enumerate(CROCKFORD):
        table[ord(char)] = table[ord(char.upper())] = python_digits[value]
    for char, digit in (("i", "1"), ("l", "1"), ("o", "0")):
        table[ord(char)] = table[ord(char.upper())] = digit
    table[ord("u")] = table[ord("U")] = "!"
    return table


_FROM_CROCKFORD = _from_crockford()
#: The characters Crockford base32 reads as others, to the ones ``encode`` writes.
_CANONICAL = str.maketrans({"i": "1", "l": "1", "o": "0"})


def spelling(token: str) -> str:
    """The canonical spelling of a token's characters (its prefix and body lower case,
    ``1`` for I and L, ``0`` for O), whether or not it decodes: a comparison of text for
    callers that decode the token anyway (``PublicIds.canonical`` also decodes)."""
    head, separator, body = token.rpartition("_")
    return head.lower() + separator + body.lower().translate(_CANONICAL)


_NOT_BASE32 = "not a public id of {!r}: a character is not Crockford base32"


class _Shape:
    """The block of one kind of value: its width, its redundancy, its token length."""

    __slots__ = (
        "block_bits",
        "body_chars",
        "half_bits",
        "half_bytes",
        "kind",
        "mask",
        "redundancy_bits",
        "redundancy_mask",
        "shifts",
        "tag",
        "value_bits",
    )

    def __init__(self, kind: Kind, value_bits: int, redundancy_bits: int) -> None:
        self.kind = kind
        self.value_bits = value_bits
        self.redundancy_bits = redundancy_bits
        self.block_bits = value_bits + redundancy_bits
        assert self.block_bits % 10 == 0  # even halves, whole base32 characters
        self.half_bits = self.block_bits // 2
        self.half_bytes = (self.half_bits + 7) // 8
        self.mask = (1 << self.half_bits) - 1
        self.redundancy_mask = (1 << redundancy_bits) - 1
        self.body_chars = self.block_bits // 5
        self.shifts = tuple(range(self.block_bits - 10, -1, -10))
        # Bound into every round key: the kind and the block size it is enciphered in.
        self.tag = f"{kind}{value_bits}/{self.block_bits}".encode("ascii")


_INT = _Shape("int", 64, INT_REDUNDANCY_BITS)  # 100-bit block, 20 characters
_UUID = _Shape("uuid", 128, UUID_REDUNDANCY_BITS)  # 160-bit block, 32 characters
_SHAPES = {"int": _INT, "uuid": _UUID}

Round = Callable[[], Any]  # the bound ``copy`` of a keyed BLAKE2s state


def _round_key(secret: bytes, shape: _Shape, prefix: str, version: int, index: int) -> bytes:
    """The key of one round: HMAC-SHA256 as in NIST SP 800-108's KDF in counter mode
    (one block: ``[1]_32 || Label || 0x00 || Context || [256]_32``). The context binds the
    kind and block size, the prefix, the version and the round, each unambiguous (the
    prefix alphabet has no NUL)."""
    context = b"\x00".join((shape.tag, prefix.encode("ascii"), bytes((version, index, ROUNDS))))
    message = b"\x00\x00\x00\x01" + _LABEL + b"\x00" + context + b"\x00\x00\x01\x00"
    return hmac.digest(secret, message, "sha256")


def _rounds(secret: bytes, shape: _Shape, prefix: str, version: int) -> tuple[Round, ...]:
    return tuple(
        hashlib.blake2s(
            key=_round_key(secret, shape, prefix, version, index),
            digest_size=shape.half_bytes,
            person=_PERSON,
        ).copy
        for index in range(ROUNDS)
    )


def _text(block: int, shape: _Shape) -> str:
    """A block in Crockford base32, most significant character first."""
    pairs = _PAIRS
    return "".join([pairs[(block >> shift) & 1023] for shift in shape.shifts])


def _encipher(rounds: tuple[Round, ...], shape: _Shape, block: int) -> int:
    half, size, mask = shape.half_bits, shape.half_bytes, shape.mask
    left, right = block >> half, block & mask
    from_bytes = int.from_bytes
    for copy in rounds:
        state = copy()
        state.update(right.to_bytes(size))
        left, right = right, left ^ (from_bytes(state.digest()) & mask)
    return (left << half) | right


def _decipher(rounds: tuple[Round, ...], shape: _Shape, block: int) -> int:
    half, size, mask = shape.half_bits, shape.half_bytes, shape.mask
    left, right = block >> half, block & mask
    from_bytes = int.from_bytes
    for copy in reversed(rounds):
        state = copy()
        state.update(left.to_bytes(size))
        left, right = right ^ (from_bytes(state.digest()) & mask), left
    return (left << half) | right


# -- keys and prefixes: the rules, shared with the settings validator ---------------------
def prefix_problem(prefix: object) -> str | None:
    """Why ``prefix`` cannot name the tokens of a model, or None when it can."""
    if not isinstance(prefix, str):
        return f"the prefix must be a string, got {shown(prefix)}"
    if len(prefix) > MAX_PREFIX_LENGTH or not _PREFIX.fullmatch(prefix):
        return (
            f"the prefix must be lower-case ASCII letters and digits, starting with a letter, "
            f"words joined by single underscores, at most {MAX_PREFIX_LENGTH} characters "
            f"(like 'ord' or 'sub_sched'), got {shown(prefix)}"
        )
    return None


def _version_of(version: object) -> int | None:
    """A key version as an int (JSON settings give strings of digits), or None."""
    if isinstance(version, str) and version.isascii() and version.isdigit():
        version = int(version)
    if isinstance(version, int) and not isinstance(version, bool) and 0 <= version <= MAX_VERSION:
        return version
    return None


def key_problems(keys: object) -> Iterator[tuple[object, str, bool]]:
    """Every problem of a key ring: ``(version or None for the ring, message, is_type)``.

    ``is_type`` is True for a value of the wrong type (a secret that is no string or
    bytes, a ring that is no dict). Messages never quote a secret.
    """
    if not isinstance(keys, Mapping):
        yield (
            None,
            f"the keys must be a dict of key version -> secret, got {type(keys).__name__}",
            True,
        )
        return
    if not keys:
        yield None, "at least one key is needed: {1: '<a secret of 16 bytes or more>'}", False
        return
    seen: set[int] = set()
    for version, secret in keys.items():
        number = _version_of(version)
        if number is None:
            if isinstance(version, (str, bytes)):
                # Perhaps the secret itself, given as the key: described, never quoted.
                label = f"<{describe_secret(version)}>"
                yield (
                    label,
                    f"a key version is an int from 0 to {MAX_VERSION}, got {label[1:-1]}: "
                    "are the secret and its version swapped? ({1: secret} is wanted)",
                    False,
                )
                continue
            yield (
                version,
                f"a key version is an int from 0 to {MAX_VERSION}, got {shown(version)}",
                False,
            )
            continue
        if number in seen:
            yield version, f"key version {number} is given twice", False
        seen.add(number)
        if not isinstance(secret, (str, bytes)):
            yield version, f"the secret must be a str or bytes, got {type(secret).__name__}", True
        elif len(secret.encode("utf-8") if isinstance(secret, str) else secret) < MIN_SECRET_BYTES:
            yield (
                version,
                f"the secret must be at least {MIN_SECRET_BYTES} bytes long "
                "(make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')",
                False,
            )


def _key_ring(keys: object) -> dict[int, bytes]:
    for version, message, _is_type in key_problems(keys):
        label = version if isinstance(version, str) else shown(version)
        where = "public id keys" if version is None else f"public id key {label}"
        raise ConfigurationError(f"{where}: {message}")
    assert isinstance(keys, Mapping)
    ring: dict[int, bytes] = {}
    for version, secret in keys.items():
        number = _version_of(version)
        assert number is not None
        ring[number] = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return ring


class PublicIds:
    """The public tokens of one prefix: ``encode(id)`` -> ``"ord_..."``, ``decode(token)``
    -> the id.

    ``keys`` maps a key version (0 to 31) to a secret of at least 16 bytes (``str`` or
    ``bytes``); the highest version encodes and every version decodes. ``kind`` limits
    the codec to ids (``"int"``: 0 to 2**64 - 1) or UUIDs (``"uuid"``); by default it
    takes both, and ``decode`` returns whichever the token holds.

    ``decode`` raises ``PublicIdError`` (a ``ValueError``) for a token of another prefix,
    kind or key, of an unknown version, or truncated, tampered or malformed: a changed
    token passes with probability 2**-36 (ids) or 2**-32 (UUIDs). Bad keys or prefixes
    are a ``ConfigurationError`` when the codec is made. Encoding or decoding takes a
    few microseconds; the object is immutable and safe to share between threads.
    """

    __slots__ = ("_by_length", "_ciphers", "_encoders", "_head", "kind", "prefix", "versions")

    def __init__(
        self, prefix: str, keys: Mapping[int, str | bytes], *, kind: Kind | None = None
    ) -> None:
        problem = prefix_problem(prefix)
        if problem is not None:
            raise ConfigurationError(problem)
        if kind is not None and kind not in _SHAPES:
            raise ConfigurationError(f"kind must be 'int', 'uuid' or None, got {shown(kind)}")
        ring = _key_ring(keys)
        self.prefix: str = prefix
        self.kind: Kind | None = kind
        self.versions: tuple[int, ...] = tuple(sorted(ring))
        shapes = [_SHAPES[kind]] if kind is not None else [_INT, _UUID]
        self._head = prefix + "_"
        self._ciphers: dict[tuple[int, int], tuple[Round, ...]] = {
            (shape.body_chars, version): _rounds(secret, shape, prefix, version)
            for shape in shapes
            for version, secret in ring.items()
        }
        self._by_length = {shape.body_chars + 1: shape for shape in shapes}
        newest = self.versions[-1]
        self._encoders = {
            shape.kind: (self._ciphers[shape.body_chars, newest], CROCKFORD[newest])
            for shape in shapes
        }

    @property
    def version(self) -> int:
        """The key version new tokens are made with (the highest)."""
        return self.versions[-1]

    # -- encoding ------------------------------------------------------------------------
    def encode(self, value: int | uuid.UUID) -> str:
        """The token of an id (an int from 0 to 2**64 - 1) or of a UUID."""
        if type(value) is int or (isinstance(value, int) and not isinstance(value, bool)):
            encoder = self._encoders.get("int")
            if encoder is None:
                raise TypeError(f"public ids of {self.prefix!r} are UUIDs, got an int")
            if not 0 <= value <= _MAX64:
                raise PublicIdError(f"an id must be from 0 to 2**64 - 1, got {shown(value)}")
            rounds, version = encoder
            body = _text(_encipher(rounds, _INT, value << INT_REDUNDANCY_BITS), _INT)
        elif isinstance(value, uuid.UUID):
            encoder = self._encoders.get("uuid")
            if encoder is None:
                raise TypeError(f"public ids of {self.prefix!r} are ints, got a UUID")
            rounds, version = encoder
            body = _text(_encipher(rounds, _UUID, value.int << UUID_REDUNDANCY_BITS), _UUID)
        else:
            raise TypeError(f"a public id encodes an int id or a UUID, got {type(value).__name__}")
        return self._head + body + version

    # -- decoding ------------------------------------------------------------------------
    def _decode(self, token: object, want: _Shape | None) -> tuple[_Shape, int]:
        if not isinstance(token, str):
            raise PublicIdError(f"a public id is a string, got {type(token).__name__}")
        head, sep, body = token.rpartition("_")
        if head != self.prefix and not (sep and head.isascii() and head.lower() == self.prefix):
            raise PublicIdError(f"not a public id of {self.prefix!r}: the prefix differs")
        shape = self._by_length.get(len(body))
        if shape is None or (want is not None and shape is not want):
            kinds = " or ".join(
                f"{s.body_chars + 1} characters ({'an id' if s is _INT else 'a UUID'})"
                for s in self._by_length.values()
                if want is None or s is want
            )
            raise PublicIdError(
                f"not a public id of {self.prefix!r}: its body must be {kinds or 'none'}"
            )
        if not (body.isascii() and body.isalnum()):
            raise PublicIdError(_NOT_BASE32.format(self.prefix))
        try:
            number = int(body.translate(_FROM_CROCKFORD), 32)
        except ValueError:
            raise PublicIdError(_NOT_BASE32.format(self.prefix)) from None
        version = number & 31
        rounds = self._ciphers.get((shape.body_chars, version))
        if rounds is None:
            raise PublicIdError(
                f"public id of {self.prefix!r} made with key version {version}, which is not "
                f"configured (versions: {list(self.versions)})"
            )
        block = _decipher(rounds, shape, number >> 5)
        if block & shape.redundancy_mask:
            raise PublicIdError(
                f"not a public id of {self.prefix!r}: it does not decode under key version "
                f"{version} (tampered, truncated, or made with another key, prefix or kind)"
            )
        return shape, block >> shape.redundancy_bits

    def canonical(self, token: str) -> str:
        """The one spelling of ``token``: what ``encode`` makes of the id it stands for
        (lower case, the prefix's own case and ``_``, ``1`` for I and L, ``0`` for O).
        ``decode`` reads the other spellings too; caches, de-duplication, logs and URLs
        should see this one. ``PublicIdError`` if it is no token of these keys."""
        self._decode(token, None)
        return spelling(token)

    def is_canonical(self, token: str) -> bool:
        """Whether ``token`` is a token of these keys, spelt as ``encode`` spells it."""
        try:
            return self.canonical(token) == token
        except PublicIdError:
            return False

    def decode(self, token: str) -> int | uuid.UUID:
        """The id (an int) or the UUID a token stands for; ``PublicIdError`` if it is not
        a token of this prefix and these keys."""
        shape, value = self._decode(token, None)
        return value if shape is _INT else uuid.UUID(int=value)

    def decode_int(self, token: str) -> int:
        """The id a token of an int stands for; a UUID's token is refused."""
        return self._decode(token, _INT)[1]

    def decode_uuid(self, token: str) -> uuid.UUID:
        """The UUID a token of a UUID stands for; an id's token is refused."""
        return uuid.UUID(int=self._decode(token, _UUID)[1])

    def __repr__(self) -> str:
        kind = "" if self.kind is None else f" kind={self.kind!r}"
        return f"<PublicIds {self.prefix!r} versions={list(self.versions)}{kind}>"
