"""Where each kind of record lives in the RecordStore (kind, pk, sk)."""

from __future__ import annotations

from ctxstore.domain.items import KEY_SEP

SYSTEM_ORG = "_system"  # records looked up before the organisation is known (API keys, recovery index)

ORG = "org"  # system: pk "" sk org id
API_KEY = "api_key"  # system: pk "" sk key prefix
DATABASE = "database"  # org: pk "" sk database
COLLECTION = "collection"  # org: pk database sk collection
BYOG_DATABASE = "byog_database"  # org: pk "" sk database (BYOG databases, apart from core ones)
PENDING_DB_WORK = "pending_db_work"  # system: pk "" sk "<org>\x1f<database>"; recovery after a crash
WEBHOOK = "webhook"  # org: pk "" sk API key prefix (one indexing webhook per key)
WEBHOOK_DELIVERY = "webhook_delivery"  # org: pk API key prefix sk delivery id (time-ordered)
UPLOAD = "upload"  # org: pk "" sk upload id; a large file staged in blobs under UPLOAD_PREFIX until ingested
CONNECTOR = "connector"  # org: pk "" sk connector id (its settings and sync state)
CONNECTOR_SCOPE = "connector_scope"  # org: pk provider sk provider_account_scope -> connector id (uniqueness)
CONNECTOR_CREDENTIALS = "connector_credentials"  # org: pk "" sk connector id; sealed by the credential vault
CONNECTOR_RESOURCE = "connector_resource"  # org: pk connector id sk resource id (settings, checkpoint)
CONNECTOR_OBJECT = "connector_object"  # org: pk connector id SEP resource id sk native id -> item (dedupe, deletes)
FEEDBACK = "feedback"  # org: pk "" sk feedback id (time-ordered); POST /feedback

# Staged uploads live outside every database folder (database names start with a letter or digit).
UPLOAD_PREFIX = "_uploads/"

SEP = KEY_SEP  # the item references' separator (domain/items.py): one for every record key


def blob_scope_prefix(database: str, collection: str) -> str:
    """Blob keys of one collection start with this; the default collection has a reserved folder name."""
    return f"{database}/{collection or '_default'}/"
