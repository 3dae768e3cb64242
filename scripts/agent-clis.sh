#!/usr/bin/env bash
# Installs the real agent CLIs the end-to-end tests drive, at pinned versions, into
# .cache/npm (never globally): Claude Code (@anthropic-ai/claude-code) and Codex
# (@openai/codex). Idempotent and quick when the pinned versions are already there. It reads
# and exports no secret; the tests find the CLIs in .cache/npm (or AGORA_TEST_CLAUDE /
# AGORA_TEST_CODEX) and skip, saying so, when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."

CLAUDE_CODE_VERSION=2.1.330
CODEX_VERSION=0.169.0
prefix=.cache/npm

installed() { # package version
  local f="$prefix/node_modules/$1/package.json"
  [ -f "$f" ] && grep -q "\"version\": *\"$2\"" "$f"
}

want=()
installed @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" || want+=("@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION")
installed @openai/codex "$CODEX_VERSION" || want+=("@openai/codex@$CODEX_VERSION")
[ ${#want[@]} -eq 0 ] && exit 0

if ! command -v npm >/dev/null; then
  echo "agent-clis: npm not found; the real-CLI tests will skip (install: apt-get install npm)" >&2
  exit 0
fi
mkdir -p "$prefix"
printf '== installing %s into %s\n' "${want[*]}" "$prefix"
# --ignore-scripts is not used: claude-code's postinstall picks the native binary for this
# platform. No audit or fund requests: only the registry is reachable.
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "${want[@]}"
