package kubernetes

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/compute"
)

// BenchmarkKwok200ConcurrentDispatches is the issue's "200 concurrent dispatches on kwok all
// reach a terminal state with no duplicate Job", through the provider's real Start: each
// dispatch is started twice at once, from two providers (two supervisors of one home), so
// every one of them goes through the claim and the adoption. Run it with -benchtime 1x: one
// iteration is 400 Starts.
func BenchmarkKwok200ConcurrentDispatches(b *testing.B) {
	const n = 200
	exp := &fakeExporter{}
	p1, _ := clusterProvider(b, exp)
	p2, err := New(p1.opts)
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		run := clusterID("C")
		exports := exp.exports
		var (
			mu    sync.Mutex
			wg    sync.WaitGroup
			exits = map[string][]compute.Exit{}
		)
		begin := time.Now()
		for i := range n {
			id := fmt.Sprintf("%sX%03d", run, i)
			for _, p := range []*Provider{p1, p2} {
				wg.Go(func() {
					start := time.Now()
					h, err := p.Start(b.Context(), testSpec(id))
					if err != nil {
						b.Errorf("start %s: %v", id, err)
						return
					}
					exit, err := h.Wait()
					if err != nil {
						b.Errorf("wait %s: %v", id, err)
					}
					mu.Lock()
					exits[id] = append(exits[id], exit)
					lat = append(lat, time.Since(start))
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		b.ReportMetric(time.Since(begin).Seconds(), "s-all-terminal")
		for id, es := range exits {
			for _, e := range es {
				if e.Code != 0 || e.Lost || e.Cancelled || e.TimedOut {
					b.Errorf("dispatch %s ended %+v, want exit 0", id, e)
				}
			}
		}
		if len(exits) != n {
			b.Errorf("%d of %d dispatches reached a terminal state", len(exits), n)
		}
		perDispatch := map[string]int{}
		jobs, err := p1.client.BatchV1().Jobs(p1.ns).List(b.Context(), metav1.ListOptions{LabelSelector: labelManagedBy + "=" + managedBy})
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range jobs.Items {
			if id := j.Labels[labelDispatch]; len(id) > len(run) && id[:len(run)] == run {
				perDispatch[id]++
			}
		}
		dups := 0
		for _, c := range perDispatch {
			if c != 1 {
				dups++
			}
		}
		if len(perDispatch) != n || dups != 0 || exp.exports-exports != n {
			b.Errorf("%d dispatches have Jobs, %d of them not exactly one, %d exports; want %d, 0, %d",
				len(perDispatch), dups, exp.exports-exports, n, n)
		}
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "ms-start-to-exit-median")
		b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "ms-start-to-exit-max")
	}
}
