#!/usr/bin/env bash
# Imports an image archive into a Kubernetes node's containerd and prints the reference to pin
# in agora.yaml (image:, worker_image:) or the chart's values, REPOSITORY@sha256:<digest>:
#
#   scripts/node-import.sh .cache/images/agora-worker.tar     # on the node, as root
#
# The digest scripts/images.sh prints is podman's own (its stored manifest); containerd holds
# an imported archive under the manifest it reads or writes on import, another digest, and
# names the image only by its tag, while the kubelet asks for a pod's image by the exact
# reference it names. So each imported image is also named REPOSITORY@DIGEST with the digest
# containerd holds, and that reference is printed, one per image: pin it, never podman's.
# ctr's own variables choose the containerd (CONTAINERD_ADDRESS, default
# /run/containerd/containerd.sock); the namespace is the kubelet's, k8s.io.
set -euo pipefail
[ $# -eq 1 ] && [ -f "$1" ] || { echo "usage: scripts/node-import.sh IMAGE-ARCHIVE.tar (podman save's docker-archive or oci-archive)" >&2; exit 2; }
command -v ctr >/dev/null || { echo "node-import: ctr (containerd) is missing on this host" >&2; exit 2; }
export CONTAINERD_NAMESPACE=k8s.io
out=$(ctr images import "$1")
pinned=0
while read -r word name rest; do
  # "unpacking NAME (sha256:HEX)...done"
  [ "$word" = unpacking ] || continue
  digest=${rest#(}
  digest=${digest%%)*}
  case $name in sha256:*|*@*) continue ;; esac
  [[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || continue
  repo=${name%:*}
  [ "$repo" != "$name" ] && [ "${name##*/}" != "${repo##*/}" ] || continue # a tag, after the last /
  if ! msg=$(ctr images tag "$name" "$repo@$digest" 2>&1) && [[ $msg != *"already exists"* ]]; then
    echo "node-import: ctr images tag $name $repo@$digest: $msg" >&2
    exit 1
  fi
  echo "$repo@$digest"
  pinned=$((pinned + 1))
done <<<"$out"
[ "$pinned" -gt 0 ] || { echo "node-import: ctr images import named no image:" >&2; echo "$out" >&2; exit 1; }
