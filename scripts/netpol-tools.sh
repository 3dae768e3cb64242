#!/usr/bin/env bash
# Builds the NetworkPolicy engine of internal/k8stest's real node into
# .cache/netpol/bin/kube-network-policies: kubernetes-sigs/kube-network-policies v0.8.0 (pinned
# in scripts/netpol-tools/go.mod) behind a small main that takes a kubeconfig (upstream's reads
# only a DaemonSet pod's in-cluster configuration). A module of its own, copied to
# .cache/netpol/src, so agora's go.mod never requires it. The real node runs it whenever it is
# built, and the bridge CNI's pods then have their NetworkPolicies enforced (#31); the tests
# that need it skip, saying so, without it.
#
# The engine's module is copied under .cache/netpol/src and patched there (the copied go.mod's
# replace points at it), with scripts/netpol-tools/kube-network-policies.patch, which must
# apply exactly or the build stops:
#   - its nftables rules send packets to the nfqueue with nft's `queue` expression, which needs
#     CONFIG_NFT_QUEUE; the kernel of this machine kind (6.18, built-in netfilter, no loadable
#     modules) lacks it: every rule set failed "no such file or directory" and the engine
#     enforced nothing. The patch sends the same packets to the same queue through xtables'
#     NFQUEUE target run by nft_compat (CONFIG_NFT_COMPAT, CONFIG_NETFILTER_XT_TARGET_NFQUEUE),
#     as iptables-nft does; still fail closed (no bypass).
#   - upstream's INPUT-hook rules from v1.1.0 ("implement egress policies from Pod to Node"),
#     which the module proxy does not serve: without them a pod's connection to its own node
#     (the node IP, the bridge's address) was never evaluated.
#   - with NRI disabled (Debian's containerd 1.6 speaks no NRI of its version) the engine has
#     no NRI plugin, and the first packet to an address no pod has (the node's) dereferenced
#     it: the engine died (its table stayed, so every policed pod lost the network).
#
# A stamp (the module, the patch, main.go, the flags, the Go version) makes a second run with
# nothing changed build nothing. Cold: about a minute of CPU after k8s-tools (go.mod says why;
# 6m42s with the engine's own k8s.io v0.32.3).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/toolflags.sh   # TOOL_GCFLAGS
root=$PWD
mod=$root/scripts/netpol-tools
src=$root/.cache/netpol/src
bin=$root/.cache/netpol/bin
command -v go >/dev/null || { echo "netpol-tools: go not found in PATH" >&2; exit 2; }
[ "$(go env GOOS)" = linux ] || { echo "netpol-tools: the engine runs on Linux only" >&2; exit 2; }
if ! command -v patch >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    printf '== installing patch (apt-get, as root)\n'
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends patch
  else
    echo "netpol-tools: patch not found; run: sudo apt-get install -y patch" >&2
    exit 2
  fi
fi
mkdir -p "$src" "$bin"
for f in go.mod go.sum main.go; do
  cmp -s "$mod/$f" "$src/$f" || cp "$mod/$f" "$src/$f"
done
# The copied go.mod may carry the replace from an earlier run; the version is the template's.
version=$(cd "$mod" && go list -m -f '{{.Version}}' sigs.k8s.io/kube-network-policies)
ldflags="-s -w"
stamp=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/main.go" "$mod/kube-network-policies.patch" \
  <(echo "$ldflags") <(go env GOVERSION GOOS GOARCH) | sha256sum | cut -d' ' -f1)
out=$bin/kube-network-policies
if [ -x "$out" ] && [ "$(cat "$bin/.stamp-kube-network-policies" 2>/dev/null)" = "$stamp" ]; then
  printf '   %-24s up to date\n' kube-network-policies
  exit 0
fi
start=$(date +%s)
rm -f "$bin/.stamp-kube-network-policies"

knp=$src/kube-network-policies
patch_sum=$(sha256sum "$mod/kube-network-policies.patch" | cut -d' ' -f1)
if [ "$(cat "$knp/.agora-patch" 2>/dev/null)" != "$version $patch_sum" ]; then
  rm -rf "$knp" "$knp.tmp"
  dir=$(cd "$mod" && go mod download -json sigs.k8s.io/kube-network-policies@"$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { echo "netpol-tools: no module directory for kube-network-policies@$version" >&2; exit 1; }
  cp -r "$dir" "$knp.tmp"
  chmod -R u+w "$knp.tmp"
  (cd "$knp.tmp" && patch -p1 --forward --no-backup-if-mismatch -s <"$mod/kube-network-policies.patch") || {
    echo "netpol-tools: $mod/kube-network-policies.patch no longer applies to kube-network-policies@$version" >&2
    exit 1
  }
  echo "$version $patch_sum" >"$knp.tmp/.agora-patch"
  mv "$knp.tmp" "$knp"
fi
(cd "$src" && go mod edit -replace "sigs.k8s.io/kube-network-policies=./kube-network-policies")

printf '== building kube-network-policies %s (patched)\n' "$version"
(cd "$src" && CGO_ENABLED=0 go build -trimpath "${TOOL_GCFLAGS[@]}" -ldflags "$ldflags" -o "$out.tmp" .)
mv -f "$out.tmp" "$out"
echo "$stamp" >"$bin/.stamp-kube-network-policies"
printf '   %-24s built in %ds\n' kube-network-policies "$(($(date +%s) - start))"
