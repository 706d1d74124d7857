"""Settings are kept once, grouped by concern, under the CTXSTORE_* names operators already use; only the
composition root (ctxstore.runtime) knows the backend."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import pytest
from pydantic.fields import FieldInfo

from ctxstore.config import Settings, WebhookSettings
from ctxstore.runtime.capabilities import AWS_INLINE_UPLOAD_MAX_BYTES, capabilities_of
from ctxstore.services.container import Container
from ctxstore.services.registry import Services

CTXSTORE = Path(__file__).resolve().parents[2] / "layers" / "core" / "ctxstore"

# Every variable the flat Settings of before the grouping read (docs, template.yaml and tests use them).
VARIABLES = """
BACKEND DATA_DIR HOST PORT WORKERS SQLITE_BUSY_TIMEOUT_MS GRAPH_AOF_REWRITE_MB SHUTDOWN_TIMEOUT_S MAX_INFLIGHT_QUERIES
VECTOR_ANN_MIN_ROWS
MAX_INFLIGHT_INGESTS MAX_INFLIGHT_OTHER ADMISSION_WAIT_S MAX_DATABASES_PER_ORG RATE_LIMIT_PER_MINUTE RATE_LIMIT_BURST
QUERY_RATE_LIMIT_PER_MINUTE ALLOW_PRIVATE_WEBHOOKS CONSOLE_INLINE_UPLOAD_MAX_BYTES WEBHOOK_TIMEOUT_S
WEBHOOK_MAX_ATTEMPTS WEBHOOK_RETRY_INTERVAL_S WEBHOOK_RETRY_MAX_DELAY_S CONNECTOR_BASE_URL_SLACK
CONNECTOR_BASE_URL_GITHUB CONNECTOR_BASE_URL_LINEAR CONNECTOR_BASE_URL_NOTION CONNECTOR_BASE_URL_GMAIL
CONNECTOR_TOKEN_URL_SLACK CONNECTOR_TOKEN_URL_GITHUB CONNECTOR_TOKEN_URL_LINEAR CONNECTOR_TOKEN_URL_NOTION
CONNECTOR_TOKEN_URL_GMAIL CONNECTOR_TICK_S CONNECTOR_WORKERS CONNECTOR_CHUNK_OBJECTS CONNECTOR_CHUNK_SECONDS
CONNECTOR_CONTINUE_AFTER_S CONNECTOR_MAX_WAIT_S CONNECTOR_HTTP_TIMEOUT_S CONNECTOR_MIN_INTERVAL_S
CONNECTOR_RECONCILE_INTERVAL_S CONNECTOR_PROVIDERS CONNECTOR_KMS_KEY_ID BYOG_MAX_ROWS BYOG_CLUSTER_NAME
BYOG_READ_TIMEOUT_MS BYOG_WRITE_TIMEOUT_MS EXTRACTOR EXTRACTOR_PROCESSES EMBEDDING_PRECISION TRACE_AWS_CALLS
EXTRACTOR_MODEL_ID RERANK_MODEL RERANK_URL RERANK_API RERANK_API_KEY RERANK_TIMEOUT_S INFERRER LLM_BASE_URL
LLM_API_KEY LLM_MODEL LLM_TIMEOUT_S RECORDS_TABLE JOBS_TABLE BLOB_BUCKET BLOB_SSE BLOB_KMS_KEY_ID
STATE_MACHINE_ARN INGEST_START_QUEUE_URL INGEST_MAX_RUNNING WEBHOOK_QUEUE_URL SCHEDULER_GROUP
SCHEDULER_TARGET_ARN SCHEDULER_ROLE_ARN SEARCH_ENDPOINT SEARCH_INDEX SEARCH_REGION GRAPH_ID BYOG_GRAPH_IDS
EMBEDDING_MODEL_ID EMBEDDING_DIMENSIONS
LOG_FORMAT METRICS_TOKEN VECTOR_SNAPSHOT_S KEYWORD_MERGE_S
""".split()  # noqa: SIM905 (the names as operators read them, wrapped)


def _other_value(field: FieldInfo) -> tuple[str, Any]:
    """A value unlike the default, as the variable's text and as the field holds it."""
    t, default = field.annotation, field.default
    if get_origin(t) is Literal:
        choice = next(c for c in get_args(t) if c != default)
        return str(choice), choice
    if t is bool:
        return ("false", False) if default else ("true", True)
    if t is int:
        return str(default + 7), default + 7
    if t is float:
        return str(default + 0.5), default + 0.5
    if t is Path:
        return "/srv/ctx", Path("/srv/ctx")
    if get_origin(t) is dict:
        return '{"acme/g": "g-1"}', {"acme/g": "g-1"}
    return "set-by-env", "set-by-env"


def _read(settings: Settings, variable: str) -> Any:
    """The value a variable set, found by the one naming rule (group env_prefix + field, or its alias)."""
    flat = variable.removeprefix("CTXSTORE_").lower()
    if flat in Settings.model_fields:
        return getattr(settings, flat)
    [(group, attr)] = [(g, c.flat_names()[flat]) for g, c in Settings.groups().items() if flat in c.flat_names()]
    return getattr(getattr(settings, group), attr)


def test_every_existing_variable_is_read_and_nothing_else() -> None:
    assert sorted(Settings.variables()) == sorted(f"CTXSTORE_{v}" for v in VARIABLES)


@pytest.mark.parametrize("name", VARIABLES)
def test_each_variable_sets_its_field(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    variable = f"CTXSTORE_{name}"
    text, value = _other_value(Settings.variables()[variable])
    monkeypatch.setenv(variable.lower() if name.endswith("S") else variable, text)  # case-insensitive
    assert _read(Settings(), variable) == value
    assert _read(Settings(**{name.lower(): value}), variable) == value  # the flat name as a keyword too


def test_a_keyword_beats_the_environment_and_the_rest_of_its_group_still_comes_from_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CTXSTORE_WEBHOOK_TIMEOUT_S", "9")
    monkeypatch.setenv("CTXSTORE_WEBHOOK_MAX_ATTEMPTS", "3")
    s = Settings(webhook_timeout_s=1.5)
    assert (s.webhooks.timeout_s, s.webhooks.max_attempts) == (1.5, 3)


def test_groups_are_frozen_and_a_bare_container_has_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXSTORE_WEBHOOK_MAX_ATTEMPTS", "3")
    with pytest.raises(ValueError):
        Settings().webhooks.max_attempts = 1  # type: ignore[misc]
    assert Container().settings.webhooks == WebhookSettings()  # no environment read behind a test's back


def test_each_service_gets_its_own_group() -> None:
    s = Settings(webhook_timeout_s=3, connector_http_timeout_s=4, byog_max_rows=5, max_databases_per_org=2)
    ports = {name: object() for name in ("records", "queue", "clock", "blobs")}
    svc = Services(Container(settings=s, capabilities=capabilities_of(s), **ports))
    assert svc.webhooks.settings.timeout_s == 3
    assert svc.connectors is not None and svc.connectors.settings.http_timeout_s == 4
    assert svc.byog is not None and svc.byog.max_rows == 5


def test_the_composition_root_turns_the_backend_into_capabilities() -> None:
    local, aws = capabilities_of(Settings()), capabilities_of(Settings(backend="aws", byog_graph_ids={"a/g": "g"}))
    assert (local.single_process, local.admission_gate, local.serves_static_openapi) == (True, True, False)
    assert (aws.single_process, aws.admission_gate, aws.serves_static_openapi) == (False, False, True)
    assert (local.console_inline_upload_max_bytes, aws.console_inline_upload_max_bytes) == (
        0,
        AWS_INLINE_UPLOAD_MAX_BYTES,
    )
    assert (
        capabilities_of(Settings(backend="aws", console_inline_upload_max_bytes=9)).console_inline_upload_max_bytes == 9
    )
    assert (local.byog_graphs, aws.byog_graphs) == (None, frozenset({"a/g"}))


def test_no_backend_check_outside_the_composition_root() -> None:
    check = re.compile(r"\bbackend\s*(==|!=)|(==|!=)\s*\w*\.?backend\b")
    found = [
        f"{path.relative_to(CTXSTORE)}:{n}"
        for path in CTXSTORE.rglob("*.py")
        if "runtime" not in path.relative_to(CTXSTORE).parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if check.search(line)
    ]
    assert found == [], "test capabilities the composition root sets (services.container.Capabilities) instead"
