#!/usr/bin/env bash
# Starts the test control plane of internal/k8stest (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok and its fake node, namespace "agents" enforcing
# Pod Security "restricted") for manual use, and keeps it until ^C. It writes an admin
# kubeconfig to .cache/k8s/kubeconfig (or the path given). The binaries come from
# scripts/k8s-tools.sh.
#
#   scripts/k8s-cluster.sh [--real-node] [--in-cluster-api] [KUBECONFIG-PATH]
#
# --real-node runs a real kubelet instead of kwok (AGORA_K8S_REAL_NODE=1 does too).
# --in-cluster-api (implies --real-node) lets the node's pods reach the apiserver as in a
# cluster: the kubernetes Service's address and the Services' stand-ins, as the leader-kill
# test runs it. serve's pods (the chart, deploy/kubernetes) need it: without it they log
# "read the leader lease ... context deadline exceeded" for good.
set -euo pipefail
cd "$(dirname "$0")/.."
out=""
for a in "$@"; do
  case $a in
    --real-node) export AGORA_K8S_REAL_NODE=1 ;;
    --in-cluster-api) export AGORA_K8S_REAL_NODE=1 AGORA_K8S_IN_CLUSTER_API=1 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "k8s-cluster.sh: unknown option $a (see --help)" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "k8s-cluster.sh: one kubeconfig path, not $out and $a" >&2; exit 2; }; out=$a ;;
  esac
done
out=$(realpath -m "${out:-.cache/k8s/kubeconfig}")
mkdir -p "$(dirname "$out")"
AGORA_K8S_HOLD=$out exec go test -count=1 -timeout=0 -run '^TestHoldCluster$' -v ./internal/k8stest
