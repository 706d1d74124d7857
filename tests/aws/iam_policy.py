"""What each function's role allows, from template.yaml as SAM deploys it.

The template goes through SAM's own translator (samtranslator, the library `sam build`/`sam deploy` use),
so SAM policy templates (DynamoDBCrudPolicy, S3CrudPolicy, SQSSendMessagePolicy, ...) become the IAM
statements CloudFormation will create. Intrinsic functions are then resolved against a `Deployment`: the
physical names a resource gets from its own name property (TableName, QueueName, ...) under the given
parameters, with explicit overrides for what only exists once created (a KMS key id). The moto world of
tests/aws/test_iam_coverage.py is built from the same names, so recorded ARNs and policy ARNs meet.

`Role.allows(action, resource)` is IAM's evaluation for identity policies without conditions: an explicit
Deny wins, otherwise any Allow whose action and resource patterns (`*`, `?`) match. The OpenSearch
Serverless data access policy is evaluated the same way per principal (`DataAccessPolicy.allows`).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from tests.aws.iam_recorder import ACCOUNT, REGION

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
PARTITION = "aws"

_NO_VALUE = object()

# Policies SAM attaches by ARN. Their statements as AWS publishes them (the parts a function could use);
# they carry what the Lambda service does for the function (logs, traces, event-source polling).
MANAGED_POLICIES: dict[str, list[dict[str, Any]]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        }
    ],
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": [
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                "xray:GetSamplingStatisticSummaries",
            ],
            "Resource": "*",
        }
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
            "Resource": "*",
        },
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        },
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:DescribeStream",
                "dynamodb:GetRecords",
                "dynamodb:GetShardIterator",
                "dynamodb:ListStreams",
            ],
            "Resource": "*",
        },
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        },
    ],
}

# Verbs of actions that change something. An allowed write no test makes is a grant to remove (or to explain).
_WRITE_VERBS = (
    "Put", "Update", "Delete", "Write", "Create", "Send", "Start", "Stop", "BatchWrite", "Change", "Tag", "Untag",
    "Restore", "Abort", "PassRole", "Purge", "Remove", "Add", "Set", "Modify", "Attach", "Detach", "Invoke",
)  # fmt: skip


def is_write(action: str) -> bool:
    verb = action.split(":", 1)[1]
    return verb.startswith(_WRITE_VERBS) and not verb.startswith("InvokeModel")  # a model call changes nothing


def _pattern(pattern: str, value: str, *, case: bool) -> bool:
    """IAM's wildcards: `*` any run of characters, `?` one; actions compare case-insensitively."""
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def action_matches(pattern: str, action: str) -> bool:
    return _pattern(pattern, action, case=False)


def resource_matches(pattern: str, resource: str) -> bool:
    return _pattern(pattern, resource, case=True)


# ---- the SAM translation ----------------------------------------------------------------------------
@cache
def translated(template_text: str | None = None) -> dict[str, Any]:
    """template.yaml as CloudFormation, translated by samtranslator (local code URIs become S3 URIs first,
    as `sam package` does; the translator accepts nothing else)."""
    import os

    from samtranslator.translator.managed_policy_translator import ManagedPolicyLoader
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    sam = yaml_parse(template_text if template_text is not None else TEMPLATE.read_text())
    for res in sam["Resources"].values():
        props = res.get("Properties", {})
        for key in ("CodeUri", "ContentUri", "DefinitionUri"):
            if isinstance(props.get(key), str):
                props[key] = f"s3://packaged/{props[key]}"

    class NoManagedPolicyNames(ManagedPolicyLoader):  # the template names managed policies by ARN only
        def __init__(self) -> None:
            pass

        def load(self) -> dict[str, str]:
            return {}

    out: dict[str, Any] = transform(sam, {}, NoManagedPolicyNames())
    return out


# ---- intrinsic functions ----------------------------------------------------------------------------
_NAME_PROPERTY = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::StepFunctions::StateMachine": "StateMachineName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::Scheduler::ScheduleGroup": "Name",
    "AWS::OpenSearchServerless::Collection": "Name",
    "AWS::NeptuneGraph::Graph": "GraphName",
    "AWS::IAM::Role": "RoleName",
}


@dataclass
class Deployment:
    """A stack's resolved values: parameters (defaults + given), pseudo parameters, and Ref/GetAtt values."""

    cfn: dict[str, Any]
    parameters: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)  # "Logical" (Ref) or "Logical.Attr" -> value

    def __post_init__(self) -> None:
        params = {k: v.get("Default") for k, v in self.cfn.get("Parameters", {}).items()}
        params.update(self.parameters)
        params.update(
            {
                "AWS::Region": REGION,
                "AWS::AccountId": ACCOUNT,
                "AWS::Partition": PARTITION,
                "AWS::URLSuffix": "amazonaws.com",
                "AWS::StackName": "ctxstore-test",
            }
        )
        self.parameters = {k: (str(v) if isinstance(v, int | float) else v) for k, v in params.items()}

    @property
    def resources(self) -> dict[str, Any]:
        res: dict[str, Any] = self.cfn["Resources"]
        return res

    def condition(self, name: str) -> bool:
        return bool(self.resolve(self.cfn.get("Conditions", {})[name]))

    def name(self, logical_id: str) -> str:
        """The physical name: the resource's name property, else (as CloudFormation would generate one) its id."""
        res = self.resources[logical_id]
        prop = _NAME_PROPERTY.get(res["Type"])
        value = res.get("Properties", {}).get(prop) if prop else None
        return str(self.resolve(value)) if value is not None else logical_id

    def ref(self, logical_id: str) -> Any:
        if logical_id in self.parameters:
            return self.parameters[logical_id]
        if logical_id in self.overrides:
            return self.overrides[logical_id]
        kind = self.resources[logical_id]["Type"]
        name = self.name(logical_id)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        if kind == "AWS::StepFunctions::StateMachine":
            return f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}"
        return name

    def getatt(self, logical_id: str, attr: str) -> Any:
        key = f"{logical_id}.{attr}"
        if key in self.overrides:
            return self.overrides[key]
        kind = self.resources[logical_id]["Type"]
        name = self.name(logical_id)
        arns = {
            "AWS::DynamoDB::Table": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}",
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::SQS::Queue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}",
            "AWS::StepFunctions::StateMachine": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:{name}",
            "AWS::Lambda::Function": f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}",
            "AWS::IAM::Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
            "AWS::Scheduler::ScheduleGroup": f"arn:aws:scheduler:{REGION}:{ACCOUNT}:schedule-group/{name}",
            "AWS::KMS::Key": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{name}",
        }
        if attr == "Arn" and kind in arns:
            return arns[kind]
        if kind == "AWS::SQS::Queue" and attr == "QueueName":
            return name
        if kind == "AWS::DynamoDB::Table" and attr == "StreamArn":
            return f"{arns[kind]}/stream/1970-01-01T00:00:00.000"
        if kind == "AWS::StepFunctions::StateMachine" and attr == "Name":
            return name
        if kind == "AWS::OpenSearchServerless::Collection":
            cid = self.overrides.get(logical_id, name)
            return {
                "Arn": f"arn:aws:aoss:{REGION}:{ACCOUNT}:collection/{cid}",
                "CollectionEndpoint": f"https://{cid}.{REGION}.aoss.amazonaws.com",
                "Id": cid,
            }[attr]
        if kind == "AWS::NeptuneGraph::Graph":
            gid = self.overrides.get(logical_id, name)
            return {"GraphArn": f"arn:aws:neptune-graph:{REGION}:{ACCOUNT}:graph/{gid}", "GraphId": gid}[attr]
        raise KeyError(f"no value for {key} ({kind}): add it to the deployment's overrides")

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = [self.resolve(v) for v in value]
            return [v for v in items if v is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return _NO_VALUE if arg == "AWS::NoValue" else self.ref(arg)
            if fn == "Fn::GetAtt":
                logical_id, attr = arg.split(".", 1) if isinstance(arg, str) else arg
                return self.getatt(logical_id, attr)
            if fn == "Fn::Sub":
                text, local = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))
                return re.sub(r"\$\{([^}!]+)\}", lambda m: str(self._sub_var(m.group(1), local)), text)
            if fn == "Fn::Join":
                sep, parts = arg
                return sep.join(str(p) for p in self.resolve(parts))
            if fn == "Fn::If":
                cond, then, otherwise = arg
                return self.resolve(then if self.condition(cond) else otherwise)
            if fn == "Fn::Equals":
                a, b = self.resolve(arg)
                return a == b
            if fn == "Fn::Not":
                return not self.resolve(arg[0])
            if fn == "Fn::And":
                return all(self.resolve(arg))
            if fn == "Fn::Or":
                return any(self.resolve(arg))
            if fn == "Fn::Select":
                index, items = self.resolve(arg)
                return items[int(index)]
            if fn == "Fn::Split":
                sep, text = self.resolve(arg)
                return text.split(sep)
            if fn == "Condition":
                return self.condition(arg)
        out = {k: self.resolve(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not _NO_VALUE}

    def _sub_var(self, name: str, local: dict[str, Any]) -> Any:
        if name in local:
            return local[name]
        if "." in name:
            logical_id, attr = name.split(".", 1)
            return self.getatt(logical_id, attr)
        return self.ref(name)

    # ---- functions and their roles ----------------------------------------------------------------
    def functions(self) -> dict[str, str]:
        """Code folder (functions/<name>) -> logical id, for every Lambda function of the stack."""
        out: dict[str, str] = {}
        for logical_id, res in self.resources.items():
            if res["Type"] == "AWS::Lambda::Function":
                code = res["Properties"].get("Code", {})
                key = code.get("S3Key", "") if isinstance(code, dict) else ""
                out[Path(key).name or logical_id] = logical_id
        return out

    def environment(self, logical_id: str) -> dict[str, str]:
        env = self.resources[logical_id]["Properties"].get("Environment", {}).get("Variables", {})
        return {k: str(v) for k, v in self.resolve(env).items()}

    def role(self, function_logical_id: str) -> Role:
        role_ref = self.resources[function_logical_id]["Properties"]["Role"]
        role_id = role_ref["Fn::GetAtt"][0]
        props = self.resources[role_id]["Properties"]
        statements: list[Statement] = []
        for policy in self.resolve(props.get("Policies", [])):
            doc = policy["PolicyDocument"]
            own = re.fullmatch(rf"{role_id}Policy\d+", policy["PolicyName"]) is not None
            statements += [Statement.of(s, policy["PolicyName"], own) for s in _as_list(doc["Statement"])]
        for arn in self.resolve(props.get("ManagedPolicyArns", [])):
            statements += [Statement.of(s, arn, False) for s in MANAGED_POLICIES[arn]]
        return Role(function_logical_id, self.getatt(role_id, "Arn"), statements)

    def data_access_policies(self) -> list[DataAccessPolicy]:
        out: list[DataAccessPolicy] = []
        for res in self.resources.values():
            if res["Type"] == "AWS::OpenSearchServerless::AccessPolicy" and res["Properties"]["Type"] == "data":
                for doc in json.loads(self.resolve(res["Properties"]["Policy"])):
                    out.append(DataAccessPolicy(doc["Principal"], doc["Rules"]))
        return out


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Statement:
    effect: str
    actions: tuple[str, ...]
    resources: tuple[str, ...]
    source: str  # the policy's name (or managed policy ARN)
    own: bool  # written in the function's Policies (not attached by SAM for logs, traces or an event source)

    @classmethod
    def of(cls, stmt: dict[str, Any], source: str, own: bool) -> Statement:
        if "NotAction" in stmt or "NotResource" in stmt or "Condition" in stmt:
            raise AssertionError(f"{source}: NotAction/NotResource/Condition are not evaluated here: {stmt}")
        return cls(stmt["Effect"], tuple(_as_list(stmt["Action"])), tuple(_as_list(stmt["Resource"])), source, own)

    def matches(self, action: str, resource: str) -> bool:
        return any(action_matches(a, action) for a in self.actions) and any(
            resource_matches(r, resource) for r in self.resources
        )


@dataclass
class Role:
    function: str
    arn: str
    statements: list[Statement]

    def allows(self, action: str, resource: str) -> bool:
        if any(s.effect == "Deny" and s.matches(action, resource) for s in self.statements):
            return False
        return any(s.effect == "Allow" and s.matches(action, resource) for s in self.statements)

    def writes(self) -> list[tuple[str, tuple[str, ...], str]]:
        """(action pattern, resource patterns, policy) for every write its own policies allow."""
        return [
            (a, s.resources, s.source)
            for s in self.statements
            if s.own and s.effect == "Allow"
            for a in s.actions
            if is_write(a)
        ]


@dataclass
class DataAccessPolicy:
    """One OpenSearch Serverless data access policy document: rules granted to its principals."""

    principals: list[str]
    rules: list[dict[str, Any]]

    def grants(self, principal: str) -> list[tuple[str, str]]:
        """(permission pattern, resource pattern) pairs this document gives `principal`."""
        if principal not in self.principals:
            return []
        return [(p, r) for rule in self.rules for p in rule["Permission"] for r in rule["Resource"]]


def aoss_allows(policies: list[DataAccessPolicy], principal: str, permission: str, resource: str) -> bool:
    return any(
        action_matches(p, permission) and resource_matches(r, resource)
        for policy in policies
        for p, r in policy.grants(principal)
    )


def deployment(parameters: dict[str, Any] | None = None, overrides: dict[str, Any] | None = None) -> Deployment:
    return Deployment(copy.deepcopy(translated()), dict(parameters or {}), dict(overrides or {}))
