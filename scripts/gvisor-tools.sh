#!/usr/bin/env bash
# Builds gVisor's runsc and its containerd shim, containerd-shim-runsc-v1, into .cache/gvisor/bin
# from the pinned module scripts/gvisor-tools (copied to .cache/gvisor/src), so agora's go.mod
# never requires gVisor. internal/k8stest's real node registers them as the containerd runtime
# handler "runsc" when both are there (#30: a kubernetes target's runtime_class naming a
# RuntimeClass with handler runsc); the gVisor tests skip, saying so, without them.
#
# The version is gVisor's "go" branch as the module proxy serves it (a pseudo-version pinned in
# scripts/gvisor-tools/go.mod; `go list -m gvisor.dev/gvisor@latest` names a newer one). A stamp
# (the module, the flags, the Go version) makes a second run with the same versions build
# nothing. A cold build takes about a minute on 2 idle cores with a warm module cache.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/gvisor-tools
src=$root/.cache/gvisor/src
bin=$root/.cache/gvisor/bin
command -v go >/dev/null || { echo "gvisor-tools: go not found in PATH" >&2; exit 2; }
[ "$(go env GOOS)" = linux ] || { echo "gvisor-tools: gVisor runs on Linux only" >&2; exit 2; }
mkdir -p "$src" "$bin"
for f in go.mod go.sum; do
  cmp -s "$mod/$f" "$src/$f" || cp "$mod/$f" "$src/$f"
done
version=$(cd "$src" && go list -m -f '{{.Version}}' gvisor.dev/gvisor)
# runsc --version says VERSION_MISSING unless told.
ldflags="-s -w -X gvisor.dev/gvisor/runsc/version.version=$version"

# One patch, in a copy of the module (go build -overlay may not replace files in the module
# cache), which the copied go.mod's replace points at: the shim sets its own oom_score_adj to
# -999, which needs CAP_SYS_RESOURCE, and root on this machine kind lacks it (the real node's
# containerd runs with restrict_oom_score_adj for the same reason), so every gVisor pod failed
# "failed to set OOM Score on shim: ... permission denied". Patched, a refused write keeps the
# score the shim inherited, as containerd's own runc shim does where it may not lower it. The
# sed must change exactly one line, or the build stops.
gv=$src/gvisor
if [ "$(cat "$gv/.agora-version" 2>/dev/null)" != "$version" ]; then
  rm -rf "$gv" "$gv.tmp"
  # go list -m names the module's directory only once it is in the module cache, which on a
  # fresh machine it is not: download it first (a no-op when it is there).
  dir=$(cd "$src" && go mod download -json gvisor.dev/gvisor@"$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "gvisor-tools: go mod download gvisor.dev/gvisor@$version gave no directory" >&2; exit 1; }
  cp -r "$dir" "$gv.tmp"
  chmod -R u+w "$gv.tmp"
  manager=$gv.tmp/pkg/shim/v1/manager.go
  oom_from='if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil {'
  oom_to='if err := sys.SetOOMScore(cmd.Process.Pid, oomScoreMax); err != nil \&\& !os.IsPermission(err) {'
  sed "s/$(printf '%s' "$oom_from" | sed 's/[][\.*^$/]/\\&/g')/$oom_to/" "$manager" >"$manager.new"
  if [ "$(diff "$manager" "$manager.new" | grep -c '^>' || true)" != 1 ]; then
    echo "gvisor-tools: the shim's oom_score_adj patch no longer applies to $manager" >&2
    exit 1
  fi
  mv "$manager.new" "$manager"
  echo "$version" >"$gv.tmp/.agora-version"
  mv "$gv.tmp" "$gv"
fi
(cd "$src" && go mod edit -replace "gvisor.dev/gvisor=./gvisor")
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$gv/pkg/shim/v1/manager.go" <(echo "$ldflags") \
  <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -d' ' -f1)

# build NAME PKG: the binary, unless its stamp says it is up to date. Static, and written to a
# temporary name and renamed, so an interrupted build never leaves a half-written binary
# behind a stale stamp.
build() {
  local name=$1 pkg=$2 start
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.stamp-$name" 2>/dev/null)" = "$stamp" ]; then
    printf '   %-24s up to date\n' "$name"
    return 0
  fi
  printf '== building %s (%s)\n' "$name" "$pkg"
  start=$(date +%s)
  rm -f "$bin/.stamp-$name"
  (cd "$src" && CGO_ENABLED=0 go build -trimpath "${TOOL_GCFLAGS[@]}" -ldflags "$ldflags" \
    -o "$bin/.$name.tmp" "$pkg")
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "$stamp" >"$bin/.stamp-$name"
  printf '   %-24s built in %ds\n' "$name" "$(($(date +%s) - start))"
}
build runsc gvisor.dev/gvisor/runsc
build containerd-shim-runsc-v1 gvisor.dev/gvisor/shim
printf '== gvisor %s in %s\n' "$version" "$bin"
