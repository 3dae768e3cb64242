package k8stest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// InNewNamespace returns c seen from a namespace of t's own, made now (enforcing Pod Security
// "restricted", as Start's is) and deleted when t ends: Namespace names it and Kubeconfig's
// context defaults to it. Tests that share a cluster (Shared) and each want the whole of a
// namespace (every Job in it theirs) call it instead of starting a cluster apiece, which costs
// seconds of CPU each. The node and every cluster-wide object stay shared.
func (c *Cluster) InNewNamespace(t testing.TB) *Cluster {
	t.Helper()
	var suffix [3]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		t.Fatal(err)
	}
	name := namespaceFor(t.Name()) + "-" + hex.EncodeToString(suffix[:])
	view := &Cluster{
		Namespace: name, Server: c.Server, CAFile: c.CAFile, Node: c.Node, Dir: c.Dir,
		StartTime: c.StartTime, GVisor: c.GVisor, NetworkPolicies: c.NetworkPolicies,
		opts: c.opts, client: c.client, etcd: c.etcd, apiserver: c.apiserver, procs: c.procs,
		containerdSock: c.containerdSock,
	}
	view.stopOnce.Do(func() {}) // a view's Stop stops nothing: the cluster is its owner's
	kubeconfig, err := kubeconfigIn(c.Kubeconfig, name, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	view.Kubeconfig = kubeconfig
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := view.createNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(time.Minute, 50*time.Millisecond, "service account "+name+"/default", c.checkAlive, func() (bool, error) {
		err := view.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+name+"/serviceaccounts/default", nil, nil)
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Background: the namespace controller deletes what is in it; the next test does not
		// wait for that.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+name, nil, nil); err != nil {
			t.Logf("k8stest: delete namespace %s: %v", name, err)
		}
	})
	return view
}

// namespaceFor makes a DNS label's worth of a test's name: lower case letters, digits and
// dashes, at most 50 characters (a suffix follows).
func namespaceFor(test string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(test) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	if name == "" {
		name = "test"
	}
	return name
}

// kubeconfigIn copies an admin kubeconfig (writeKubeconfig's) into dir with its context's
// namespace set to ns.
func kubeconfigIn(src, ns, dir string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("read kubeconfig %s: %w", src, err)
	}
	ctxs, _ := cfg["contexts"].([]any)
	if len(ctxs) != 1 {
		return "", fmt.Errorf("kubeconfig %s: want one context, got %d", src, len(ctxs))
	}
	named, _ := ctxs[0].(map[string]any)
	inner, _ := named["context"].(map[string]any)
	if inner == nil {
		return "", fmt.Errorf("kubeconfig %s: a context without a body", src)
	}
	inner["namespace"] = ns
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "admin.kubeconfig")
	return path, replaceFile(path, out)
}
