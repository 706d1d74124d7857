"""The Connectors pages' forms: credential schemas as inputs, and the posted forms back into request bodies."""

from __future__ import annotations

import pytest
from starlette.datastructures import FormData

from ctxstore.connectors.github.info import CREDENTIAL_SCHEMA as GITHUB
from ctxstore.connectors.slack.info import CREDENTIAL_SCHEMA as SLACK
from ctxstore.console.connector_forms import (
    configure_body,
    credential_fields,
    credentials_from_form,
    duration,
)
from ctxstore.domain.errors import ApiError


def test_each_auth_type_renders_its_own_fields_secrets_as_secrets() -> None:
    token = credential_fields(SLACK, "api_token")
    assert [(f.name, f.kind, f.required) for f in token] == [("access_token", "secret", True)]
    oauth = {f.name: f for f in credential_fields(SLACK, "oauth")}
    assert oauth["refresh_token"].kind == oauth["client_secret"].kind == "secret"
    assert oauth["client_id"].kind == "text" and oauth["expires_at"].kind == "number"
    assert not oauth["expires_at"].required and oauth["client_id"].required
    # GitHub's alias (access_token for api_token) is one value: one input.
    assert [f.name for f in credential_fields(GITHUB, "api_token")] == ["api_token"]
    assert credential_fields(SLACK, "no_such_type") == []


def test_credentials_leave_out_empty_inputs_and_parse_numbers() -> None:
    fields = credential_fields(SLACK, "oauth")
    form = FormData([("cred.access_token", " xoxb-1 "), ("cred.refresh_token", ""), ("cred.expires_at", "1700000000")])
    assert credentials_from_form(form, fields) == {"access_token": "xoxb-1", "expires_at": 1700000000}
    with pytest.raises(ApiError, match="'expires_at' must be a number"):
        credentials_from_form(FormData([("cred.expires_at", "soon")]), fields)


def test_configure_body_takes_the_ticked_rows_with_their_settings() -> None:
    form = FormData(
        [
            ("sel", "0"),
            ("sel", "2"),
            ("rid.0", "C1"),
            ("col.0", " support "),
            ("mode.0", "new_only"),
            ("rid.1", "C2"),  # not ticked
            ("rid.2", "owner/repo,with comma"),
            ("col.2", ""),
            ("mode.2", "rescan"),
            ("lookback_days", "7"),
        ]
    )
    assert configure_body(form) == {
        "resources": [
            {"resource_id": "C1", "collection": "support", "sync_mode": "new_only"},
            {"resource_id": "owner/repo,with comma", "sync_mode": "rescan"},
        ],
        "lookback_days": 7,
    }
    with pytest.raises(ApiError, match="tick at least one"):
        configure_body(FormData([("rid.0", "C1")]))
    with pytest.raises(ApiError, match="whole number"):
        configure_body(FormData([("sel", "0"), ("rid.0", "C1"), ("lookback_days", "a week")]))


def test_durations_read_as_people_say_them() -> None:
    assert [duration(s) for s in (1, 300, 3600, 5400, 86400, 604800)] == [
        "1 s",
        "5 min",
        "1 h",
        "90 min",
        "1 day",
        "7 days",
    ]


def test_discovered_resources_read_as_short_phrases() -> None:
    from ctxstore.console.pages.connectors import resource_details

    facts = {"name": "general", "is_private": True, "is_member": False, "num_members": 3, "topic": "", "created": 1}
    assert resource_details(facts) == ["private", "num members: 3"]
    assert resource_details({"is_private": False, "default_branch": "main"}) == ["default branch: main"]
