#!/usr/bin/env bash
# Installs the web console's pinned front-end libraries (package-lock.json) and copies the files it
# serves into the package (layers/core/ctxstore/console/static/vendor/, not in git), with their licences.
# Idempotent: npm ci runs only when package-lock.json changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=node_modules/.ctxstore-lock.sha256
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "$want" > "$stamp"
fi
vendor=layers/core/ctxstore/console/static/vendor
mkdir -p "$vendor"
copy() { cmp -s "$1" "$2" || cp "$1" "$2"; }
copy node_modules/htmx.org/dist/htmx.min.js "$vendor/htmx.min.js"
copy node_modules/htmx.org/LICENSE "$vendor/htmx.LICENSE"
copy node_modules/cytoscape/dist/cytoscape.min.js "$vendor/cytoscape.min.js"
copy node_modules/cytoscape/LICENSE "$vendor/cytoscape.LICENSE"
node -e 'for (const p of ["htmx.org", "cytoscape"]) { const m = require("./node_modules/" + p + "/package.json"); console.log(p + " " + m.version + " " + m.license); }' > "$vendor/VERSIONS.tmp"
copy "$vendor/VERSIONS.tmp" "$vendor/VERSIONS" && rm -f "$vendor/VERSIONS.tmp"
