"""CredentialVault with AES-256-GCM (`cryptography`) and a key file in the data dir, mode 0600.

The key is created on first use with O_CREAT|O_EXCL and mode 0600 (so no other user can ever read it, not
even for an instant); a key file found readable by others is narrowed to 0600 with a warning. Sealed values
are `v1:` + base64url(nonce || ciphertext+tag), with "org\\x1fowner" as associated data.
"""

from __future__ import annotations

import base64
import logging
import os
import stat
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ctxstore.ports.credential_vault import VaultError

log = logging.getLogger("ctxstore.vault")
PREFIX = "v1:"
NONCE_BYTES = 12


def load_key(path: Path) -> bytes:
    """The 32-byte key at path, created (0600) when missing."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            log.warning("%s was readable by other users (mode %o); narrowing it to 0600", path, mode)
            path.chmod(0o600)
        key = path.read_bytes()
        if len(key) != 32:
            raise VaultError(f"{path} is not a 32-byte key") from None
        return key
    key = AESGCM.generate_key(bit_length=256)
    try:
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


class AesGcmVault:
    def __init__(self, key_path: Path) -> None:
        self._aead = AESGCM(load_key(key_path))

    @staticmethod
    def _aad(org: str, owner: str) -> bytes:
        return f"{org}\x1f{owner}".encode()

    def seal(self, org: str, owner: str, plaintext: bytes) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, plaintext, self._aad(org, owner))
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode()

    def open(self, org: str, owner: str, sealed: str) -> bytes:
        if not sealed.startswith(PREFIX):
            raise VaultError("not a sealed value of this vault")
        try:
            raw = base64.urlsafe_b64decode(sealed[len(PREFIX) :])
            return self._aead.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], self._aad(org, owner))
        except (InvalidTag, ValueError) as exc:
            raise VaultError("the sealed value does not open with this key for this owner") from exc
