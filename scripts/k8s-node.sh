#!/usr/bin/env bash
# What the real-node tests need besides scripts/k8s-tools.sh's kubelet (internal/k8stest
# Options.RealNode; internal/dispatch's TestDispatch_RealPodSamePatchAsLocal): Debian's
# containerd (1.6, with ctr and the runc v2 shim), runc, the CNI plugins (bridge, host-local,
# loopback in /usr/lib/cni), iproute2, iptables (the Services' stand-in, services.go) and
# nftables (nft: the NetworkPolicy engine's table, netpol.go). The tests start their own
# containerd on a socket of their own under /dev/shm and import their images with ctr, so no
# system containerd needs to run and no registry is used.
#
# When a part is missing and this shell may install packages (root, or passwordless sudo,
# with apt-get), it installs them and says so; otherwise it prints the exact command and exits
# 2. The tests skip, saying which part is missing, without them; they need root to run.
set -euo pipefail

need=()
for cmd in containerd ctr containerd-shim-runc-v2; do
  command -v "$cmd" >/dev/null || { need+=(containerd); break; }
done
command -v runc >/dev/null || need+=(runc)
for plugin in bridge host-local loopback; do
  [ -x "/usr/lib/cni/$plugin" ] || { need+=(containernetworking-plugins); break; }
done
command -v ip >/dev/null || need+=(iproute2)
command -v iptables >/dev/null || need+=(iptables)
command -v nft >/dev/null || need+=(nftables)
if [ ${#need[@]} -eq 0 ]; then
  echo "agora k8s-node: containerd, runc, the CNI plugins, ip, iptables and nft are here"
  exit 0
fi

why=
if ! command -v apt-get >/dev/null; then
  why="apt-get not found"
elif [ "$(id -u)" != 0 ] && ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
  why="not root, and no passwordless sudo"
fi
if [ -n "$why" ]; then
  echo "agora k8s-node: ${need[*]} needed ($why); install with:" >&2
  echo "  sudo apt-get install -y ${need[*]}" >&2
  exit 2
fi
# A system containerd that the package may start (where systemd runs) is left alone: the tests'
# own containerd has its own socket, root and state directories.
if [ "$(id -u)" = 0 ]; then sudo=(); else sudo=(sudo -n); fi
printf '== installing %s (apt-get)\n' "${need[*]}"
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
