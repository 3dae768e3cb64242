package dispatch_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
)

// TestRedTeam35_RealPodFillerImageRoundTripNeverClaimed: a tenant who may update pods sets a
// waiting slot's filler image to another and back. On the real kubelet the filler's container
// is restarted for each (a changed container spec restarts whatever the restartPolicy), so the
// other image ran with the places' writable side; the stored pod is then as agora made it. The
// slot's check before the bind must refuse it (it passed, the hash being the same).
func TestRedTeam35_RealPodFillerImageRoundTripNeverClaimed(t *testing.T) {
	n := startPodNode(t)
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: n.c.Kubeconfig, Namespace: n.c.Namespace,
		Image: n.toolchain, WorkerImage: n.workerRef, GatewayURL: n.gatewayURL, GatewayCA: n.ca, Exporter: n.reg, Target: "pod"})
	if err != nil {
		t.Fatal(err)
	}
	bundle := t.TempDir()
	os.WriteFile(filepath.Join(bundle, "x"), []byte("x"), 0o644)
	tmpl := compute.Spec{ID: "TEMPLATE", Argv: []string{"/agora/bin/agora-worker", "worker"},
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp"}, Dir: "/agora/workspace",
		Binds:  []compute.Bind{{Src: bundle, Dst: "/agora/bundle"}, {Src: t.TempDir(), Dst: "/agora/out", Writable: true, Result: true}},
		Limits: compute.Limits{Timeout: 2 * time.Minute}}
	gs, err := (&netgw.Slots{Dir: n.slotsDir}).Create(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer gs.Close()
	sl, err := p.StartSlot(t.Context(), tmpl, kubernetes.SlotOptions{ID: gs.ID, Token: gs.Token, Home: "redteam35", Places: []remote.SlotPlace{{Dst: "/agora/bundle"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Discard()
	podPath := "/api/v1/namespaces/" + n.c.Namespace + "/pods"
	var l corev1.PodList
	if err := n.c.Do(t.Context(), http.MethodGet, podPath+"?labelSelector=agora.slot%3D"+sl.ID, nil, &l); err != nil || len(l.Items) != 1 {
		t.Fatalf("the slot's pod: %v (%d)", err, len(l.Items))
	}
	podPath += "/" + l.Items[0].Name
	fill := waitFiller(t, n, podPath, 0, n.workerRef)
	if err := sl.Check(t.Context()); err != nil {
		t.Fatalf("a fresh slot fails its check: %v", err)
	}
	// The tenant's image: one that runs at the filler's command (here agora's worker binary
	// under another name, so it also waits on the socket as the filler does).
	bin, err := os.ReadFile(agoratest.Worker(agoraBin))
	if err != nil {
		t.Fatal(err)
	}
	tarball, _, err := k8stest.OCIImage("localhost/tenant:redteam35", []string{"/agora/bin/agora-worker"},
		k8stest.ImageFile{Path: "/agora/bin/agora-worker", Mode: 0o755, Data: bin})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := n.c.ImportImage(t.Context(), tarball)
	if err != nil || len(refs) != 1 {
		t.Fatalf("import the tenant's image: %q, %v", refs, err)
	}
	for i, img := range []string{refs[0], n.workerRef} {
		var pod corev1.Pod
		if err := n.c.Do(t.Context(), http.MethodGet, podPath, nil, &pod); err != nil {
			t.Fatal(err)
		}
		pod.Spec.Containers[fill].Image = img
		if err := n.c.Do(t.Context(), http.MethodPut, podPath, &pod, nil); err != nil {
			t.Fatalf("set the filler's image to %s: %v", img, err)
		}
		waitFiller(t, n, podPath, int32(i+1), img)
	}
	if err := sl.Check(t.Context()); !errors.Is(err, kubernetes.ErrSlotChanged) {
		t.Fatalf("check of a slot whose filler ran another image: %v, want ErrSlotChanged", err)
	}
}

// waitFiller waits until the pod's filler container has restarted restarts times and runs
// image, and returns its index in the pod's containers.
func waitFiller(t *testing.T, n *podNode, podPath string, restarts int32, image string) int {
	t.Helper()
	var pod corev1.Pod
	index := -1
	if !agoratest.Poll(2*time.Minute, func() bool {
		pod = corev1.Pod{}
		if err := n.c.Do(t.Context(), http.MethodGet, podPath, nil, &pod); err != nil {
			t.Fatal(err)
		}
		for _, st := range pod.Status.ContainerStatuses {
			if st.Name == "fill" && st.RestartCount == restarts && st.State.Running != nil && st.ImageID != "" && strings.HasSuffix(image, "@"+digestOf(st.ImageID)) {
				for j, c := range pod.Spec.Containers {
					if c.Name == "fill" {
						index = j
						return true
					}
				}
			}
		}
		return false
	}) {
		t.Fatalf("the filler did not restart %d times in 2 minutes: %+v", restarts, pod.Status.ContainerStatuses)
	}
	return index
}

// digestOf is an image id's digest (sha256:...), whatever precedes it.
func digestOf(id string) string {
	if i := strings.LastIndex(id, "sha256:"); i >= 0 {
		return id[i:]
	}
	return id
}
