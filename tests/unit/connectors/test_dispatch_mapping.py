"""How a synced object becomes an item (services/connectors/dispatch.build_spec): ids, system metadata, graph
fields and attachments, without I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxstore.ports.connector_provider import Attachment, ObjectLink, SyncedObject
from ctxstore.services.connectors.dispatch import Target, _digest, build_spec

T = Target(
    org="o",
    connector_id="conn_1",
    provider="slack",
    account_scope="T1",
    account_details={"slack_team": "Acme"},
    resource_id="C1",
    resource_name="general",
    database="acme",
    collection="",
    metadata={"team": "eng", "provider": "user-says-otherwise"},
    additional_metadata={"origin": "x", "connector_id": "spoofed"},
    custom_instructions="Track decisions.",
    sync_mode="rescan",
)


def test_ids_system_metadata_and_graph_fields() -> None:
    obj = SyncedObject(
        native_id="C1_2.0",
        kind="message",
        title="#general: hi",
        text="hi",
        url="https://acme.slack.com/archives/C1/p20",
        author="U1",
        created_at=2.0,
        thread_native_id="C1_1.0",
        parent_native_id="C1_1.0",
        links=(ObjectLink("C1_1.0", "reply_to"), ObjectLink("C1_1.0", "reply_to"), ObjectLink("C1_2.0", "self")),
        native_fields={"slack_ts": "2.0"},
    )
    spec, attachments = build_spec(T, obj)
    assert spec.id == "slack_T1_C1_2.0" and spec.external_id == "C1_2.0" and spec.provider == "slack"
    assert spec.thread_id == spec.parent_id == "slack_T1_C1_1.0"
    assert [(x.target_id, x.relation) for x in spec.links] == [("slack_T1_C1_1.0", "reply_to")]  # deduped, no self
    assert spec.metadata == {"team": "eng", "provider": "slack", "connector_id": "conn_1"}  # system keys win
    extra = spec.additional_metadata
    assert extra["connector_id"] == "conn_1" and extra["origin"] == "x" and extra["slack_team"] == "Acme"
    assert extra["resource_id"] == "C1" and extra["provider_account_scope"] == "T1" and extra["slack_ts"] == "2.0"
    assert extra["custom_instructions"] == "Track decisions." and extra["url"].endswith("p20")
    assert spec.timestamp == 2.0 and attachments == []


def test_attachments_become_child_file_items_when_their_format_is_accepted() -> None:
    obj = SyncedObject(
        native_id="m1",
        kind="email",
        title="Invoice",
        text="see attached",
        attachments=(
            Attachment("invoice.pdf", "application/pdf", b"%PDF-1.4"),
            Attachment("photo.heic", "image/heic", b"x"),
            Attachment("notes.txt", None, b"hello"),
        ),
    )
    spec, attachments = build_spec(T, obj)
    assert [(a.id, a.title, a.ext, a.parent_id) for a in attachments] == [
        ("slack_T1_m1~att0", "invoice.pdf", ".pdf", spec.id),
        ("slack_T1_m1~att2", "notes.txt", ".txt", spec.id),
    ]
    assert attachments[0].additional_metadata["attachment_of"] == spec.id


def test_an_object_over_the_metadata_cap_is_a_failure_not_a_crash() -> None:
    obj = SyncedObject(native_id="m2", kind="message", title="t", text="x", native_fields={"big": "y" * 20000})
    with pytest.raises(ValueError, match="16 KiB"):
        build_spec(T, obj)


def test_a_new_update_time_alone_does_not_make_an_object_changed() -> None:
    """GitHub bumps an issue's updated_at for each new comment: the issue must not be re-indexed for it."""
    issue = SyncedObject(native_id="acme/w#1", kind="issue", title="Bug", text="Bug body", updated_at=100.0)

    def digest(obj: SyncedObject) -> str:
        return _digest(*build_spec(T, obj))

    assert digest(replace(issue, updated_at=200.0)) == digest(issue)
    assert digest(replace(issue, text="Bug body, edited", updated_at=200.0)) != digest(issue)
