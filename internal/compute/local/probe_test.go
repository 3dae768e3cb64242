package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

func TestProvider_Probe(t *testing.T) {
	requireBwrap(t)
	var runAs *compute.HostUser
	if os.Geteuid() == 0 {
		runAs = testRunAs
	}
	iso, err := newProvider(t, Options{}).Probe(t.Context(), runAs)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if runAs != nil && !strings.Contains(iso, "+runas") {
		t.Errorf("isolation %q, want +runas", iso)
	}

	p := newProvider(t, Options{BwrapPath: "/nonexistent/bwrap"})
	if _, err := p.Probe(t.Context(), nil); !errors.Is(err, ErrNoSandbox) {
		t.Errorf("Probe without bwrap = %v, want ErrNoSandbox", err)
	}
}

func TestProbeCgroup(t *testing.T) {
	got := ProbeCgroup()
	if got.Parent == "" {
		if got.Writable || len(got.Delegated) > 0 {
			t.Errorf("no cgroup v2 parent, yet %+v", got)
		}
		return
	}
	if !filepath.IsAbs(got.Parent) {
		t.Errorf("parent %q is not absolute", got.Parent)
	}
	if fi, err := os.Stat(got.Parent); err != nil || !fi.IsDir() {
		t.Errorf("parent %q: %v", got.Parent, err)
	}
}
