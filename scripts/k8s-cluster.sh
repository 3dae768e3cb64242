#!/usr/bin/env bash
# Starts the test control plane of internal/k8stest (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok and its fake node, namespace "agents" enforcing
# Pod Security "restricted") for manual use, and keeps it until ^C. It writes an admin
# kubeconfig to .cache/k8s/kubeconfig (or $1). AGORA_K8S_REAL_NODE=1 runs a real kubelet
# instead of kwok. The binaries come from scripts/k8s-tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-.cache/k8s/kubeconfig}")
mkdir -p "$(dirname "$out")"
AGORA_K8S_HOLD=$out exec go test -count=1 -timeout=0 -run '^TestHoldCluster$' -v ./internal/k8stest
