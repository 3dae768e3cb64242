package selftest_test

import (
	"net"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/selftest"
)

// TestConfigWithGateway replaces a kubernetes target's gateway with the throw-away home's,
// keeping every other setting, and refuses a target agora.yaml lacks.
func TestConfigWithGateway(t *testing.T) {
	raw := []byte(`gateway:
  listen: 0.0.0.0:8443
  advertise: https://10.0.0.5:8443
targets:
  pod:
    provider: kubernetes
    namespace: agents
    gateway: https://10.0.0.5:8443
  other:
    provider: kubernetes
`)
	got, err := selftest.ConfigWithGateway(raw, "pod", "https://10.0.0.5:40001")
	if err != nil {
		t.Fatal(err)
	}
	s := string(got)
	for _, want := range []string{"gateway: https://10.0.0.5:40001", "namespace: agents", "provider: kubernetes"} {
		if !strings.Contains(s, want) {
			t.Errorf("lacks %q:\n%s", want, s)
		}
	}
	for _, not := range []string{":8443", "other", "listen"} {
		if strings.Contains(s, not) {
			t.Errorf("holds %q:\n%s", not, s)
		}
	}
	if got, err := selftest.ConfigWithGateway(raw, "other", "https://10.0.0.5:40001"); err != nil || !strings.Contains(string(got), "gateway: https://10.0.0.5:40001") {
		t.Errorf("a target without gateway: %q, %v; want the gateway added", got, err)
	}
	if _, err := selftest.ConfigWithGateway(raw, "missing", "https://10.0.0.5:40001"); err == nil {
		t.Error("a target agora.yaml lacks got a config")
	}
}

// TestPodGateway listens on gateway.listen's host (else the advertised one) and advertises
// the same free port on the advertised host.
func TestPodGateway(t *testing.T) {
	g, err := selftest.PodGateway("127.0.0.1:8443", "https://localhost:8443")
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(g.Listen)
	if err != nil || host != "127.0.0.1" || port == "8443" || port == "0" {
		t.Errorf("Listen = %q, want 127.0.0.1 and a port of its own", g.Listen)
	}
	if g.Advertise != "https://localhost:"+port {
		t.Errorf("Advertise = %q, want https://localhost:%s", g.Advertise, port)
	}
	// The port stays held until a gateway takes it over or the run closes it: another
	// process cannot take it in between.
	if ln, err := net.Listen("tcp", g.Listen); err == nil {
		ln.Close()
		t.Errorf("%s could be bound while the selftest holds it for its gateway", g.Listen)
	}
	g.Close()
	g.Close() // again: harmless
	if ln, err := net.Listen("tcp", g.Listen); err != nil {
		t.Errorf("%s after Close: %v", g.Listen, err)
	} else {
		ln.Close()
	}
	var none *selftest.Gateway
	none.Close() // a run without a gateway closes nothing
	if g, err := selftest.PodGateway("", "https://127.0.0.1:8443"); err != nil || !strings.HasPrefix(g.Listen, "127.0.0.1:") {
		t.Errorf("no listen: %+v, %v; want the advertised host", g, err)
	} else {
		g.Close()
	}
	for _, bad := range []string{"", "http://127.0.0.1:8443", "127.0.0.1:8443"} {
		if _, err := selftest.PodGateway("", bad); err == nil {
			t.Errorf("advertise %q accepted", bad)
		}
	}
}
