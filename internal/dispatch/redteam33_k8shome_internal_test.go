package dispatch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/home"
)

// Label-only sweeps in a namespace two homes share. A home's
// slots carry agora.home, and each home's sweep deletes the Jobs, Secrets and NetworkPolicies
// of its label's slots that its own slot store does not hold. The label was a hash of the host
// name and AGORA_HOME's path only: two homes at one path on hosts of one name (containers run
// with the host's network and so its name, cloned machines, the default ~/.agora as root) have
// one label and each sweep deleted the other's waiting slots. The label now also hashes the
// home's own audit key (keys/audit.pub, random per home, made by agora init).
func TestRedTeam33_K8sHomeTellsHomesAtOnePathApart(t *testing.T) {
	if k8sHomeKeyFile != home.AuditPubFile {
		t.Fatalf("k8sHomeKeyFile %q is not home.AuditPubFile %q", k8sHomeKeyFile, home.AuditPubFile)
	}
	dir := filepath.Join(t.TempDir(), "agora")
	label := func() string {
		if _, err := home.Init(t.Context(), dir, nil); err != nil {
			t.Fatal(err)
		}
		a, b := homeOf(t, &Dispatcher{StateDir: filepath.Join(dir, "dispatches")}), homeOf(t, &Dispatcher{StateDir: filepath.Join(dir, "dispatches")})
		if a != b || len(a) != 20 {
			t.Fatalf("one home's label: %q then %q", a, b)
		}
		return a
	}
	first := label()
	// Another home at the same path on a host of the same name (here: the same host, the first
	// home moved away).
	if err := os.Rename(dir, dir+".first"); err != nil {
		t.Fatal(err)
	}
	if second := label(); second == first {
		t.Errorf("two homes at %s on one host name share the slot label %s: each one's sweep deletes the other's slots", dir, first)
	}
}
