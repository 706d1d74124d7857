#!/usr/bin/env bash
# Installs the Debian packages the service and its tests need (OCR engine, office converter, ...).
# Idempotent: does nothing when every package is already installed.
set -euo pipefail
# tesseract: OCR for image uploads and scanned PDF pages (ctxstore.parsing.image_ocr).
# chromium + chromium-driver: the web console's browser tests (Playwright drives the system browser).
# fonts-dejavu-core: text in those tests' screenshots.
PKGS=(sqlite3 tesseract-ocr tesseract-ocr-eng chromium chromium-driver fonts-dejavu-core)
# nodejs + npm: the console's pinned front-end libraries (scripts/build-console-assets.sh), unless npm is there.
command -v npm >/dev/null 2>&1 || PKGS+=(nodejs npm)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
