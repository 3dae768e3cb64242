package k8stest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// BenchmarkClusterStart measures Start: certificates, etcd, apiserver, controller-manager,
// scheduler, kwok and its node, until a Job could run.
func BenchmarkClusterStart(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		c := k8stest.Start(b, k8stest.Options{})
		total += c.StartTime
		c.Stop()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/start")
}

// BenchmarkKwokJobToRunning is the floor under the Kubernetes provider's "Job created ->
// worker started" target: the control plane alone, from the POST of a hardened Job to its pod
// reported Running by kwok, seen on a watch. It reports the median.
func BenchmarkKwokJobToRunning(b *testing.B) {
	c := k8stest.Shared(b, k8stest.Options{})
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	run := fmt.Sprint(time.Now().UnixNano())

	var mu sync.Mutex
	created := map[string]time.Time{}
	running := map[string]chan struct{}{}
	var lat []time.Duration
	watchReady := make(chan error, 1)
	watchErr := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet,
			c.Server+"/api/v1/namespaces/"+c.Namespace+"/pods?watch=1&resourceVersion=0&labelSelector=bench%3D"+run, nil)
		client := *c.HTTPClient()
		client.Timeout = 0 // a watch lasts as long as the benchmark
		resp, err := client.Do(req)
		if err != nil {
			watchReady <- err
			return
		}
		defer resp.Body.Close()
		watchReady <- nil
		dec := json.NewDecoder(bufio.NewReader(resp.Body))
		for {
			var ev struct {
				Type   string
				Object struct {
					Message  string // of an ERROR event's Status
					Metadata struct{ Labels map[string]string }
					Status   struct{ Phase string }
				}
			}
			if err := dec.Decode(&ev); err != nil {
				watchErr <- err
				return
			}
			if ev.Type == "ERROR" {
				watchErr <- fmt.Errorf("the pod watch ended: %s", ev.Object.Message)
				return
			}
			if ev.Object.Status.Phase != "Running" && ev.Object.Status.Phase != "Succeeded" {
				continue
			}
			name := ev.Object.Metadata.Labels["batch.kubernetes.io/job-name"]
			mu.Lock()
			if ch, ok := running[name]; ok {
				lat = append(lat, time.Since(created[name]))
				close(ch)
				delete(running, name)
			}
			mu.Unlock()
		}
	}()
	if err := <-watchReady; err != nil {
		b.Fatal(err)
	}

	i := 0
	for b.Loop() {
		i++
		name := fmt.Sprintf("bench-%s-%d", run, i)
		ch := make(chan struct{})
		mu.Lock()
		running[name] = ch
		created[name] = time.Now()
		mu.Unlock()
		if err := c.Do(ctx, http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
			job(name, map[string]string{"bench": run}, nil, hardenedPodSpec()), nil); err != nil {
			b.Fatal(err)
		}
		select {
		case <-ch:
		case err := <-watchErr:
			b.Fatalf("job %s: %v", name, err)
		case <-time.After(60 * time.Second):
			b.Fatalf("job %s: no Running pod within 60s", name)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
		b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "ms-max")
	}
}
