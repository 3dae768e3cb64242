#!/usr/bin/env bash
# Builds agora's container images with podman, without a registry (make image):
#
#   localhost/agora-worker:<version>   FROM scratch, the static worker program
#                                      (cmd/agora-worker) at /agora/bin/agora-worker (its
#                                      entrypoint); saved to
#                                      .cache/images/agora-worker.tar for Kubernetes nodes
#                                      (scripts/node-import.sh on the node, which prints
#                                      the reference to pin there: containerd's digest, not
#                                      the podman digest printed here).
#   localhost/agora:<version>          (only when named: scripts/images.sh agora) FROM scratch,
#                                      the static agora with agora-worker beside it in
#                                      /agora/bin, over the toolchain's busybox and git:
#                                      `agora orch serve` in a cluster, with repositories.
#   localhost/agora-toolchain:<hash>   FROM scratch, busybox-static and git copied from this
#                                      host, with the tools agora selftest's attacks use (curl,
#                                      perl, python3, make, ...: add_attack_tools): what the
#                                      container tests run the worker in.
#
# Each image is rebuilt only when its inputs change (a label on the image records their
# hash). The last lines printed are the digest references to put in agora.yaml:
#   AGORA_WORKER_IMAGE=localhost/agora-worker:<version>@sha256:<64 hex>
#   AGORA_TOOLCHAIN_IMAGE=localhost/agora-toolchain:<hash>@sha256:<64 hex>
# Usage: scripts/images.sh [worker|toolchain|agora]...   (worker and toolchain when none is named)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache/images"
mkdir -p "$cache"
command -v podman >/dev/null || { echo "agora images: podman is missing: run scripts/podman.sh" >&2; exit 2; }

# current IMAGE: the inputs hash the image was built from, empty when absent.
current() {
  podman image inspect --format '{{index .Labels "agora.inputs"}}' "$1" 2>/dev/null || true
}

# digestref IMAGE: IMAGE@sha256:<manifest digest>, the form agora.yaml's image: wants.
digestref() {
  local d
  d=$(podman image inspect --format '{{.Digest}}' "$1")
  echo "$1@$d"
}

build_worker() {
  local ctx version inputs tag
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  ( cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/agora-worker" ./cmd/agora-worker )
  "$root/scripts/refuse-weakened.sh" "$ctx/agora-worker"
  version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
  cp "$root/images/agora-worker.Containerfile" "$ctx/Containerfile"
  inputs=$(cat "$ctx/agora-worker" "$ctx/Containerfile" | sha256sum | cut -c1-64)
  tag="localhost/agora-worker:$version"
  if [ "$(current "$tag")" != "$inputs" ]; then
    echo "agora images: building $tag" >&2
    podman build -q --label "agora.inputs=$inputs" -t "$tag" "$ctx" >/dev/null
    rm -f "$cache/agora-worker.tar"
  fi
  if [ ! -s "$cache/agora-worker.tar" ]; then
    podman save -q --format docker-archive -o "$cache/agora-worker.tar.tmp" "$tag"
    mv "$cache/agora-worker.tar.tmp" "$cache/agora-worker.tar"
  fi
  echo "AGORA_WORKER_IMAGE=$(digestref "$tag")"
}

build_agora() {
  local ctx version inputs tag
  need_rootfs_tools
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  ( cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/" ./cmd/agora ./cmd/agora-full ./cmd/agora-worker )
  "$root/scripts/refuse-weakened.sh" "$ctx/agora" "$ctx/agora-full" "$ctx/agora-worker"
  version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
  cp "$root/images/agora.Containerfile" "$ctx/Containerfile"
  inputs=$( { cat "$ctx/agora" "$ctx/agora-full" "$ctx/agora-worker" "$ctx/Containerfile" "$0"; rootfs_inputs; } | sha256sum | cut -c1-64)
  tag="localhost/agora:$version"
  if [ "$(current "$tag")" != "$inputs" ]; then
    echo "agora images: building $tag" >&2
    make_rootfs "$ctx/rootfs"
    # agora's user: the manifests run it as 10001 (docs/providers-k8s.md); HOME is its volume.
    printf 'agora:x:10001:10001:agora:/var/lib/agora:/bin/sh\n' >>"$ctx/rootfs/etc/passwd"
    printf 'agora:x:10001:\n' >>"$ctx/rootfs/etc/group"
    podman build -q --label "agora.inputs=$inputs" -t "$tag" "$ctx" >/dev/null
  fi
  echo "AGORA_IMAGE=$(digestref "$tag")"
}

# copy_at FILE DEST_ROOT [cp flags]: FILE at its host path below DEST_ROOT. The rootfs has
# Debian's merged /usr (bin, lib, lib64 link into usr), so parents are made through links.
copy_at() {
  mkdir -p "$2$(dirname "$1")"
  cp "${3:--a}" "$1" "$2$1"
}

# copy_elf FILE DEST_ROOT: FILE and every shared library ldd names, at their host paths.
copy_elf() {
  local f=$1 dst=$2 lib
  copy_at "$f" "$dst"
  for lib in $(ldd "$f" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [ -e "$dst$lib" ] || copy_at "$lib" "$dst" -L
  done
}

# install_missing: busybox-static, git and the attack tools' packages, when missing and this
# shell may install packages (root, or passwordless sudo, with apt-get), as
# scripts/k8s-node.sh does; else say how.
install_missing() {
  local need=() sudo=()
  [ -x /bin/busybox ] || need+=(busybox-static)
  [ -x /usr/bin/git ] || need+=(git)
  # The toolchain image's attack tools that are not part of every Debian (add_attack_tools).
  [ -x /usr/bin/curl ] || need+=(curl)
  [ -x /usr/bin/python3.11 ] || need+=(python3.11-minimal)
  [ -x /usr/bin/make ] || need+=(make)
  [ -x /usr/sbin/setcap ] || need+=(libcap2-bin)
  [ -x /usr/sbin/nft ] || need+=(nftables)
  [ ${#need[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null ||
    { [ "$(id -u)" != 0 ] && ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; }; then
    echo "agora images: ${need[*]} missing: apt-get install ${need[*]}" >&2
    exit 2
  fi
  [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  echo "agora images: installing ${need[*]} (apt-get)" >&2
  "${sudo[@]}" apt-get update -qq >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
}

# make_rootfs ROOTFS: busybox's applets and git (its helpers, shared libraries and the CA
# certificates) copied from this host into ROOTFS, with Debian's merged /usr. The toolchain
# image is this rootfs; the agora image is this rootfs with agora's programs, so that
# `--repo` and workspace dispatches (git) and the manifests' init step (sh) work in it.
make_rootfs() {
  local rootfs=$1 applet f
  mkdir -p "$rootfs"/{usr/bin,usr/lib,usr/lib64,usr/local/bin,etc,tmp,dev/shm,agora}
  ln -s usr/bin "$rootfs/bin"
  ln -s usr/lib "$rootfs/lib"
  ln -s usr/lib64 "$rootfs/lib64"
  chmod 1777 "$rootfs/tmp"
  cp /bin/busybox "$rootfs/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ -e "$rootfs/bin/$applet" ] || ln -s busybox "$rootfs/bin/$applet"
  done
  copy_elf /usr/bin/git "$rootfs"
  # git's helpers (most are links to git itself); the remote helpers bring libcurl.
  for f in /usr/lib/git-core/*; do
    if [ ! -L "$f" ] && [ -f "$f" ] && head -c4 "$f" | grep -q ELF; then copy_elf "$f" "$rootfs"
    else copy_at "$f" "$rootfs"; fi
  done
  if [ -d /usr/share/git-core ]; then copy_at /usr/share/git-core "$rootfs"; fi
  if [ -d /etc/ssl/certs ]; then copy_at /etc/ssl/certs "$rootfs" -aL; fi
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
}

# The packages whose programs agora selftest's attacks and legitimate operations use, past
# busybox and git: curl (the network and gateway attacks speak HTTP), perl-base (the process
# and socket attacks; its core modules, POSIX and Socket among them), python3.11 (the
# loopback server and unittest operations), make, getent (libc-bin), prlimit (util-linux),
# setcap and getcap (libcap2-bin), nft (nftables), and base-files' os-release. Go is not
# among them (270 MB, saved and imported by every container and node test): legit-go is not
# run in this image, saying go is missing in it.
attack_packages=(curl libcurl4 perl-base python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
  make libc-bin util-linux libcap2-bin nftables base-files)

# add_attack_tools ROOTFS: those programs copied from this host into ROOTFS, with their
# shared libraries and, for perl and python, their modules (each package's files under
# /usr/lib, python's extension modules with their libraries), so that in the toolchain image
# the attacks run rather than report a tool missing (docs/selftest.md). Only the toolchain
# image has them: the agora image needs none.
add_attack_tools() {
  local rootfs=$1 f
  for f in /usr/bin/curl /usr/bin/perl /usr/bin/python3.11 /usr/bin/make /usr/bin/getent \
    /usr/bin/prlimit /usr/sbin/setcap /usr/sbin/getcap /usr/sbin/nft; do
    copy_elf "$f" "$rootfs"
  done
  ln -s python3.11 "$rootfs/usr/bin/python3"
  for f in $(dpkg-query -L perl-base libpython3.11-minimal libpython3.11-stdlib | grep '^/usr/lib/'); do
    if [ -L "$f" ]; then copy_at "$f" "$rootfs"
    elif [ ! -f "$f" ]; then continue
    elif [[ $f == *.so ]]; then copy_elf "$f" "$rootfs"
    else copy_at "$f" "$rootfs"; fi
  done
  copy_at /usr/lib/os-release "$rootfs"
  ln -s ../usr/lib/os-release "$rootfs/etc/os-release"
}

# attack_tools_inputs: what add_attack_tools copies, as package versions.
attack_tools_inputs() {
  dpkg-query -W "${attack_packages[@]}" 2>/dev/null
}

# rootfs_inputs: what make_rootfs copies, as package versions, for an image's inputs hash.
rootfs_inputs() {
  dpkg-query -W busybox-static git git-man ca-certificates libc6 2>/dev/null
}

need_rootfs_tools() {
  local f
  install_missing
  for f in /bin/busybox /usr/bin/git; do
    [ -x "$f" ] || { echo "agora images: $f is missing: apt-get install busybox-static git" >&2; exit 2; }
  done
}

need_attack_tools() {
  local f
  for f in /usr/bin/curl /usr/bin/perl /usr/bin/python3.11 /usr/bin/make /usr/bin/getent \
    /usr/bin/prlimit /usr/sbin/setcap /usr/sbin/getcap /usr/sbin/nft /usr/lib/os-release; do
    [ -e "$f" ] || { echo "agora images: $f is missing: apt-get install ${attack_packages[*]}" >&2; exit 2; }
  done
}

build_toolchain() {
  local ctx inputs tag
  need_rootfs_tools
  need_attack_tools
  inputs=$( { cat "$root/images/agora-toolchain.Containerfile" "$0"; rootfs_inputs; attack_tools_inputs; } | sha256sum | cut -c1-16)
  tag="localhost/agora-toolchain:$inputs"
  if [ "$(current "$tag")" != "$inputs" ]; then
    echo "agora images: building $tag" >&2
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' RETURN
    make_rootfs "$ctx/rootfs"
    add_attack_tools "$ctx/rootfs"
    cp "$root/images/agora-toolchain.Containerfile" "$ctx/Containerfile"
    podman build -q --label "agora.inputs=$inputs" -t "$tag" "$ctx" >/dev/null
  fi
  echo "AGORA_TOOLCHAIN_IMAGE=$(digestref "$tag")"
}

which=("$@")
[ ${#which[@]} -eq 0 ] && which=(worker toolchain)
for w in "${which[@]}"; do
  case $w in
    worker) build_worker ;;
    toolchain) build_toolchain ;;
    agora) build_agora ;;
    *) echo "agora images: unknown image $w (want worker, toolchain or agora)" >&2; exit 2 ;;
  esac
done
