package kubernetes

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// wireRequest is what a client sent, as the API server sees it.
type wireRequest struct {
	Method, Path, Query, ContentType, Accept string
	Body                                     string
}

// recordingServer answers every request with an object of the kind the path names (as JSON)
// and records the request.
type recordingServer struct {
	mu   sync.Mutex
	reqs []wireRequest
}

func (s *recordingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, wireRequest{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), string(body)})
	s.mu.Unlock()
	kind, apiVersion := "Status", "v1"
	for _, k := range []struct{ seg, kind, apiVersion string }{
		{"/jobs", "Job", "batch/v1"}, {"/networkpolicies", "NetworkPolicy", "networking.k8s.io/v1"},
		{"/secrets", "Secret", "v1"}, {"/pods", "Pod", "v1"}, {"/nodes", "Node", "v1"},
	} {
		if strings.Contains(r.URL.Path, k.seg) {
			kind, apiVersion = k.kind, k.apiVersion
		}
	}
	switch path.Base(r.URL.Path) {
	case "jobs", "networkpolicies", "secrets", "pods", "nodes":
		kind += "List" // a collection
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"name":"x","uid":"u1"}}`, kind, apiVersion)
}

func (s *recordingServer) take() []wireRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.reqs
	s.reqs = nil
	return out
}

// TestRESTCluster_SameWireAsClientset runs every call the provider makes through its own
// client (three groups, its own small scheme) and through client-go's generated clientset,
// and compares what reaches the server: method, path, query, content type, accept and body.
// The provider does not link the clientset (its scheme's init is costly); what it sends
// must be what the clientset would send.
func TestRESTCluster_SameWireAsClientset(t *testing.T) {
	srv := &recordingServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cfg := &rest.Config{Host: ts.URL, UserAgent: "agora", QPS: -1}
	own, err := newRESTCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ref := clientsetAPI(cs)
	ctx := t.Context()
	ttl := int64(7)
	bg := metav1.DeletePropagationBackground
	uid := types.UID("u1")
	list := metav1.ListOptions{LabelSelector: "agora.dispatch=x", FieldSelector: "metadata.name=x", ResourceVersion: "5", TimeoutSeconds: &ttl}
	del := metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}}
	patch := []byte(`{"metadata":{"ownerReferences":[]}}`)
	calls := map[string]func(c clusterAPI) error{
		"job get": func(c clusterAPI) error {
			_, err := c.BatchV1().Jobs("agents").Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"job list":   func(c clusterAPI) error { _, err := c.BatchV1().Jobs("agents").List(ctx, list); return err },
		"job delete": func(c clusterAPI) error { return c.BatchV1().Jobs("agents").Delete(ctx, "x", del) },
		"job create": func(c clusterAPI) error {
			_, err := c.BatchV1().Jobs("agents").Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"}}}, metav1.CreateOptions{FieldManager: "agora"})
			return err
		},
		"job watch": func(c clusterAPI) error {
			w, err := c.BatchV1().Jobs("agents").Watch(ctx, list)
			if err == nil {
				w.Stop()
			}
			return err
		},
		"secret create": func(c clusterAPI) error {
			_, err := c.CoreV1().Secrets("agents").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Data: map[string][]byte{"token": []byte("t")}}, metav1.CreateOptions{})
			return err
		},
		"secret patch": func(c clusterAPI) error {
			_, err := c.CoreV1().Secrets("agents").Patch(ctx, "x", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		"secret delete": func(c clusterAPI) error { return c.CoreV1().Secrets("agents").Delete(ctx, "x", metav1.DeleteOptions{}) },
		"pod list":      func(c clusterAPI) error { _, err := c.CoreV1().Pods("agents").List(ctx, list); return err },
		"pod logs": func(c clusterAPI) error {
			lines := int64(20)
			_, err := c.CoreV1().Pods("agents").GetLogs("x", &corev1.PodLogOptions{Container: "agent", TailLines: &lines}).DoRaw(ctx)
			return err
		},
		"node get": func(c clusterAPI) error { _, err := c.CoreV1().Nodes().Get(ctx, "x", metav1.GetOptions{}); return err },
		"policy create": func(c clusterAPI) error {
			_, err := c.NetworkingV1().NetworkPolicies("agents").Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
			return err
		},
		"policy list": func(c clusterAPI) error {
			_, err := c.NetworkingV1().NetworkPolicies("agents").List(ctx, metav1.ListOptions{LabelSelector: "a=b"})
			return err
		},
		"policy patch": func(c clusterAPI) error {
			_, err := c.NetworkingV1().NetworkPolicies("agents").Patch(ctx, "x", types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		},
		"policy delete": func(c clusterAPI) error { return c.NetworkingV1().NetworkPolicies("agents").Delete(ctx, "x", del) },
	}
	for name, call := range calls {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			if err := call(ref); err != nil && !strings.Contains(name, "watch") {
				t.Fatalf("clientset: %v", err)
			}
			want := srv.take()
			if err := call(own); err != nil && !strings.Contains(name, "watch") {
				t.Fatalf("own client: %v", err)
			}
			got := srv.take()
			if len(want) != 1 {
				t.Fatalf("clientset sent %d requests: %v", len(want), want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the provider's client sends something else than client-go's clientset (-clientset +own):\n%s", diff)
			}
		})
	}
}
