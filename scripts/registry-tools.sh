#!/usr/bin/env bash
# Builds the CNCF distribution registry (cmd/registry), the OCI registry internal/k8stest starts
# for the pull-secret and upgrade tests (#31: TLS from a CA the test makes, htpasswd auth), into
# .cache/registry/bin from the pinned module scripts/registry-tools (copied to
# .cache/registry/src), so agora's go.mod never requires it. A stamp (the module, the flags, the
# Go version) makes a second run with the same versions build nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/registry-tools
src=$root/.cache/registry/src
bin=$root/.cache/registry/bin
command -v go >/dev/null || { echo "registry-tools: go not found in PATH" >&2; exit 2; }
mkdir -p "$src/htpasswd" "$bin"
for f in go.mod go.sum htpasswd/main.go; do
  cmp -s "$mod/$f" "$src/$f" || cp "$mod/$f" "$src/$f"
done
ldflags="-s -w"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/htpasswd/main.go" <(echo "$ldflags") \
  <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -d' ' -f1)

# build NAME PKG: the binary, unless its stamp says it is up to date. Written to a temporary
# name and renamed, so an interrupted build never leaves a half-written binary behind a stale
# stamp.
build() {
  local name=$1 pkg=$2 start
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.stamp-$name" 2>/dev/null)" = "$stamp" ]; then
    printf '   %-24s up to date\n' "$name"
    return 0
  fi
  printf '== building %s (%s)\n' "$name" "$pkg"
  start=$(date +%s)
  rm -f "$bin/.stamp-$name"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath "${TOOL_GCFLAGS[@]}" -ldflags "$ldflags" -o "$bin/.$name.tmp" "$pkg")
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "$stamp" >"$bin/.stamp-$name"
  printf '   %-24s built in %ds\n' "$name" "$(($(date +%s) - start))"
}
build registry github.com/distribution/distribution/v3/cmd/registry
# The htpasswd line maker (bcrypt from stdin): internal/k8stest links the standard library only.
build registry-htpasswd ./htpasswd
