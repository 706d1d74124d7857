"""An in-memory CredentialVault: real authenticated encryption from the standard library, so what the
contract demands holds for the same reasons it does on AES-GCM and KMS.

A sealed value is `mem1:` + base64url(nonce || ciphertext || tag): the plaintext XORed with an
HMAC-SHA256 key stream of (key, nonce), and a tag over (org, owner, nonce, ciphertext). A value does not
open under another vault's key, for another (org, owner), or once a byte is changed. Like KMS Encrypt it
refuses an empty plaintext and more than 4 KB, the narrowest limits of the real vaults.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

from ctxstore.ports.credential_vault import VaultError

PREFIX = "mem1:"
NONCE_BYTES = 16
TAG_BYTES = 32
MAX_PLAINTEXT = 4096  # KMS Encrypt's limit


def _stream(key: bytes, nonce: bytes, n: int) -> bytes:
    out = b""
    counter = 0
    while len(out) < n:
        out += hmac.digest(key, nonce + counter.to_bytes(8, "big"), hashlib.sha256)
        counter += 1
    return out[:n]


class InMemoryVault:
    def __init__(self, key: bytes | None = None) -> None:
        self._enc_key = key or os.urandom(32)
        self._mac_key = hashlib.sha256(b"mac" + self._enc_key).digest()

    def _tag(self, org: str, owner: str, nonce: bytes, body: bytes) -> bytes:
        bound = f"{org}\x1f{owner}".encode()
        return hmac.digest(self._mac_key, len(bound).to_bytes(4, "big") + bound + nonce + body, hashlib.sha256)

    def seal(self, org: str, owner: str, plaintext: bytes) -> str:
        if not 1 <= len(plaintext) <= MAX_PLAINTEXT:
            raise VaultError(f"credentials are {len(plaintext)} bytes; 1 to {MAX_PLAINTEXT} can be stored")
        nonce = os.urandom(NONCE_BYTES)
        body = bytes(a ^ b for a, b in zip(plaintext, _stream(self._enc_key, nonce, len(plaintext)), strict=True))
        raw = nonce + body + self._tag(org, owner, nonce, body)
        return PREFIX + base64.urlsafe_b64encode(raw).decode()

    def open(self, org: str, owner: str, sealed: str) -> bytes:
        if not sealed.startswith(PREFIX):
            raise VaultError("not a sealed value of this vault")
        try:
            raw = base64.urlsafe_b64decode(sealed[len(PREFIX) :])
        except ValueError as exc:
            raise VaultError("the sealed value is not base64url") from exc
        if len(raw) < NONCE_BYTES + TAG_BYTES:
            raise VaultError("the sealed value is truncated")
        nonce, body, tag = raw[:NONCE_BYTES], raw[NONCE_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
        if not hmac.compare_digest(tag, self._tag(org, owner, nonce, body)):
            raise VaultError("the sealed value does not open with this key for this owner")
        return bytes(a ^ b for a, b in zip(body, _stream(self._enc_key, nonce, len(body)), strict=True))
