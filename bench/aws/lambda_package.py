"""What Lambda gets for each function of template.yaml: `sam build`'s output, read the way Lambda counts it.

Shared by tests/aws/test_package_sizes.py (sizes, imports) and bench/aws/lambda_imports.py (import times).

- `sam_build()` runs `sam build --cached --parallel` into .aws-sam/package-check (the layers come from
  scripts/lambda_layers.py's cache, so a repeat takes seconds).
- `packages(build_dir)` gives per function its code folder and the layers it lists, from the built template.
- Sizes are the unzipped bytes of every regular file (code folder + each listed layer), as Lambda counts them
  against 262,144,000 bytes.
- The functions run on arm64, so their layers' compiled extensions cannot load on another machine: `host_layer`
  builds the same layer (same requirements, trims and bytecode, scripts/lambda_layers.py) for this machine's
  platform, to import handlers here. The code folders and CoreLayer are pure Python and taken from the build.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from tests.support.cfn_template import load_template

ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = ROOT / ".aws-sam" / "package-check"
LAMBDA_LIMIT_BYTES = 262_144_000  # Lambda: a function's code plus all its layers, unzipped
BUDGET_BYTES = 200 * 1024 * 1024  # ours (issue 24): 200 MiB = 209,715,200 bytes, headroom under the limit

SAM_ENV = {
    "SAM_CLI_TELEMETRY": "0",
    "SAM_CLI_DISABLE_UPDATE_CHECK": "1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}

# What Lambda's runtime puts in the environment, and stand-ins for values only a deployed stack knows.
FAKE_AWS_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
    "LANG": "en_US.UTF-8",
}


def _lambda_layers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("lambda_layers", ROOT / "scripts" / "lambda_layers.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lambda_layers = _lambda_layers()


@dataclass
class FunctionPackage:
    logical_id: str
    name: str  # functions/<name>
    code: Path  # the built code folder
    layers: list[str]  # layer logical ids, in the template's order
    env: dict[str, str] = field(default_factory=dict)


def sam_executable() -> str:
    exe = Path(sys.executable).parent / "sam"
    found = str(exe) if exe.is_file() else shutil.which("sam")
    if not found:
        raise RuntimeError("`sam` (aws-sam-cli, a dev dependency) not found: run `uv sync --frozen --all-extras`")
    return found


def python312() -> str:
    """A Python 3.12 interpreter (Lambda's runtime version); RuntimeError saying how to get one otherwise."""
    try:
        exe: str = lambda_layers.find_python312()
    except SystemExit as exc:
        raise RuntimeError(str(exc)) from None
    return exe


def sam_build(build_dir: Path = BUILD_DIR) -> Path:
    """`sam build` of template.yaml into build_dir; raises with sam's output when it fails."""
    python312()  # fail early, and clearly, without a Python 3.12
    proc = subprocess.run(
        [sam_executable(), "build", "--cached", "--parallel", "--build-dir", str(build_dir)],
        cwd=ROOT,
        env={**os.environ, **SAM_ENV},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"sam build failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return build_dir


_NO_VALUE = object()


def _env_value(value: Any, key: str, params: dict[str, Any]) -> Any:
    """A variable's value with the template's default parameters; stand-ins for what only a stack knows."""
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, dict) and "Ref" in value:
        if value["Ref"] == "AWS::NoValue":
            return _NO_VALUE
        if value["Ref"] in params:
            return str(params[value["Ref"]].get("Default", ""))
    if isinstance(value, dict) and "Fn::If" in value:  # conditions on optional parameters: false by default
        return _env_value(value["Fn::If"][2], key, params)
    if key.endswith("_URL"):
        return "https://sqs.us-east-1.amazonaws.com/123456789012/stand-in"
    if key.endswith("_ENDPOINT"):
        return "https://stand-in.us-east-1.aoss.amazonaws.com"
    if key.endswith("_ARN"):
        return "arn:aws:states:us-east-1:123456789012:stateMachine:stand-in"
    return f"stand-in-{key.lower().replace('_', '-')}"


def packages(build_dir: Path = BUILD_DIR) -> dict[str, FunctionPackage]:
    built: dict[str, Any] = yaml.safe_load((build_dir / "template.yaml").read_text())
    params = built.get("Parameters", {})
    glob_fn = built.get("Globals", {}).get("Function", {})
    glob_env = glob_fn.get("Environment", {}).get("Variables", {})
    glob_layers = [layer["Ref"] for layer in glob_fn.get("Layers", [])]
    source: dict[str, Any] = load_template(ROOT / "template.yaml")
    out: dict[str, FunctionPackage] = {}
    for logical_id, res in built["Resources"].items():
        if res["Type"] != "AWS::Serverless::Function":
            continue
        props = res["Properties"]
        env = {**glob_env, **props.get("Environment", {}).get("Variables", {})}
        name = Path(source["Resources"][logical_id]["Properties"]["CodeUri"]).name
        out[name] = FunctionPackage(
            logical_id=logical_id,
            name=name,
            code=build_dir / props["CodeUri"],
            layers=glob_layers + [layer["Ref"] for layer in props.get("Layers", [])],
            env={k: v for k, v in ((k, _env_value(v, k, params)) for k, v in env.items()) if v is not _NO_VALUE},
        )
    return out


def tree_bytes(path: Path) -> int:
    """Unzipped bytes of every regular file under path (what Lambda counts; symlinks are not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def layer_bytes(build_dir: Path = BUILD_DIR) -> dict[str, int]:
    return {p.name: tree_bytes(p) for p in build_dir.iterdir() if p.is_dir() and p.name.endswith("Layer")}


def function_bytes(pkg: FunctionPackage, layers: dict[str, int]) -> int:
    return tree_bytes(pkg.code) + sum(layers[layer] for layer in pkg.layers)


# ------------------------------------------------------------------------------------- importing here ------
def host_platform() -> str:
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{arch}-manylinux_2_34"


def host_layer(logical_id: str, build_dir: Path = BUILD_DIR) -> Path:
    """The python/ folder of a layer this machine can import: CoreLayer from the build (pure Python, the
    3.12 bytecode it ships), a third-party layer built by the same rules for this machine's platform."""
    layer = logical_id.removesuffix("Layer").lower()
    if layer == "core" or host_platform() == lambda_layers.DEFAULT_PLATFORM:
        return build_dir / logical_id / "python"
    path: Path = lambda_layers.build_third_party(layer, host_platform())
    return path


def lambda_sys_path(pkg: FunctionPackage, build_dir: Path = BUILD_DIR) -> list[str]:
    """sys.path as Lambda's runtime gives it: the function's folder, then /opt/python (the layers merged)."""
    return [str(pkg.code), *(str(host_layer(layer, build_dir)) for layer in pkg.layers)]


def lambda_env(pkg: FunctionPackage) -> dict[str, str]:
    """Only what Lambda would set: the template's variables, the runtime's, fake credentials; nothing inherited."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **pkg.env, **FAKE_AWS_ENV}


# A fresh `python3.12 -S` process whose sys.path is only the function's folder and its layers (PYTHONPATH, cwd =
# the function's folder): imports the handler module as Lambda's runtime does and reports the time it took (wall
# and this process's CPU, which other load on the machine disturbs less) and any module that came from outside
# those folders and the standard library.
IMPORT_CHILD = r"""
import importlib, json, os, sys, sysconfig, time
t0, c0 = time.perf_counter(), time.process_time()
error = None
try:
    module = importlib.import_module(sys.argv[1])
    if not callable(getattr(module, "handler", None)):
        error = "no callable `handler`"
except BaseException as exc:  # report, do not crash: the parent shows it
    import traceback
    error = traceback.format_exc()
seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
allowed = [os.path.realpath(p) for p in os.environ["PYTHONPATH"].split(os.pathsep)]
allowed += [os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")]
outside = sorted(
    name for name, m in list(sys.modules.items())
    if getattr(m, "__file__", None) and not any(os.path.realpath(m.__file__).startswith(a + os.sep) for a in allowed)
)
report = {"seconds": seconds, "cpu_seconds": cpu_seconds, "error": error, "outside": outside}
print(json.dumps({**report, "modules": len(sys.modules)}))
"""


def import_handler(pkg: FunctionPackage, python312: str, build_dir: Path = BUILD_DIR) -> dict[str, Any]:
    """Import functions/<name>/app.py the Lambda way, once, in a fresh process; returns the child's report."""
    import json

    env = {**lambda_env(pkg), "PYTHONPATH": os.pathsep.join(lambda_sys_path(pkg, build_dir))}
    proc = subprocess.run(
        [python312, "-S", "-c", IMPORT_CHILD, "app"],
        cwd=pkg.code,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"seconds": None, "error": f"exit {proc.returncode}: {proc.stderr[-3000:]}", "outside": []}
    report: dict[str, Any] = json.loads(lines[-1])
    return report
