package kubernetes

import (
	"errors"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/fence"
)

// TestFence_DeleteJobRefused: under a closed leader fence (a supervisor whose serve lost its
// lease) the provider deletes no Job: the new leader may have adopted it.
func TestFence_DeleteJobRefused(t *testing.T) {
	p, cs := testProvider(t, &fakeExporter{})
	ctx := t.Context()
	job, err := cs.BatchV1().Jobs(p.ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "agora-x", Namespace: p.ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fenced := errors.New("lease agora/leader: leadership ended; refusing to commit")
	restore := fence.Set(func() error { return fenced })
	if err := p.deleteJob(job.Name, job.UID); !errors.Is(err, fenced) {
		t.Errorf("a fenced delete: %v, want the fence's error", err)
	}
	if _, err := cs.BatchV1().Jobs(p.ns).Get(ctx, job.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the Job is gone after a fenced delete: %v", err)
	}
	restore()
	if err := p.deleteJob(job.Name, job.UID); err != nil {
		t.Fatalf("an unfenced delete: %v", err)
	}
	if _, err := cs.BatchV1().Jobs(p.ns).Get(ctx, job.Name, metav1.GetOptions{}); err == nil {
		t.Error("the Job is still there after an unfenced delete")
	}
}
