package container

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeEngine answers the calls New makes (the version negotiation, the image inspect, the
// version) on a unix socket, and records whether each request asked the engine to close its
// connection afterwards.
type fakeEngine struct {
	mu      sync.Mutex
	reqs    []string
	kept    []string // requests that left their connection open for reuse
	serving *http.Server
	ping    http.Header // headers set on /_ping's answer
	version string      // the component /version names
}

func (f *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r.Method+" "+r.URL.Path)
	if !r.Close {
		f.kept = append(f.kept, r.Method+" "+r.URL.Path)
	}
	f.mu.Unlock()
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/_ping"):
		for k, v := range f.ping {
			w.Header()[k] = v
		}
		w.Write([]byte("OK"))
	case strings.Contains(r.URL.Path, "/images/") && strings.HasSuffix(r.URL.Path, "/json"):
		json.NewEncoder(w).Encode(map[string]any{"Id": "sha256:" + strings.Repeat("ab", 32)})
	case strings.HasSuffix(r.URL.Path, "/version"):
		json.NewEncoder(w).Encode(map[string]any{"ApiVersion": "1.41", "Components": []map[string]any{{"Name": f.version, "Version": "4.3.1"}}})
	default:
		http.NotFound(w, r)
	}
}

func startFakeEngine(t *testing.T) (*fakeEngine, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeEngine{version: "Podman Engine"}
	f.serving = &http.Server{Handler: f}
	go f.serving.Serve(ln)
	t.Cleanup(func() { f.serving.Close() })
	return f, "unix://" + sock
}

// A provider keeps no engine connection for reuse: the client's Close closes only idle
// connections, so one that a request still held when the provider was closed (a wait, a log
// stream) would go idle afterwards and stay open, its reader goroutines with it, which goleak
// reports as a leak. Every request asks the engine to close its connection instead.
func TestNew_KeepsNoConnectionForReuse(t *testing.T) {
	f, host := startFakeEngine(t)
	p, err := New(context.Background(), Options{Host: host, Image: "agora-test@sha256:" + strings.Repeat("cd", 32)})
	if err != nil {
		t.Fatalf("New against the fake engine: %v", err)
	}
	if !p.podman {
		t.Errorf("the fake engine says it is podman; the provider did not hear it")
	}
	p.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) < 2 {
		t.Fatalf("New made %d requests (%v); want the image inspect and the engine's ping at least", len(f.reqs), f.reqs)
	}
	if len(f.kept) > 0 {
		t.Errorf("requests that kept their engine connection open for reuse: %v (of %v)", f.kept, f.reqs)
	}
}

// New tells podman from Docker by /_ping's headers, as podman 4 and Docker set them, and
// asks /version only when they do not tell: podman answers /version by looking up its
// packages' versions with dpkg or rpm (half a second a provider).
func TestNew_TellsPodmanByItsPing(t *testing.T) {
	for _, c := range []struct {
		name       string
		ping       http.Header
		version    string
		podman     bool
		askVersion bool
	}{
		{"podman's ping", http.Header{"Libpod-Api-Version": {"4.3.1"}, "Server": {"Libpod/4.3.1 (linux)"}}, "Docker Engine", true, false},
		{"docker's ping", http.Header{"Server": {"Docker/27.3.1 (linux)"}}, "Podman Engine", false, false},
		{"a ping that does not tell, podman's version", nil, "Podman Engine", true, true},
		{"a ping that does not tell, docker's version", nil, "Engine", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, host := startFakeEngine(t)
			f.ping, f.version = c.ping, c.version
			p, err := New(context.Background(), Options{Host: host, Image: "agora-test@sha256:" + strings.Repeat("cd", 32)})
			if err != nil {
				t.Fatalf("New against the fake engine: %v", err)
			}
			p.Close()
			if p.podman != c.podman {
				t.Errorf("podman = %v, want %v", p.podman, c.podman)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			asked := false
			for _, r := range f.reqs {
				asked = asked || strings.HasSuffix(r, "/version")
			}
			if asked != c.askVersion {
				t.Errorf("asked /version: %v, want %v (requests %v)", asked, c.askVersion, f.reqs)
			}
		})
	}
}
