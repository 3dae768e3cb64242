package kubernetes

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkKwokStartToRunning_JobVsAgentSandbox is a cold dispatch's start, through the
// provider's real Start, to its pod Running on kwok (which runs no process: Running is kwok's
// stage, not a worker), for the Job backend and the agent-sandbox backend in the same control
// plane (with agent-sandbox's real controller), interleaved. Each iteration starts one of each
// and waits for both pods; the dispatches are then cancelled outside the timing.
//
//	go test ./internal/compute/kubernetes -run '^$' -bench 'KwokStartToRunning' -benchtime 20x -benchmem
func BenchmarkKwokStartToRunning_JobVsAgentSandbox(b *testing.B) {
	exp := &fakeExporter{}
	sb := sandboxProvider(b, exp)
	o := sb.opts
	o.Backend = BackendJobs
	job, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	job.testOnlyPodMeta = failWith(0, "1h")
	sb.testOnlyPodMeta = failWith(0, "1h")
	lat := map[string][]time.Duration{}
	for b.Loop() {
		for _, side := range []struct {
			name string
			p    *Provider
		}{{"job", job}, {"agent-sandbox", sb}} {
			id := clusterID("B")
			begin := time.Now()
			h, err := side.p.Start(b.Context(), testSpec(id))
			if err != nil {
				b.Fatal(err)
			}
			waitRunning(b, side.p, id)
			lat[side.name] = append(lat[side.name], time.Since(begin))
			b.StopTimer()
			if err := side.p.Cancel(b.Context(), h.TaskID()); err != nil {
				b.Fatal(err)
			}
			h.Wait()
			b.StartTimer()
		}
	}
	for name, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, "ms-median-"+name)
	}
}

// waitRunning watches (rather than polls) for the dispatch's pod to be Running.
func waitRunning(b *testing.B, p *Provider, id string) {
	b.Helper()
	sel := metav1.ListOptions{LabelSelector: labelDispatch + "=" + id}
	for {
		l, err := p.client.CoreV1().Pods(p.ns).List(b.Context(), sel)
		if err != nil {
			b.Fatal(err)
		}
		for _, pod := range l.Items {
			if pod.Status.Phase == corev1.PodRunning {
				return
			}
		}
		sel.ResourceVersion = l.ResourceVersion
		sel.TimeoutSeconds = ptrTo(int64(30))
		w, err := p.client.CoreV1().Pods(p.ns).Watch(b.Context(), sel)
		if err != nil {
			b.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok && pod.Status.Phase == corev1.PodRunning {
				w.Stop()
				return
			}
		}
		sel.ResourceVersion, sel.TimeoutSeconds = "", nil
	}
}
