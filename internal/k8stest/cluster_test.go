package k8stest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest"
)

func TestMain(m *testing.M) { k8stest.Main(m) }

// image is a digest-pinned reference no registry serves: with imagePullPolicy Never nothing
// ever pulls it, and kwok runs no container.
const image = "agora.invalid/worker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// hardenedPodSpec is the pod agora's Kubernetes provider is meant to create: no service-account
// token, non-root, read-only root, no capabilities, no privilege escalation, the runtime's
// seccomp profile, no image pull.
func hardenedPodSpec() map[string]any {
	return map[string]any{
		"restartPolicy":                "Never",
		"automountServiceAccountToken": false,
		"enableServiceLinks":           false,
		"securityContext": map[string]any{
			"runAsNonRoot": true, "runAsUser": 65534, "runAsGroup": 65534,
			"seccompProfile": map[string]any{"type": "RuntimeDefault"},
		},
		"containers": []any{map[string]any{
			"name": "worker", "image": image, "imagePullPolicy": "Never",
			"command": []string{"/agora", "worker"},
			"securityContext": map[string]any{
				"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
				"capabilities":   map[string]any{"drop": []string{"ALL"}},
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
			},
			"resources": map[string]any{
				"requests": map[string]string{"cpu": "100m", "memory": "64Mi"},
				"limits":   map[string]string{"cpu": "1", "memory": "256Mi"},
			},
		}},
	}
}

func job(name string, labels, annotations map[string]string, podSpec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"backoffLimit": 0,
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels, "annotations": annotations},
				"spec":     podSpec,
			},
		},
	}
}

// jobCondition returns the status of the Job's condition of type typ ("" when absent).
func jobCondition(obj map[string]any, typ string) string {
	status, _ := obj["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// waitJob waits until the Job has a terminal condition and returns which ("Complete" or
// "Failed").
func waitJob(t *testing.T, c *k8stest.Cluster, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var end string
	err := c.Wait(ctx, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs/"+name, func(obj map[string]any) (bool, error) {
		for _, typ := range []string{"Complete", "Failed"} {
			if jobCondition(obj, typ) == "True" {
				end = typ
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("job %s: %v\ncontroller-manager log:\n%s\nkwok log:\n%s", name, err, c.Log("kube-controller-manager"), c.Log("kwok"))
	}
	return end
}

type podList struct {
	Items []struct {
		Metadata struct{ Name string }
		Spec     struct {
			NodeName                     string
			AutomountServiceAccountToken *bool
			Containers                   []struct {
				SecurityContext struct {
					ReadOnlyRootFilesystem *bool
					Capabilities           struct{ Drop []string }
				}
			}
		}
		Status struct {
			Phase             string
			ContainerStatuses []struct {
				State struct {
					Terminated *struct{ ExitCode int }
				}
			}
		}
	}
}

func jobPods(t *testing.T, c *k8stest.Cluster, name string) podList {
	t.Helper()
	var pods podList
	if err := c.Do(t.Context(), http.MethodGet, "/api/v1/namespaces/"+c.Namespace+"/pods?labelSelector=batch.kubernetes.io/job-name%3D"+name, nil, &pods); err != nil {
		t.Fatal(err)
	}
	return pods
}

func TestHardenedJobCompletes(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	if err := c.Do(t.Context(), http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
		job("hardened", nil, nil, hardenedPodSpec()), nil); err != nil {
		t.Fatalf("a hardened Job was refused in a restricted namespace: %v", err)
	}
	if end := waitJob(t, c, "hardened"); end != "Complete" {
		t.Fatalf("job ended %s, want Complete", end)
	}
	pods := jobPods(t, c, "hardened")
	if len(pods.Items) != 1 {
		t.Fatalf("job has %d pods, want 1", len(pods.Items))
	}
	p := pods.Items[0]
	if p.Status.Phase != "Succeeded" || p.Spec.NodeName != c.Node {
		t.Errorf("pod %s: phase %q on node %q, want Succeeded on %q", p.Metadata.Name, p.Status.Phase, p.Spec.NodeName, c.Node)
	}
	// Admission kept the hardening (no mutating webhook or default undid it).
	sc := p.Spec.Containers[0].SecurityContext
	if p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || fmt.Sprint(sc.Capabilities.Drop) != "[ALL]" {
		t.Errorf("pod %s lost its hardening: %+v", p.Metadata.Name, p.Spec)
	}
}

func TestJobFailsWithExitCode(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	labels := map[string]string{k8stest.FailLabel: "true"}
	annotations := map[string]string{
		k8stest.FailExitCodeAnnotation: "3", k8stest.FailDelayAnnotation: "0s", k8stest.FailJitterAnnotation: "0s",
	}
	if err := c.Do(t.Context(), http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
		job("exits-3", labels, annotations, hardenedPodSpec()), nil); err != nil {
		t.Fatal(err)
	}
	if end := waitJob(t, c, "exits-3"); end != "Failed" {
		t.Fatalf("job ended %s, want Failed", end)
	}
	pods := jobPods(t, c, "exits-3")
	if len(pods.Items) != 1 {
		t.Fatalf("job has %d pods, want 1 (backoffLimit 0)", len(pods.Items))
	}
	st := pods.Items[0].Status
	if st.Phase != "Failed" || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil ||
		st.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Fatalf("pod status %+v, want Failed with exit code 3", st)
	}
}

// TestPodSecurityRefuses is the attack on the namespace: each pod below would weaken the
// sandbox, and Pod Security "restricted" must refuse it at admission, naming the rule.
func TestPodSecurityRefuses(t *testing.T) {
	c := k8stest.Shared(t, k8stest.Options{})
	container := func(spec map[string]any) map[string]any {
		return spec["containers"].([]any)[0].(map[string]any)
	}
	containerSC := func(spec map[string]any) map[string]any {
		return container(spec)["securityContext"].(map[string]any)
	}
	for _, tc := range []struct {
		name   string
		mutate func(spec map[string]any)
		want   string // in the refusal
	}{
		{"privileged", func(s map[string]any) {
			containerSC(s)["privileged"] = true
			delete(containerSC(s), "allowPrivilegeEscalation") // both at once is invalid, not a policy matter
		}, "privileged"},
		{"host-path", func(s map[string]any) {
			s["volumes"] = []any{map[string]any{"name": "root", "hostPath": map[string]any{"path": "/"}}}
		}, "hostPath"},
		{"host-network", func(s map[string]any) { s["hostNetwork"] = true }, "host namespaces"},
		{"add-sys-admin", func(s map[string]any) {
			containerSC(s)["capabilities"] = map[string]any{"add": []string{"SYS_ADMIN"}}
		}, "capabilities"},
		{"root", func(s map[string]any) {
			delete(s["securityContext"].(map[string]any), "runAsNonRoot")
			delete(s["securityContext"].(map[string]any), "runAsUser")
			delete(containerSC(s), "runAsNonRoot")
		}, "runAsNonRoot"},
		{"escalation", func(s map[string]any) { containerSC(s)["allowPrivilegeEscalation"] = true }, "allowPrivilegeEscalation"},
		{"unconfined-seccomp", func(s map[string]any) {
			containerSC(s)["seccompProfile"] = map[string]any{"type": "Unconfined"}
		}, "seccompProfile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := hardenedPodSpec()
			tc.mutate(spec)
			pod := map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "attack-" + tc.name},
				"spec":     spec,
			}
			err := c.Do(t.Context(), http.MethodPost, "/api/v1/namespaces/"+c.Namespace+"/pods", pod, nil)
			var se *k8stest.StatusError
			if err == nil {
				t.Fatalf("pod %s was admitted in a namespace enforcing restricted", tc.name)
			}
			if !errors.As(err, &se) || se.Code != http.StatusForbidden ||
				!strings.Contains(se.Message, "violates PodSecurity") || !strings.Contains(se.Message, tc.want) {
				t.Fatalf("refusal %v; want 403 naming PodSecurity and %q", err, tc.want)
			}
		})
	}

	// agora creates Jobs, not pods: a Job of a privileged pod is accepted (Pod Security only
	// warns on templates) but its pod is never created; the Job controller reports why.
	spec := hardenedPodSpec()
	containerSC(spec)["privileged"] = true
	delete(containerSC(spec), "allowPrivilegeEscalation")
	if err := c.Do(t.Context(), http.MethodPost, "/apis/batch/v1/namespaces/"+c.Namespace+"/jobs",
		job("privileged", nil, nil, spec), nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	err := c.Wait(ctx, "/api/v1/namespaces/"+c.Namespace+"/events?fieldSelector=involvedObject.name%3Dprivileged", func(obj map[string]any) (bool, error) {
		items, _ := obj["items"].([]any)
		for _, it := range items {
			ev, _ := it.(map[string]any)
			if msg, _ := ev["message"].(string); ev["reason"] == "FailedCreate" && strings.Contains(msg, "violates PodSecurity") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedCreate event naming PodSecurity for the privileged Job: %v", err)
	}
	if pods := jobPods(t, c, "privileged"); len(pods.Items) != 0 {
		t.Fatalf("the privileged Job has %d pods, want none", len(pods.Items))
	}
}
