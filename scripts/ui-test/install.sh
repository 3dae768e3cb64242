#!/usr/bin/env bash
# Installs playwright-core (the browser driver only: it downloads no browser) from the npm
# registry into .cache/ui-test on first use, for the web run view's tests in headless Debian
# Chromium (internal/web/ui_test.go). Prints the directory holding node_modules.
# Without npm it says SKIP loudly and exits 3, so the Go test skips with the reason.
set -euo pipefail
cd "$(dirname "$0")/../.."
PLAYWRIGHT_VERSION=1.57.0
cache=$PWD/.cache/ui-test
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node and npm are not installed (apt-get install npm), so the UI tests cannot drive Chromium" >&2
  exit 3
fi
if ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$cache/node_modules/playwright-core/package.json" 2>/dev/null; then
  echo "ui-test: installing playwright-core@$PLAYWRIGHT_VERSION into $cache" >&2
  mkdir -p "$cache"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$cache" --no-audit --no-fund --silent "playwright-core@$PLAYWRIGHT_VERSION" >&2
fi
echo "$cache"
