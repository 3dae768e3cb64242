#!/usr/bin/env bash
# Builds Helm (v4, the CLI) into .cache/helm/bin from the pinned module scripts/helm-tools
# (copied to .cache/helm/src): the chart deploy/helm/agora is linted, rendered into
# deploy/kubernetes (make helm-render) and installed, upgraded and uninstalled on
# internal/k8stest's control plane by it. A stamp (the module, the flags, the Go version) makes
# a second run with the same versions build nothing. A cold build took 421 s (3m11s of CPU) at
# load 9-15 on this shared 2-core machine (#31); a warm one builds nothing, in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/helm-tools
src=$root/.cache/helm/src
bin=$root/.cache/helm/bin
command -v go >/dev/null || { echo "helm-tools: go not found in PATH" >&2; exit 2; }
mkdir -p "$src" "$bin"
for f in go.mod go.sum; do
  cmp -s "$mod/$f" "$src/$f" || cp "$mod/$f" "$src/$f"
done
# The version `helm version` reports is the module's, as Helm's own Makefile stamps it: a
# helm of "unknown" version may refuse a chart's kubeVersion constraint.
version=$(cd "$src" && go list -m -f '{{.Version}}' helm.sh/helm/v4)
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" <(echo "$ldflags") <(go env GOVERSION GOOS GOARCH) |
  sha256sum | cut -d' ' -f1)
if [ -x "$bin/helm" ] && [ "$(cat "$bin/.stamp-helm" 2>/dev/null)" = "$stamp" ]; then
  printf '   %-24s up to date\n' helm
  exit 0
fi
printf '== building helm %s (helm.sh/helm/v4/cmd/helm)\n' "$version"
start=$(date +%s)
rm -f "$bin/.stamp-helm"
# Written to a temporary name and renamed: an interrupted build never leaves a half-written
# binary behind a stale stamp.
(cd "$src" && CGO_ENABLED=0 go build -trimpath "${TOOL_GCFLAGS[@]}" -ldflags "$ldflags" -o "$bin/.helm.tmp" \
  helm.sh/helm/v4/cmd/helm)
mv -f "$bin/.helm.tmp" "$bin/helm"
echo "$stamp" >"$bin/.stamp-helm"
printf '   %-24s built in %ds\n' helm "$(($(date +%s) - start))"
