"""API key format and hashing: `csk_<12-char prefix>_<secret>`; only a hash of the secret is stored."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass

KEY_PREFIX = "csk"
PREFIX_LEN = 12
SECRET_LEN = 40
_ALPHABET = string.ascii_letters + string.digits
_KEY_RE = re.compile(rf"^{KEY_PREFIX}_([A-Za-z0-9]{{{PREFIX_LEN}}})_([A-Za-z0-9]{{32,128}})$")


@dataclass(frozen=True)
class NewKey:
    prefix: str
    secret: str

    @property
    def token(self) -> str:
        return f"{KEY_PREFIX}_{self.prefix}_{self.secret}"


def generate() -> NewKey:
    prefix = "".join(secrets.choice(_ALPHABET) for _ in range(PREFIX_LEN))
    secret = "".join(secrets.choice(_ALPHABET) for _ in range(SECRET_LEN))
    return NewKey(prefix, secret)


def split(token: str) -> tuple[str, str] | None:
    """(prefix, secret) of a well-formed key, else None."""
    m = _KEY_RE.match(token)
    return (m.group(1), m.group(2)) if m else None


def hash_secret(secret: str) -> str:
    # The secret carries ~238 bits from a CSPRNG, so one SHA-256 pass is enough; no salt is needed.
    return hashlib.sha256(secret.encode()).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_duration(text: str) -> int:
    """'30d' -> seconds. Raises ValueError on anything else."""
    m = _DURATION.match(text.strip())
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"invalid duration '{text}': use a positive number with s, m, h, d or w")
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]
