"""The composition root builds ports on first use: a Lambda pays only for the adapters its handler touches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from ctxstore.domain.errors import ApiError, ErrorCode
from ctxstore.services.container import Container
from ctxstore.services.registry import Services
from tests.aws.moto_env import ROOT
from tests.fakes.ports import FakeClock, InMemoryRecordStore, InMemoryVault, InMemoryWorkQueue


class _Counting:
    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        return self.value


def test_a_port_is_built_on_first_read_and_once() -> None:
    graph = _Counting(object())
    c = Container(factories={"graph": graph})
    assert graph.calls == 0 and c.configured("graph")
    assert c.graph is graph.value and c.graph is graph.value
    assert graph.calls == 1


def test_a_set_port_wins_over_its_factory_and_unset_optional_ports_are_none() -> None:
    c = Container(factories={"graph": _Counting("built")})
    c.graph = None  # type: ignore[assignment]
    assert c.graph is None and not c.configured("graph")
    assert c.search_index is None and c.connector_providers == {}


def test_unknown_ports_and_missing_required_ports_fail_loudly() -> None:
    with pytest.raises(TypeError, match="no port named nope"):
        Container(nope=1)
    with pytest.raises(LookupError, match="'records'"):
        _ = Container().records


def test_graph_purgers_are_wired_before_the_graph_is_built() -> None:
    graph = _Counting(object())
    svc = Services(Container(records=object(), clock=object(), factories={"graph": graph}))
    _ = svc.catalog, svc.databases  # in either order
    assert graph.calls == 0
    assert svc.graphs is not None and graph.calls == 0  # the graph service reads its port per call
    assert svc.databases._purgers == [svc._purge_scope_graphs]
    assert svc.catalog._purgers == [svc._purge_item_graphs]


def test_without_a_graph_nothing_is_wired() -> None:
    svc = Services(Container(records=object(), clock=object()))
    assert svc.graphs is None and svc.databases._purgers == [] and svc.catalog._purgers == []


# Ports only some paths of a service use reach it as providers (read per call), not as built adapters.
PER_CALL_PORTS = ("queue", "blobs", "search_index", "graph", "extractor", "vault", "http_sender")


def test_building_the_services_builds_no_port_but_the_records_and_the_clock() -> None:
    built = {name: _Counting(object()) for name in PER_CALL_PORTS}
    svc = Services(Container(records=object(), clock=object(), factories=built))
    _ = svc.webhooks, svc.keys, svc.databases, svc.feedback, svc.byog, svc.graphs
    assert {name: f.calls for name, f in built.items()} == dict.fromkeys(PER_CALL_PORTS, 0)


def test_the_webhook_service_is_built_on_the_first_emit_not_with_the_services() -> None:
    records = _Counting(object())
    c = Container(clock=object(), factories={"records": records})
    svc = Services(c)
    assert records.calls == 0 and "webhooks" not in vars(svc)
    assert c.events is svc.webhooks and records.calls == 1  # the event sink is the webhook service


def test_the_connector_service_opens_the_vault_only_to_seal_or_open_credentials() -> None:
    clock = FakeClock()
    ports = {"records": InMemoryRecordStore(clock), "clock": clock, "queue": InMemoryWorkQueue(clock)}
    vault = _Counting(InMemoryVault())
    connectors = Services(Container(**ports, factories={"vault": vault})).connectors
    assert connectors is not None and vault.calls == 0
    creds, _ = connectors._ready()
    creds.sealed_put("o1", "c1", {"access_token": "t"}, if_version=None)
    assert vault.calls == 1
    without = Services(Container(**ports)).connectors  # no vault on this deployment: connectors answer 503
    assert without is not None
    with pytest.raises(ApiError) as err:
        without._ready()
    assert err.value.code is ErrorCode.SERVICE_UNAVAILABLE


PROBE = """
import json, sys
from ctxstore.config import Settings
from ctxstore.runtime.aws import build_aws
from ctxstore.services.registry import Services
svc = Services(build_aws(Settings()))
before = sorted(m for m in sys.modules if m.startswith(("ctxstore.adapters", "ctxstore.connectors", "boto3")))
_ = svc.query, svc.keys  # both read the records port when built; neither reads search or graph until a call
after = sorted(m for m in sys.modules if m.startswith(("ctxstore.adapters", "boto3")))
print(json.dumps([before, after]))
"""


def test_building_the_aws_services_imports_no_adapter_until_a_port_is_read() -> None:
    env = {
        **os.environ,
        "CTXSTORE_BACKEND": "aws",
        "CTXSTORE_RECORDS_TABLE": "t",
        "CTXSTORE_JOBS_TABLE": "j",
        "CTXSTORE_BLOB_BUCKET": "b",
        "CTXSTORE_SEARCH_ENDPOINT": "https://x.us-east-1.aoss.amazonaws.com",
        "CTXSTORE_GRAPH_ID": "g-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = json.loads(proc.stdout.strip().splitlines()[-1])
    assert before == []
    assert "ctxstore.adapters.aws.dynamodb_records" in after and "boto3" in after
    assert "ctxstore.adapters.aws.opensearch_index" not in after and "ctxstore.adapters.aws.neptune_graph" not in after


TRACE_PROBE = """
import json, sys
from ctxstore.config import Settings
from ctxstore.runtime.lambda_observability import observed
wrapped = observed(lambda event, context: {"ok": True}, http=False, trace=Settings().aws.trace_aws_calls)
print(json.dumps("aws_xray_sdk" in sys.modules))
"""


@pytest.mark.parametrize(("flag", "loaded"), [("false", False), ("true", True)])
def test_the_x_ray_sdk_loads_only_when_aws_calls_are_traced(flag: str, loaded: bool) -> None:
    env = {**os.environ, "CTXSTORE_TRACE_AWS_CALLS": flag, "POWERTOOLS_TRACE_DISABLED": "1", "AWS_DEFAULT_REGION": "x"}
    proc = subprocess.run(
        [sys.executable, "-c", TRACE_PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) is loaded


WIRING_PROBE = """
import json, sys
from ctxstore.config import Settings
from ctxstore.runtime.aws import build_aws
c = build_aws(Settings())
_ = c.clock, c.http_sender, c.extractor  # the ports AWS builds from adapters that are not its own
print(json.dumps(sorted(m for m in sys.modules if m.startswith("ctxstore.adapters."))))
"""


def test_the_aws_wiring_loads_no_module_of_the_local_backend() -> None:
    """`adapters/local` holds only the single-machine engines: what AWS builds too lives in `adapters/system`
    (clock, webhook sender) and `adapters/models` (the extraction answer Bedrock's extractor shares)."""
    env = {
        **os.environ,
        "CTXSTORE_BACKEND": "aws",
        "CTXSTORE_EXTRACTOR": "bedrock",
        "CTXSTORE_EXTRACTOR_MODEL_ID": "anthropic.claude-3-haiku-20240307-v1:0",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    proc = subprocess.run(
        [sys.executable, "-c", WIRING_PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert {"ctxstore.adapters.system.system_clock", "ctxstore.adapters.system.httpx_sender"} <= set(loaded)
    assert "ctxstore.adapters.models.extraction_answer" in loaded
    assert not [m for m in loaded if m.startswith("ctxstore.adapters.local")]
