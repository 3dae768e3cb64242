package kubernetes

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/k8stest"
)

// TestCluster_Describe: a running dispatch's pod phase and node, then, once its Job is
// deleted behind agora's back, Gone rather than an error.
func TestCluster_Describe(t *testing.T) {
	p, _ := clusterProvider(t, &fakeExporter{})
	p.testOnlyPodMeta = failWith(1, "1h")
	id := clusterID("DESC")
	h, err := p.Start(t.Context(), testSpec(id))
	if err != nil {
		t.Fatal(err)
	}
	waitPodPhase(t, p, id, corev1.PodRunning)
	d, err := p.Describe(t.Context(), h.TaskID())
	if err != nil {
		t.Fatal(err)
	}
	if d.Gone || d.Phase != "Running" || d.Node != k8stest.KwokNode || d.Object != objectName(id) || d.Pod == "" || d.Provider != "kubernetes" {
		t.Errorf("describe = %+v; want Running on %s", d, k8stest.KwokNode)
	}
	var _ compute.Describer = p
	bg := metav1.DeletePropagationBackground
	if err := p.client.BatchV1().Jobs(p.ns).Delete(t.Context(), objectName(id), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	waitTimeout(t, h, 3*time.Minute)
	if d, err := p.Describe(t.Context(), h.TaskID()); err != nil || !d.Gone {
		t.Errorf("describe of a deleted Job = %+v, %v; want Gone", d, err)
	}
	if _, err := p.Describe(t.Context(), "k8s:other/"+objectName(id)); err == nil {
		t.Error("describe of another namespace's task id answered")
	}
}
