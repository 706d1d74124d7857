"""CredentialVault on KMS: Encrypt/Decrypt under the stack's key with {org, owner} as encryption context.

Credential sets are small (tokens and a client secret), far under KMS Encrypt's 4 KB plaintext limit, so
no envelope encryption is needed; a larger set is refused. The encryption context binds each ciphertext
to its organisation and connector and appears in CloudTrail, which never sees the plaintext.
"""

from __future__ import annotations

import base64
from typing import Any

from botocore.exceptions import ClientError

from ctxstore.adapters.aws._common import client as make_client
from ctxstore.adapters.aws.faults import install as map_faults
from ctxstore.ports.credential_vault import VaultError

PREFIX = "kms1:"
MAX_PLAINTEXT = 4096  # KMS Encrypt's limit


class KmsVault:
    def __init__(self, key_id: str, *, client: Any | None = None) -> None:
        if not key_id:
            raise ValueError("a KMS key id is required (CTXSTORE_CONNECTOR_KMS_KEY_ID)")
        self._key_id = key_id
        self._client = map_faults(client or make_client("kms"))  # throttles/5xx -> E6001, not VaultError

    @staticmethod
    def _context(org: str, owner: str) -> dict[str, str]:
        return {"ctxstore:org": org, "ctxstore:owner": owner}

    def seal(self, org: str, owner: str, plaintext: bytes) -> str:
        if len(plaintext) > MAX_PLAINTEXT:
            raise VaultError(f"credentials are {len(plaintext)} bytes; at most {MAX_PLAINTEXT} can be stored")
        out = self._client.encrypt(KeyId=self._key_id, Plaintext=plaintext, EncryptionContext=self._context(org, owner))
        return PREFIX + base64.b64encode(out["CiphertextBlob"]).decode()

    def open(self, org: str, owner: str, sealed: str) -> bytes:
        if not sealed.startswith(PREFIX):
            raise VaultError("not a sealed value of this vault")
        try:
            blob = base64.b64decode(sealed[len(PREFIX) :], validate=True)
        except ValueError as exc:  # a damaged record: the same "does not open" as a wrong key
            raise VaultError("the sealed value is not base64") from exc
        try:
            out = self._client.decrypt(
                CiphertextBlob=blob,
                EncryptionContext=self._context(org, owner),
                KeyId=self._key_id,
            )
        except ClientError as exc:
            raise VaultError(f"KMS refused to decrypt: {exc.response.get('Error', {}).get('Code', '')}") from exc
        return bytes(out["Plaintext"])
