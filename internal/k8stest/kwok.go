package k8stest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
// scripts/k8s-tools.sh copied from kwok's module and the extra ones given. HOME is the cluster
// directory so that a ~/.kwok/kwok.yaml on the machine cannot change what the tests see.
func (c *Cluster) kwokProc(dir string, bins *binaries, kubeconfig string, extra ...string) *proc {
	return newProc(dir, "kwok", []string{bins.kwok,
		"--kubeconfig=" + kubeconfig,
		"--config=" + strings.Join(append(slices.Clone(bins.stages), extra...), ","),
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

// SlotLabel is the label agora's warm slot pods carry (internal/compute/kubernetes).
const SlotLabel = "agora.slot"

// slotStage keeps a warm slot's pod (labelled SlotLabel) Running under kwok, as a real kubelet
// does: its worker waits on the gateway for its claim and never ends by itself. kwok's own
// pod-complete stage ends every running pod a Job owns at once, which on kwok made a slot pod
// end before or just after its holder saw it run (serve's standbys were replaced
// while they waited). Weight 1 against pod-complete's none: kwok always picks this one. A pod
// given kwok's chaos label (FailLabel, the kubernetes package's tests) is left to that stage.
// After an hour it completes, as pod-complete would have.
const slotStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: agora-slot-pod-waits
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.labels["` + SlotLabel + `"]'
      operator: 'Exists'
    - key: '.metadata.labels["` + FailLabel + `"]'
      operator: 'DoesNotExist'
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
  weight: 1
  delay:
    durationMilliseconds: 3600000
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
`

// writeSlotStage writes slotStage into the cluster directory and returns its path.
func writeSlotStage(dir string) (string, error) {
	p := filepath.Join(dir, "kwok-stage-agora-slot.yaml")
	if err := os.WriteFile(p, []byte(slotStage), 0o600); err != nil {
		return "", fmt.Errorf("kwok: write the slot stage: %w", err)
	}
	return p, nil
}
