#!/usr/bin/env bash
# Builds the Kubernetes parts agora's tests run for real (internal/k8stest): kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok and, last and optional, kubelet, into
# .cache/k8s/bin. They come from Go modules (scripts/k8s-tools/go.mod, copied to
# .cache/k8s/src) because this machine has no registry to pull a kind/k3s image from, and they
# live in that separate module so agora's own go.mod never requires Kubernetes.
#
# Each binary has a stamp (a hash of the tools module, the flags and the Go version): a
# second run with the same versions builds nothing and takes seconds. etcd is Debian's
# etcd-server, installed with apt-get when missing and this shell may (root, or passwordless
# sudo); otherwise the exact command is printed.
#
# A cold build takes about 8.5 minutes on 2 idle cores, kube-apiserver alone ~6 with a 1.8 GB
# peak. kubernetes-sigs/agent-sandbox's controller and CRDs (#30, the agent-sandbox backend)
# come from a module of their own, scripts/agent-sandbox-tools, with their own stamp.
# Environment:
#   K8S_TOOLS_P=1         go build -p (default: Go's, the number of CPUs); 1 halves peak memory
#   K8S_TOOLS_KUBELET=0   skip kubelet (only the real-node tests need it)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/k8s-tools
cache=$root/.cache/k8s
src=$cache/src
bin=$cache/bin

k8s_version=v1.36.3
required=(kube-apiserver kube-controller-manager kube-scheduler kwok)
optional=()
[ "${K8S_TOOLS_KUBELET:-1}" = 0 ] || optional=(kubelet)

pkg_of() {
  case $1 in
    kwok) echo sigs.k8s.io/kwok/cmd/kwok ;;
    agent-sandbox-controller) echo sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller ;;
    *) echo "k8s.io/kubernetes/cmd/$1" ;;
  esac
}

# etcd: Debian's 3.4 serves kube-apiserver 1.36 (see the research notes); a build of etcd 3.6
# from modules needs its own wrapper module and buys nothing here.
if ! command -v etcd >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    printf '== installing etcd-server (apt-get, as root)\n'
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server
  elif command -v apt-get >/dev/null && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    printf '== installing etcd-server (sudo apt-get)\n'
    sudo -n apt-get update -qq
    sudo -n DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server
  else
    echo "k8s-tools: etcd not found and this shell cannot install it; run:" >&2
    echo "  sudo apt-get install -y etcd-server" >&2
    exit 2
  fi
fi

command -v go >/dev/null || { echo "k8s-tools: go not found in PATH" >&2; exit 2; }

# The copy under .cache is refreshed only when the template changed, so the Go build cache
# and the module cache stay warm across runs.
mkdir -p "$src" "$bin"
for f in go.mod go.sum; do
  cmp -s "$mod/$f" "$src/$f" || cp "$mod/$f" "$src/$f"
done

# The version the binaries report: without it they say v0.0.0-master and kwok or a kubelet
# may refuse to talk to an apiserver of "unknown" version.
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for kv in "gitVersion=$k8s_version" "gitMajor=$major" "gitMinor=$minor" "gitTreeState=clean"; do
  ldflags="$ldflags -X k8s.io/component-base/version.$kv"
done

# A binary is up to date when its stamp matches what went into it: the tools module, the
# flags and the Go version. Editing this script elsewhere does not force a rebuild.
stamp=$(cat "$mod/go.mod" "$mod/go.sum" <(echo "$ldflags") <(go env GOVERSION GOOS GOARCH) |
  sha256sum | cut -d' ' -f1)

p_flag=()
[ -z "${K8S_TOOLS_P:-}" ] || p_flag=(-p "$K8S_TOOLS_P")

build() {
  local name=$1 pkg start secs
  local src=${2:-$src} stamp=${3:-$stamp} ldflags=${4:-$ldflags}
  pkg=$(pkg_of "$name")
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.stamp-$name" 2>/dev/null)" = "$stamp" ]; then
    printf '   %-24s up to date\n' "$name"
    return 0
  fi
  printf '== building %-24s (%s)\n' "$name" "$pkg"
  start=$(date +%s)
  rm -f "$bin/.stamp-$name"
  # Static, so the binary runs the same on any Linux; written to a temporary name and renamed
  # so an interrupted build never leaves a half-written binary behind a stale stamp.
  (cd "$src" && CGO_ENABLED=0 go build "${p_flag[@]}" -trimpath "${TOOL_GCFLAGS[@]}" -ldflags "$ldflags" \
    -o "$bin/.$name.tmp" "$pkg") || return 1
  mv -f "$bin/.$name.tmp" "$bin/$name"
  echo "$stamp" >"$bin/.stamp-$name"
  secs=$(($(date +%s) - start))
  printf '   %-24s built in %ds\n' "$name" "$secs"
}

# kwok simulates nothing without stages. The ones internal/k8stest loads come from kwok's own
# module, so they match the binary: nodes become Ready at once and keep a lease; a Job's pod
# goes Running then Succeeded at once; a pod labelled
# pod-container-running-failed.stage.kwok.x-k8s.io=true fails instead, with the exit code in its
# pod-container-running-failed.stage.kwok.x-k8s.io/exit-code annotation (its weight, 10000,
# beats pod-complete's 0, so the choice is not random).
copy_stages() {
  local dir out=$bin/kwok-stages
  dir=$(cd "$src" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml \
    pod/chaos/pod-container-running-failed.yaml; do
    cp "$dir/kustomize/stage/$f" "$out.tmp/$(basename "$f")"
  done
  chmod 644 "$out.tmp"/*.yaml
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# agent-sandbox (#30): the controller from the pinned module, and the CRDs from the same module's
# zip (k8s/crds/*.yaml), so the tests install exactly what that controller reconciles.
as_mod=$root/scripts/agent-sandbox-tools
as_src=$cache/src-agent-sandbox
mkdir -p "$as_src"
for f in go.mod go.sum; do
  cmp -s "$as_mod/$f" "$as_src/$f" || cp "$as_mod/$f" "$as_src/$f"
done
as_ldflags="-s -w"
as_stamp=$(cat "$as_mod/go.mod" "$as_mod/go.sum" <(echo "$as_ldflags") <(go env GOVERSION GOOS GOARCH) |
  sha256sum | cut -d' ' -f1)
copy_agent_sandbox_crds() {
  local dir out=$bin/agent-sandbox-crds
  dir=$(cd "$as_src" && go list -m -f '{{.Dir}}' sigs.k8s.io/agent-sandbox)
  rm -rf "$out.tmp" && mkdir -p "$out.tmp"
  cp "$dir"/k8s/crds/*.yaml "$out.tmp/"
  chmod 644 "$out.tmp"/*.yaml
  rm -rf "$out" && mv "$out.tmp" "$out"
}

all_start=$(date +%s)
for name in "${required[@]}"; do
  build "$name" || { echo "k8s-tools: building $name failed" >&2; exit 1; }
done
copy_stages || { echo "k8s-tools: copying kwok's stages failed" >&2; exit 1; }
build agent-sandbox-controller "$as_src" "$as_stamp" "$as_ldflags" ||
  { echo "k8s-tools: building agent-sandbox-controller failed" >&2; exit 1; }
copy_agent_sandbox_crds || { echo "k8s-tools: copying agent-sandbox's CRDs failed" >&2; exit 1; }
for name in "${optional[@]}"; do
  build "$name" || echo "k8s-tools: building $name failed; the real-node tests will skip" >&2
done
printf '== k8s tools %s in %s (%ds); etcd: %s\n' "$k8s_version" "$bin" \
  "$(($(date +%s) - all_start))" "$(command -v etcd)"
