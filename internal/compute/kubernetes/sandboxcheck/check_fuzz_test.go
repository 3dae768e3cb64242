package sandboxcheck

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The target the seed's Sandbox was built for (testdata/fuzz/FuzzCheckSandbox/own-sandbox is
// the kubernetes provider's Sandbox for dispatch fuzzID of its tests' target and spec).
const (
	fuzzID          = "01HFUZZ"
	fuzzImage       = "registry.example/agents/toolchain@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	fuzzWorkerImage = "registry.example/agora/worker:v1@sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
	fuzzGateway     = "https://10.250.0.1:8443"
)

// fuzzWant is what that target wants of the seed's Sandbox: its labels, its Secret, a 90 s
// deadline, 500m CPU and 256Mi memory per container.
func fuzzWant() Want {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	res := corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
	lbl := map[string]string{"app.kubernetes.io/managed-by": "agora", "agora.dispatch": fuzzID}
	deadline := int64(90)
	return Want{Selected: lbl, Labels: lbl, Pod: Pod{Secret: "agora-01hfuzz", Deadline: &deadline, TokenVolume: "identity", GatewayURL: fuzzGateway,
		Init:       []Container{{Name: "fetch", Image: fuzzWorkerImage, Resources: res}},
		Containers: []Container{{Name: "worker", Image: fuzzImage, Resources: res}}}}
}

// TestCheck_Seed keeps the fuzz seed a Sandbox the check passes, so the fuzzer starts from
// what agora builds rather than only from refusals.
func TestCheck_Seed(t *testing.T) {
	b, err := os.ReadFile("testdata/fuzz/FuzzCheckSandbox/own-sandbox")
	if err != nil {
		t.Fatal(err)
	}
	_, lit, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if !ok || !strings.HasPrefix(lit, "[]byte(") || !strings.HasSuffix(lit, ")") {
		t.Fatalf("seed file is not one []byte value: %q", b)
	}
	js, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lit, "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	var sb Sandbox
	if err := json.Unmarshal([]byte(js), &sb); err != nil {
		t.Fatal(err)
	}
	if err := Check(&sb, fuzzWant()); err != nil {
		t.Fatalf("the seed's own Sandbox is refused: %v", err)
	}
	sb.Spec.PodTemplate.Spec.HostPID = true
	if err := Check(&sb, fuzzWant()); err == nil || !strings.Contains(err.Error(), "host namespace") {
		t.Fatalf("Check(seed with hostPID) = %v, want a host namespace refusal", err)
	}
}

// FuzzCheckSandbox feeds Check Sandboxes as the apiserver's JSON could hold them (an editor
// of Sandboxes writes them; agora adopts only what passes): it never panics, and what passes
// has no Service, only emptyDir volumes, agora's two containers with the target's images, and
// no host namespace. The seed corpus holds the provider's own Sandbox.
func FuzzCheckSandbox(f *testing.F) {
	f.Add([]byte(`{"spec":{"service":false,"podTemplate":{"metadata":{},"spec":{"hostNetwork":true}}}}`))
	f.Add([]byte(`{"spec":{"podTemplate":{"spec":{"containers":[{"name":"worker","securityContext":{}}]}}}}`))
	want := fuzzWant()
	f.Fuzz(func(t *testing.T, b []byte) {
		var sb Sandbox
		if json.Unmarshal(b, &sb) != nil {
			return
		}
		if Check(&sb, want) != nil {
			return
		}
		pod := sb.Spec.PodTemplate.Spec
		if sb.Spec.Service == nil || *sb.Spec.Service || pod.HostNetwork || pod.HostPID || pod.HostIPC ||
			len(pod.Containers) != 1 || pod.Containers[0].Image != fuzzImage ||
			len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != fuzzWorkerImage {
			t.Fatalf("Check passed a weakened sandbox: %s", b)
		}
		for _, v := range pod.Volumes {
			if v.EmptyDir == nil {
				t.Fatalf("Check passed volume %q that is not an emptyDir", v.Name)
			}
		}
	})
}
