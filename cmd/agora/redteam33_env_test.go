package main

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestRedTeam33_EnvDigestNamesWhatADispatchReads: serve takes a hand-off only from a CLI whose
// environment digest equals its own, so every variable that changes how a dispatch runs in
// the CLI must change the digest the front sends: where agent CLIs are found (PATH), the
// engine (DOCKER_HOST), the worker (AGORA_WORKER_BINARY), the proxies Go's HTTP clients use
// for a docker engine over TCP and a Kubernetes API server (HTTP_PROXY, HTTPS_PROXY,
// NO_PROXY, either case), the CAs every TLS connection trusts (SSL_CERT_FILE, SSL_CERT_DIR:
// the egress proxy's upstreams, callbacks, the API server) and the in-cluster API server
// (KUBERNETES_SERVICE_HOST/PORT). Failed before for the proxies, the CAs and the in-cluster
// variables: a CLI with HTTPS_PROXY or SSL_CERT_FILE of its own had its dispatch run by a
// serve without them.
func TestRedTeam33_EnvDigestNamesWhatADispatchReads(t *testing.T) {
	var mu sync.Mutex
	var digest string
	fs := newFakeServe(t, func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Env string `json:"env"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode the request: %v", err)
		}
		mu.Lock()
		digest = req.Env
		mu.Unlock()
		declines(w, r)
	})
	base := fs.env()
	// None of the variables under test is inherited.
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "DOCKER_HOST", "AGORA_WORKER_BINARY"} {
		base = dropEnv(base, k)
	}
	sent := func(env []string) string {
		t.Helper()
		mu.Lock()
		digest = ""
		mu.Unlock()
		front(t, env, "dispatch", "run", "--subagent", "x")
		mu.Lock()
		defer mu.Unlock()
		if digest == "" {
			t.Fatal("the front did not ask serve")
		}
		return digest
	}
	want := sent(base)
	for _, kv := range []string{
		"PATH=/opt/elsewhere:" + os.Getenv("PATH"),
		"DOCKER_HOST=tcp://127.0.0.1:2375",
		"AGORA_WORKER_BINARY=/opt/agora-worker",
		"HTTP_PROXY=http://proxy:3128", "HTTPS_PROXY=http://proxy:3128", "NO_PROXY=*",
		"http_proxy=http://proxy:3128", "https_proxy=http://proxy:3128", "no_proxy=*",
		"SSL_CERT_FILE=/etc/corp-ca.pem", "SSL_CERT_DIR=/etc/corp-certs",
		"KUBERNETES_SERVICE_HOST=10.0.0.1", "KUBERNETES_SERVICE_PORT=443",
	} {
		k, _, _ := strings.Cut(kv, "=")
		env := append(dropEnv(base, k), kv)
		if got := sent(env); got == want {
			t.Errorf("with %s the front sends serve the digest of an environment without it", kv)
		}
	}
	if got := sent(append(base, "LANG=C.UTF-8", "TERM=dumb")); got != want {
		t.Errorf("a variable no dispatch reads changed the digest: serve would decline for nothing")
	}
}

func dropEnv(env []string, key string) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k != key {
			out = append(out, kv)
		}
	}
	return out
}
