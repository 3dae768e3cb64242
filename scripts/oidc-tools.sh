#!/usr/bin/env bash
# Builds the OpenID Connect provider agora's OIDC tests sign in against (#31) into
# .cache/oidc/bin/agora-oidc-op, from its own module (scripts/oidc-tools: zitadel/oidc's
# certified op package behind a small main). A stamp (the module's files and the Go version)
# makes a second run with nothing changed build nothing and take well under a second.
# Cold: about 60 s wall (31 s of CPU) on 2 cores (measured 2026-11-24, see docs/BENCHMARKS.md "#31 OIDC").
# The tests that need it skip, saying so, without it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/oidc-tools
bin=$root/.cache/oidc/bin
out=$bin/agora-oidc-op
command -v go >/dev/null || { echo "oidc-tools: go not found in PATH" >&2; exit 2; }
mkdir -p "$bin"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$mod"/*.go <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -d' ' -f1)
if [ -x "$out" ] && [ "$(cat "$bin/.stamp-agora-oidc-op" 2>/dev/null)" = "$stamp" ]; then
  printf '   %-24s up to date\n' agora-oidc-op
  exit 0
fi
start=$(date +%s)
rm -f "$bin/.stamp-agora-oidc-op"
(cd "$mod" && CGO_ENABLED=0 go build -trimpath "${TOOL_GCFLAGS[@]}" -ldflags '-s -w' -o "$out.tmp" .)
mv -f "$out.tmp" "$out"
echo "$stamp" >"$bin/.stamp-agora-oidc-op"
printf '   %-24s built in %ds\n' agora-oidc-op "$(($(date +%s) - start))"
