#!/usr/bin/env bash
# Builds versitygw, the S3-compatible server agora's object-storage tests run for real
# (internal/agoratest/s3test), into .cache/s3/bin from the pinned module scripts/s3-tools
# (copied to .cache/s3/src). A stamp (the module, the flags, the Go version) makes a second run
# with the same versions build nothing. A cold build took 70 s on this 2-core machine (#31).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/s3-tools
src=$root/.cache/s3/src
bin=$root/.cache/s3/bin
command -v go >/dev/null || { echo "s3-tools: go not found in PATH" >&2; exit 2; }
mkdir -p "$src" "$bin"
for f in go.mod go.sum; do
  cmp -s "$mod/$f" "$src/$f" || cp "$mod/$f" "$src/$f"
done
ldflags="-s -w"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" <(echo "$ldflags") <(go env GOVERSION GOOS GOARCH) |
  sha256sum | cut -d' ' -f1)
if [ -x "$bin/versitygw" ] && [ "$(cat "$bin/.stamp-versitygw" 2>/dev/null)" = "$stamp" ]; then
  printf '   %-24s up to date\n' versitygw
  exit 0
fi
printf '== building versitygw (github.com/versity/versitygw/cmd/versitygw)\n'
start=$(date +%s)
rm -f "$bin/.stamp-versitygw"
(cd "$src" && CGO_ENABLED=0 go build -trimpath "${TOOL_GCFLAGS[@]}" -ldflags "$ldflags" -o "$bin/.versitygw.tmp" \
  github.com/versity/versitygw/cmd/versitygw)
mv -f "$bin/.versitygw.tmp" "$bin/versitygw"
echo "$stamp" >"$bin/.stamp-versitygw"
printf '   %-24s built in %ds\n' versitygw "$(($(date +%s) - start))"
