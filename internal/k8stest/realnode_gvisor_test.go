package k8stest_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

// kernelSource prints the kernel the process talks to (/proc/version) and then what the probe
// prints: under gVisor the kernel is gVisor's Sentry, which names itself.
const kernelSource = `package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	v, err := os.ReadFile("/proc/version")
	fmt.Printf("kernel: %s (%v)\n", strings.TrimSpace(string(v)), err)
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		for _, k := range []string{"CapEff:", "NoNewPrivs:", "Seccomp:"} {
			if strings.HasPrefix(l, k) {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	if err := os.WriteFile("/written", []byte("x"), 0o644); err != nil {
		fmt.Println("root write refused")
	}
}
`

// TestRealNodeGVisor runs the same hardened Job on the real node twice, with no RuntimeClass
// (runc) and with RuntimeClass gvisor (handler runsc, gVisor's shim): both complete as the
// same non-root, capability-less, read-only process, the gVisor one sees gVisor's kernel and
// the node's containerd ran its container with the runsc runtime. A pod naming a RuntimeClass
// that does not exist is refused at creation, saying so.
func TestRealNodeGVisor(t *testing.T) {
	c := k8stest.Start(t, k8stest.Options{RealNode: true, GVisor: true})
	tarball, pinned, err := k8stest.OCIImage("k8stest.invalid/kernel:1", []string{"/kernel"},
		k8stest.ImageFile{Path: "/kernel", Mode: 0o755, Data: buildStatic(t, "kernel", kernelSource)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ImportImage(t.Context(), tarball); err != nil {
		t.Fatal(err)
	}
	logs := map[string]string{}
	for _, rc := range []string{"", k8stest.GVisorRuntimeClass} {
		name := "kernel-" + map[string]string{"": "runc", k8stest.GVisorRuntimeClass: "gvisor"}[rc]
		spec := hardenedPodSpec()
		if rc != "" {
			spec["runtimeClassName"] = rc
		}
		ctr := spec["containers"].([]any)[0].(map[string]any)
		ctr["image"], ctr["command"] = pinned, []string{"/kernel"}
		begin := time.Now()
		if err := c.Do(t.Context(), http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
			job(name, nil, nil, spec), nil); err != nil {
			t.Fatal(err)
		}
		if end := waitJobOn(t, c, name); end != "Complete" {
			t.Fatalf("job %s ended %s\nkubelet log:\n%s\ncontainerd log:\n%s", name, end, c.Log("kubelet"), c.Log("containerd"))
		}
		t.Logf("job %s complete in %s", name, time.Since(begin).Round(time.Millisecond))
		pods := jobPods(t, c, name)
		if len(pods.Items) != 1 {
			t.Fatalf("job %s: %d pods, want 1", name, len(pods.Items))
		}
		var log []byte
		if err := c.Do(t.Context(), http.MethodGet, "/api/v1/namespaces/"+c.Namespace+"/pods/"+pods.Items[0].Metadata.Name+"/log", nil, &log); err != nil {
			t.Fatalf("pod log: %v", err)
		}
		logs[rc] = string(log)
		t.Logf("%s:\n%s", name, log)
		// Seccomp 2: the RuntimeDefault profile filters the process, under gVisor too
		// (runsc's oci-seccomp; without it gVisor says 0).
		for _, want := range []string{"CapEff: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2", "root write refused"} {
			if !strings.Contains(string(log), want) {
				t.Errorf("%s: log lacks %q", name, want)
			}
		}
	}
	if strings.Contains(logs[""], "gvisor") || !strings.Contains(logs[k8stest.GVisorRuntimeClass], "-gvisor") {
		t.Errorf("want the host's kernel under runc and gVisor's under runsc; runc:\n%s\nrunsc:\n%s", logs[""], logs[k8stest.GVisorRuntimeClass])
	}
	// The node's side: containerd ran the gVisor Job's containers (the pod's sandbox and its
	// container) with runsc's runtime, and the runc Job's with runc's.
	out, err := c.Ctr(t.Context(), "containers", "ls")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(out), "io.containerd.runsc.v1"); n < 2 {
		t.Errorf("containerd lists %d containers of runtime io.containerd.runsc.v1, want the gVisor pod's sandbox and container:\n%s", n, out)
	}
	if !strings.Contains(string(out), "io.containerd.runc.v2") {
		t.Errorf("containerd lists no runc container (the default runtime):\n%s", out)
	}

	// A RuntimeClass that does not exist: the apiserver refuses the pod, naming it.
	spec := hardenedPodSpec()
	spec["runtimeClassName"] = "no-such-class"
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "no-class"}, "spec": spec}
	err = c.Do(t.Context(), http.MethodPost, "/api/v1/namespaces/"+c.Namespace+"/pods", pod, nil)
	if err == nil || !strings.Contains(err.Error(), `"no-such-class" not found`) {
		t.Errorf("a pod with a missing RuntimeClass: %v, want refused, naming it", err)
	}
}

// BenchmarkRealNodeJob_RuncVsGVisor is a cold pod's whole life on the real node, from the POST
// of the hardened Job (one static binary that reads /proc/version and exits) to the Job
// Complete on a watch, without a RuntimeClass (runc) and with RuntimeClass gvisor (runsc),
// interleaved: what gVisor adds to starting and ending a pod (the sandbox's Sentry and gofer
// for the pod, runsc's create and start of each container).
//
//	go test ./internal/k8stest -run '^$' -bench 'RealNodeJob_RuncVsGVisor' -benchtime 10x -benchmem
func BenchmarkRealNodeJob_RuncVsGVisor(b *testing.B) {
	c := k8stest.Start(b, k8stest.Options{RealNode: true, GVisor: true})
	tarball, pinned, err := k8stest.OCIImage("k8stest.invalid/kernel:1", []string{"/kernel"},
		k8stest.ImageFile{Path: "/kernel", Mode: 0o755, Data: buildStatic(b, "kernel", kernelSource)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.ImportImage(b.Context(), tarball); err != nil {
		b.Fatal(err)
	}
	lat := map[string][]time.Duration{}
	i := 0
	for b.Loop() {
		for _, rc := range []string{"", k8stest.GVisorRuntimeClass} {
			i++
			name := fmt.Sprintf("bench-%d", i)
			spec := hardenedPodSpec()
			if rc != "" {
				spec["runtimeClassName"] = rc
			}
			ctr := spec["containers"].([]any)[0].(map[string]any)
			ctr["image"], ctr["command"] = pinned, []string{"/kernel"}
			begin := time.Now()
			if err := c.Do(b.Context(), http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
				job(name, nil, nil, spec), nil); err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(b.Context(), 2*time.Minute)
			err := c.Wait(ctx, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs/"+name, func(obj map[string]any) (bool, error) {
				if jobCondition(obj, "Failed") == "True" {
					return false, fmt.Errorf("job %s failed", name)
				}
				return jobCondition(obj, "Complete") == "True", nil
			})
			cancel()
			if err != nil {
				b.Fatalf("%v\nkubelet log:\n%s", err, c.Log("kubelet"))
			}
			key := map[string]string{"": "runc", k8stest.GVisorRuntimeClass: "gvisor"}[rc]
			lat[key] = append(lat[key], time.Since(begin))
		}
	}
	for key, l := range lat {
		slices.Sort(l)
		b.ReportMetric(float64(l[len(l)/2].Milliseconds()), "ms-median-"+key)
		b.Logf("%s: %v", key, l)
	}
}
