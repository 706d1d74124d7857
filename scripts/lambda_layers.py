"""The Lambda layers: which runtime package goes to which layer, what each layer trims, and how one is built.

Stdlib only (it runs under `sam build`'s Makefiles and the export script, with any Python 3.9+).

    python3 scripts/lambda_layers.py split EXPORT DIR  # DIR/<layer>/requirements.txt from the lock's export
    python3 scripts/lambda_layers.py build LAYER DIR   # DIR/python: the layer's packages, trimmed, compiled for 3.12

Each function in template.yaml lists only the layers its code imports (tests/aws/test_package_sizes.py checks the
sizes Lambda counts and that every handler imports with only its layers on sys.path).
Environment: LAMBDA_PLATFORM (default aarch64-manylinux_2_34, the functions' arm64), LAMBDA_PYTHON312 (a Python
3.12 interpreter for the bytecode; found with `uv python find 3.12` or the usual install places otherwise).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_VERSION = "3.12"
DEFAULT_PLATFORM = "aarch64-manylinux_2_34"  # python3.12 runs on Amazon Linux 2023 (glibc 2.34)
CACHE = ROOT / ".aws-sam" / "layer-cache"

# Third-party layers and their packages (normalised distribution names). A package two layers need sits in both
# when no function lists both of them (cryptography, lxml, protobuf: the parser and the connector SDKs).
LAYERS: dict[str, tuple[str, ...]] = {
    # Every function: settings and models, the AWS clients, Powertools, the search client and the vector maths.
    "base": (
        "annotated-types",
        "anyio",
        "aws-lambda-powertools",
        "aws-xray-sdk",
        "boto3",
        "botocore",
        "certifi",
        "charset-normalizer",
        "events",
        "h11",
        "httpcore",
        "httpx",
        "idna",
        "jmespath",
        "numpy",
        "opensearch-py",
        "packaging",
        "pydantic",
        "pydantic-core",
        "pydantic-settings",
        "python-dateutil",
        "python-dotenv",
        "requests",
        "s3transfer",
        "six",
        "standardwebhooks",
        "typing-extensions",
        "typing-inspection",
        "urllib3",
        "wrapt",
    ),
    # HTTP functions: the ASGI app, its Lambda adapter, forms, and the console's templates.
    "web": (
        "annotated-doc",
        "fastapi",
        "jinja2",
        "mangum",
        "markdown-it-py",
        "markupsafe",
        "mdurl",
        "opentelemetry-api",
        "python-multipart",
        "starlette",
    ),
    # The Parse task only: document parsers.
    "parse": (
        "cffi",
        "colorama",
        "cramjam",
        "cryptography",
        "defusedxml",
        "enum-tools",
        "et-xmlfile",
        "importlib-resources",
        "keynote-parser",
        "lxml",
        "networkx",
        "numbers-parser",
        "odfpy",
        "olefile",
        "openpyxl",
        "pillow",
        "protobuf",
        "pycel",
        "pycparser",
        "pygments",
        "pypdfium2",
        "pytesseract",
        "python-calamine",
        "python-docx",
        "python-pptx",
        "python-snappy",
        "pyxlsb",
        "pyyaml",
        "ruamel-yaml",
        "sigfig",
        "striprtf",
        "tqdm",
        "xlsxwriter",
    ),
    # Connector SDKs: the connectors' routes, the console and the sync function.
    "connectors": (
        "anysqlite",
        "cffi",
        "cryptography",
        "githubkit",
        "githubkit-schemas",
        "google-api-core",
        "google-api-python-client",
        "google-auth",
        "google-auth-httplib2",
        "googleapis-common-protos",
        "hishel",
        "html-text",
        "httplib2",
        "lxml",
        "lxml-html-clean",
        "msgpack",
        "notion-client",
        "proto-plus",
        "protobuf",
        "pyasn1",
        "pyasn1-modules",
        "pycparser",
        "pyparsing",
        "slack-sdk",
        "uritemplate",
    ),
}

# In the lock but shipped nowhere: nothing a function runs imports them (the import and parse checks in
# tests/aws/test_package_sizes.py run without them).
DROPPED: dict[str, str] = {
    "grpcio": "opensearch-py's sync client never imports grpc; google-api-core needs it for gRPC APIs (Gmail: REST)",
    "opensearch-protobufs": "only opensearch-py's gRPC transport imports it; the adapter uses RequestsHttpConnection",
    "githubkit-schemas-2026-03-10": "generated REST models; the GitHub connector calls GitHub.request, never rest.*",
    "setuptools": "a build tool; numbers-parser declares it but imports neither setuptools nor pkg_resources",
    "security": "declared by numbers-parser, imported by nothing",
    "future": "declared by keynote-parser, which imports none of future/past/libfuturize",
    "compact-json": "numbers-parser's unpack CLI only (_unpack_numbers), never Document",
    "wcwidth": "compact-json's only dependency",
}

# Files inside installed packages that no function reads (paths relative to the layer's python/ folder).
# Each entry: (glob of what to remove, what to keep among it: a path, or a/{x,y} for several).
TRIMS: dict[str, tuple[tuple[str, str], ...]] = {
    "parse": (
        # olefile's Python 2 module (not importable on 3, so it cannot be compiled either).
        ("olefile/olefile2.py", ""),
        # numbers-parser's enum_tools.documentation needs pygments' token types and Python lexer only:
        # 260 other lexers are 7 MB.
        ("pygments/lexers/*.py", "pygments/lexers/{__init__,_mapping,python}.py"),
    ),
    "base": (
        # Service models of clients nobody creates: 420 of them are 21 MB (BOTOCORE_SERVICES below).
        ("botocore/data/*/", "botocore/data/{BOTOCORE_SERVICES}"),
        # numpy's C headers, static libraries, f2py, the SIMD and multiarray test modules (numpy's own tests).
        ("numpy/_core/include", ""),
        ("numpy/_core/lib", ""),
        ("numpy/random/lib", ""),
        ("numpy/f2py", ""),
        ("numpy/_pyinstaller", ""),
        ("numpy/_core/_simd.*", ""),
        ("numpy/_core/_multiarray_tests.*", ""),
        ("numpy/**/*.pxd", ""),
    ),
    "connectors": (
        # Gmail builds its client from the static v1 document (static_discovery=True): 600 others are 111 MB.
        ("googleapiclient/discovery_cache/documents/*", "googleapiclient/discovery_cache/documents/gmail.v1.json"),
        # githubkit imports githubkit_schemas.core only; the per-version models serve rest.* and webhooks.
        ("githubkit_schemas/latest", ""),
        ("githubkit_schemas/v*", ""),
        ("githubkit_schemas/ghec_v*", ""),
    ),
}

# botocore service models the code creates clients for (make_client("...") in adapters/aws, checked by
# tests/aws/test_package_sizes.py; the handler import test catches a library's). The endpoint/partition files
# every client reads are kept (only folders are trimmed).
BOTOCORE_SERVICES: tuple[str, ...] = (
    "bedrock-agent-runtime",
    "bedrock-runtime",
    "dynamodb",
    "dynamodbstreams",
    "kms",
    "neptune-graph",
    "s3",
    "scheduler",
    "sqs",
    "stepfunctions",
    "sts",
    "xray",  # aws_xray_sdk's sampling rules client, built when Powertools' Tracer starts
)

# Everywhere: tests, typing stubs and stale bytecode.
COMMON_TRIMS = ("**/tests", "**/*.pyi", "**/__pycache__")

LAMBDA_LAYER_NAMES = {"core": "CoreLayer", **{name: f"{name.capitalize()}Layer" for name in LAYERS}}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --------------------------------------------------------------------------------------------- split ---------
def rules_digest() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def split(export: Path, out_dir: Path) -> None:
    """Write <out_dir>/<layer>/requirements.txt from the lock's export; refuse a package no layer places."""
    lines = [ln for ln in export.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    by_name = {canonical(re.split(r"[ ;=]", ln, maxsplit=1)[0]): ln for ln in lines}
    placed = {p for pkgs in LAYERS.values() for p in pkgs} | set(DROPPED)
    unplaced = sorted(set(by_name) - placed)
    stale = sorted(placed - set(by_name))
    if unplaced or stale:
        sys.exit(
            "scripts/lambda_layers.py: "
            + (
                f"packages in the lock but in no layer (add them to LAYERS or DROPPED): {unplaced}. "
                if unplaced
                else ""
            )
            + (f"LAYERS/DROPPED name packages the lock no longer has: {stale}." if stale else "")
        )
    for layer, pkgs in LAYERS.items():
        out = out_dir / layer / "requirements.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        header = (
            f"# Generated by scripts/export-lambda-deps.sh from uv.lock: the {layer} layer; do not edit by hand.\n"
            # A change of the build rules changes this file, so `sam build --cached` rebuilds the layer.
            f"# rules: scripts/lambda_layers.py sha256 {rules_digest()}\n"
        )
        out.write_text(header + "".join(by_name[p] + "\n" for p in sorted(pkgs)))
        print(f"wrote {out} ({len(pkgs)} packages)")


# --------------------------------------------------------------------------------------------- build ---------
def find_python312() -> str:
    """A real CPython 3.12 (Lambda's python3.12 runtime): bytecode is version-specific."""
    candidates: list[str] = []
    if os.environ.get("LAMBDA_PYTHON312"):
        candidates.append(os.environ["LAMBDA_PYTHON312"])
    try:
        found = subprocess.run(["uv", "python", "find", PYTHON_VERSION], capture_output=True, text=True, check=False)
        candidates += found.stdout.split()
    except OSError:
        pass
    candidates += [shutil.which("python3.12") or ""]
    for pattern in (
        "~/.pyenv/versions/3.12*/bin/python3.12",
        "~/.local/share/uv/python/cpython-3.12*/bin/python3.12",
        "/usr/local/bin/python3.12",
        "/usr/bin/python3.12",
    ):
        candidates += sorted(glob.glob(os.path.expanduser(pattern)))
    for exe in filter(None, candidates):
        probe = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == PYTHON_VERSION:
            return exe
    sys.exit(
        "scripts/lambda_layers.py: no Python 3.12 interpreter found (Lambda's python3.12 needs 3.12 bytecode). "
        "Install one (`uv python install 3.12`) or set LAMBDA_PYTHON312=/path/to/python3.12."
    )


def _uv() -> list[str]:
    exe = shutil.which("uv")
    return [exe] if exe else [sys.executable, "-m", "uv"]


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def trim(layer: str, site: Path) -> None:
    for pattern in COMMON_TRIMS:
        for hit in sorted(site.glob(pattern), reverse=True):
            _remove(hit)
    for pattern, keep in TRIMS.get(layer, ()):
        kept = _expand(keep)
        dirs_only = pattern.endswith("/")  # a trailing / removes folders only
        for hit in site.glob(pattern.rstrip("/")):
            if dirs_only and not hit.is_dir():
                continue
            if not any(hit.relative_to(site).as_posix() == k for k in kept):
                _remove(hit)


def _expand(keep: str) -> set[str]:
    """'a/{x,y}.py' -> {'a/x.py', 'a/y.py'}; '{BOTOCORE_SERVICES}' -> the service list."""
    keep = keep.replace("{BOTOCORE_SERVICES}", "{" + ",".join(BOTOCORE_SERVICES) + "}")
    m = re.search(r"\{([^}]*)\}", keep)
    if not m:
        return {keep} if keep else set()
    return {keep[: m.start()] + alt + keep[m.end() :] for alt in m.group(1).split(",")}


def compile_bytecode(site: Path, python312: str) -> None:
    # unchecked-hash: the .pyc is used as is, never compared with the source's mtime, so a zip's 2-second
    # timestamps on a read-only /opt cannot make Python ignore it and recompile on every cold start.
    subprocess.run(
        [
            python312,
            "-W",
            "ignore::SyntaxWarning",
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            str(site),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def _cache_key(layer: str, platform: str) -> str:
    h = hashlib.sha256()
    for part in (Path(__file__).read_bytes(), (ROOT / "layers" / layer / "requirements.txt").read_bytes()):
        h.update(part)
    h.update(f"{platform}|{PYTHON_VERSION}".encode())
    return h.hexdigest()[:16]


def build_third_party(layer: str, platform: str) -> Path:
    """The layer's python/ folder, built once per (requirements, this script, platform) and cached."""
    key = _cache_key(layer, platform)
    done = CACHE / f"{layer}-{platform}-{key}"
    if (done / "python").is_dir():
        return done / "python"
    python312 = find_python312()
    CACHE.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{layer}-", dir=CACHE))
    site = work / "python"
    subprocess.run(
        [
            *_uv(),
            "pip",
            "install",
            "--quiet",
            "--no-deps",  # the lock's resolution ships as is
            "--python-platform",
            platform,
            "--python-version",
            PYTHON_VERSION,
            "--target",
            str(site),
            "-r",
            str(ROOT / "layers" / layer / "requirements.txt"),
        ],
        check=True,
    )
    trim(layer, site)
    compile_bytecode(site, python312)
    for old in CACHE.glob(f"{layer}-{platform}-*"):
        if old != work:
            shutil.rmtree(old, ignore_errors=True)
    work.rename(done)
    return done / "python"


def build_core(dest: Path) -> None:
    shutil.copytree(
        ROOT / "layers" / "core" / "ctxstore", dest / "ctxstore", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    compile_bytecode(dest, find_python312())


def build(layer: str, artifacts: Path, platform: str) -> None:
    dest = artifacts / "python"
    if dest.exists():
        shutil.rmtree(dest)
    if layer == "core":
        build_core(dest)
        return
    if layer not in LAYERS:
        sys.exit(f"scripts/lambda_layers.py: unknown layer {layer!r} (known: core, {', '.join(LAYERS)})")
    shutil.copytree(build_third_party(layer, platform), dest, symlinks=True)


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "split":
        split(Path(argv[1]), Path(argv[2]))
    elif len(argv) == 3 and argv[0] == "build":
        build(argv[1], Path(argv[2]), os.environ.get("LAMBDA_PLATFORM") or DEFAULT_PLATFORM)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
