#!/usr/bin/env bash
# The main job on the embedded defaults: a throw-away AGORA_HOME (SQLite, local blob store),
# the example catalog registered from its manifest, then listed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${AGORA_BIN:-./bin/agora}
export AGORA_HOME=${AGORA_HOME:-$(mktemp -d -t agora-demo.XXXXXX)}
export DEMO_API_TOKEN=${DEMO_API_TOKEN:-demo-token-$RANDOM$RANDOM}

step() { printf '\n== %s\n' "$*"; }

step "AGORA_HOME=$AGORA_HOME"
"$bin" init

step "agora apply -f examples/catalog/agora-manifest.yaml (plan, then one transaction)"
"$bin" apply -f examples/catalog/agora-manifest.yaml

step "a second apply has nothing to do"
"$bin" apply -f examples/catalog/agora-manifest.yaml

step "the catalog"
"$bin" capability list
"$bin" subagent list
"$bin" env list
"$bin" subagent show hello
"$bin" env show demo
