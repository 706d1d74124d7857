"""Credential vault: connector credentials encrypted at rest.

Locally an AES-GCM key in a file of the data dir that only the server's user can read; on AWS a KMS key.
Every ciphertext is bound to its organisation and connector (AES-GCM associated data, a KMS encryption
context), so a sealed value copied onto another connector's record does not open.
"""

from __future__ import annotations

from typing import Protocol


class VaultError(Exception):
    """A sealed value could not be opened (wrong key, tampered, bound to another connector)."""


class CredentialVault(Protocol):
    def seal(self, org: str, owner: str, plaintext: bytes) -> str:
        """Encrypt for (org, owner); the result is printable text to store in a record."""
        ...

    def open(self, org: str, owner: str, sealed: str) -> bytes:
        """Decrypt what seal returned for the same (org, owner); VaultError otherwise."""
        ...
