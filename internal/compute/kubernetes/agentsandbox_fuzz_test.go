package kubernetes

import (
	"encoding/json"
	"testing"
)

// FuzzCheckSandbox feeds checkSandbox Sandboxes as the apiserver's JSON could hold them (an
// editor of Sandboxes writes them; agora adopts only what passes): it never panics, and what
// passes has no Service, only emptyDir volumes, agora's two containers with the target's
// images, and no host namespace.
func FuzzCheckSandbox(f *testing.F) {
	p, err := newProvider(testOptions(f, &fakeExporter{}), nil)
	if err != nil {
		f.Fatal(err)
	}
	id := "01HFUZZ"
	own, err := json.Marshal(p.sandboxOf(jobInput{name: objectName(id), id: id, spec: testSpec(id), mounts: testMounts(), gateway: p.gateway}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(own)
	f.Add([]byte(`{"spec":{"service":false,"podTemplate":{"metadata":{},"spec":{"hostNetwork":true}}}}`))
	f.Add([]byte(`{"spec":{"podTemplate":{"spec":{"containers":[{"name":"worker","securityContext":{}}]}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var sb sandboxObject
		if json.Unmarshal(b, &sb) != nil {
			return
		}
		if p.checkSandbox(&sb, testSpec(id)) != nil {
			return
		}
		pod := sb.Spec.PodTemplate.Spec
		if sb.Spec.Service == nil || *sb.Spec.Service || pod.HostNetwork || pod.HostPID || pod.HostIPC ||
			len(pod.Containers) != 1 || pod.Containers[0].Image != p.opts.Image ||
			len(pod.InitContainers) != 1 || pod.InitContainers[0].Image != p.opts.WorkerImage {
			t.Fatalf("checkSandbox passed a weakened sandbox: %s", b)
		}
		for _, v := range pod.Volumes {
			if v.EmptyDir == nil {
				t.Fatalf("checkSandbox passed volume %q that is not an emptyDir", v.Name)
			}
		}
	})
}
