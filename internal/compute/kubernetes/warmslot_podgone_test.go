package kubernetes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
)

// TestWarmSlot_ClusterClaimedPodDeletedEndsLost: the pod a warm slot's dispatch runs in is
// deleted under it (a node drained, someone's kubectl delete). The dispatch ends lost at once
// (not at its Job's deadline, minutes later, while a replacement pod that never ran it waits),
// its Job is deleted with any replacement, and when the handle saw the deletion first its
// stderr says so.
func TestWarmSlot_ClusterClaimedPodDeletedEndsLost(t *testing.T) {
	g := startSlotGW(t)
	p := slotProvider(t, g)
	sl, gs := startSlot(t, p, g)
	token := podToken(t, p, sl)
	id := clusterID("GONE")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := workerClaims(ctx, g, gs.ID, token)
	spec := warmSpec(t, id)
	stderr := &agoratest.SyncBuffer{}
	spec.Stderr = stderr
	h, err := sl.Run(ctx, spec, gs.Bind)
	if err != nil {
		t.Fatalf("Run in the slot: %v", err)
	}
	if d := <-got; d != id {
		t.Fatalf("the slot's worker was handed %q, want %q", d, id)
	}
	pod, err := sl.findPod(t.Context())
	if err != nil || pod == nil {
		t.Fatalf("the claimed pod: %v", err)
	}
	zero := int64(0)
	if err := p.client.CoreV1().Pods(p.ns).Delete(t.Context(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	exit := waitTimeout(t, h, 60*time.Second)
	if !exit.Lost || exit.Cancelled {
		t.Errorf("exit = %+v, want lost", exit)
	}
	if took := time.Since(start); took > 45*time.Second {
		t.Errorf("the dispatch ended %v after its pod was deleted", took)
	}
	// Either the Job's controller counts the deleted pod as its failure first (the Job fails,
	// and its pinned pod is gone: lost), or the handle sees the deletion first and says so.
	if s := stderr.String(); s != "" && !strings.Contains(s, "that ran the dispatch was deleted") {
		t.Errorf("stderr = %q, want the pod's deletion or nothing", s)
	}
	agoratest.Eventually(t, 30*time.Second, "the slot's Job to go with its lost dispatch", func() error {
		if _, err := p.client.BatchV1().Jobs(p.ns).Get(t.Context(), sl.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("it stands: %v", err)
		}
		return nil
	})
}
