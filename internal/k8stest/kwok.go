package k8stest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// KwokNode is the name of the fake node kwok plays the kubelet of.
const KwokNode = "kwok-node-0"

// FailLabel and FailExitCodeAnnotation make a pod fail under kwok: a pod (template) labelled
// FailLabel=true ends Failed, its containers terminated with the exit code in the annotation
// (1 when absent). FailDelayAnnotation sets how long it runs first (a Go duration, "0s";
// absent: 1 s plus up to 1 s). These are the keys of kwok's own chaos stage.
const (
	FailLabel              = "pod-container-running-failed.stage.kwok.x-k8s.io"
	FailExitCodeAnnotation = "pod-container-running-failed.stage.kwok.x-k8s.io/exit-code"
	FailDelayAnnotation    = "pod-container-running-failed.stage.kwok.x-k8s.io/delay"
	FailJitterAnnotation   = "pod-container-running-failed.stage.kwok.x-k8s.io/jitter-delay"
)

// kwokProc runs kwok for the nodes annotated kwok.x-k8s.io/node=fake, with the stages
// scripts/k8s-tools.sh copied from kwok's module. HOME is the cluster directory so that a
// ~/.kwok/kwok.yaml on the machine cannot change what the tests see.
func (c *Cluster) kwokProc(dir string, bins *binaries, kubeconfig string) *proc {
	return newProc(dir, "kwok", []string{bins.kwok,
		"--kubeconfig=" + kubeconfig,
		"--config=" + strings.Join(bins.stages, ","),
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr=10.244.0.0/16",
		"--node-ip=10.250.0.2",
		// The heartbeat stage kwok ships ("with-lease") renews the node's condition rarely and
		// leaves liveness to a Lease; without one the node-lifecycle controller marked the node
		// unreachable after 40 s and tainted it, and no pod was scheduled after that.
		"--node-lease-duration-seconds=40",
	}, "HOME="+dir, noWatchList)
}

// createKwokNode registers the fake node: big enough for a 200-Job benchmark, untainted so a
// Job needs no toleration, labelled as a real Linux node would be.
func (c *Cluster) createKwokNode(ctx context.Context) error {
	res := map[string]string{"cpu": "64", "memory": "512Gi", "pods": "1000", "ephemeral-storage": "1Ti"}
	node := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name":        KwokNode,
			"annotations": map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			"labels": map[string]string{
				"kubernetes.io/hostname": KwokNode, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok",
			},
		},
		"status": map[string]any{
			"allocatable": res, "capacity": res,
			"nodeInfo": map[string]string{"kubeletVersion": "fake", "operatingSystem": "linux", "architecture": "amd64"},
		},
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/nodes", node, nil); err != nil {
		return fmt.Errorf("create the kwok node: %w", err)
	}
	return nil
}
