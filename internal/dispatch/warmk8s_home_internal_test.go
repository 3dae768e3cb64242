package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/home"
)

// replicaOf is a Dispatcher of home dir as another replica runs it: the home's audit key
// restored into a home at another path (the keys Secret of deploy/kubernetes/ha), on host.
func replicaOf(t *testing.T, dir, host string) *Dispatcher {
	t.Helper()
	other := filepath.Join(t.TempDir(), "restored")
	if err := os.MkdirAll(filepath.Join(other, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, home.AuditPubFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, home.AuditPubFile), key, 0o600); err != nil {
		t.Fatal(err)
	}
	return &Dispatcher{StateDir: filepath.Join(other, "dispatches"), testOnlyHostname: host}
}

// initHome makes a home (agora init's keys) at dir.
func initHome(t *testing.T, dir string) {
	t.Helper()
	if _, err := home.Init(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
}

// A home's identity on its Kubernetes objects is its audit key's: every replica of
// one home (another pod's host name, the home restored at another path) has the same, so the
// standby that takes over adopts and sweeps the dead leader's slots; another home (even at
// the same path on a host of the same name) has another. The identity an older
// agora computed (host, path and the key file's bytes) is kept as the former one, exactly
// as it was computed, so an upgraded agora still sweeps and adopts the slots it made.
func TestK8sHome_OneIdentityForEveryReplicaOfAHome(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agora")
	initHome(t, dir)
	a := &Dispatcher{StateDir: filepath.Join(dir, "dispatches"), testOnlyHostname: "host-a"}
	b := replicaOf(t, dir, "host-b")
	ida, idb := homesOf(t, a), homesOf(t, b)
	if ida.current != idb.current {
		t.Errorf("two replicas of one home on host-a and host-b: identities %q and %q; the standby would neither adopt nor sweep the leader's slots", ida.current, idb.current)
	}
	if len(ida.current) != 20 || strings.Trim(ida.current, "0123456789abcdef") != "" {
		t.Errorf("identity %q: want 20 hex digits (a label value)", ida.current)
	}

	// The former identity is the older agora's formula, byte for byte.
	key, err := os.ReadFile(filepath.Join(dir, home.AuditPubFile))
	if err != nil {
		t.Fatal(err)
	}
	old := sha256.Sum256([]byte("host-a\x00" + dir + "\x00" + string(key)))
	if want := hex.EncodeToString(old[:10]); !slices.Equal(ida.former, []string{want}) {
		t.Errorf("former identities %q, want the host+path+key one %q", ida.former, want)
	}
	if slices.Equal(ida.former, idb.former) || slices.Contains(ida.former, ida.current) {
		t.Errorf("former identities %q (host-a) and %q (host-b), current %q: the former is per host and path, and not the current", ida.former, idb.former, ida.current)
	}

	// The key's text, however its file's lines end.
	if err := os.WriteFile(filepath.Join(dir, home.AuditPubFile), []byte(strings.TrimSpace(string(key))), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := homeOf(t, a); got != ida.current {
		t.Errorf("audit.pub without its newline: identity %q, want %q", got, ida.current)
	}

	// Another home at the same path on a host of the same name.
	if err := os.Rename(dir, dir+".first"); err != nil {
		t.Fatal(err)
	}
	initHome(t, dir)
	if other := homesOf(t, a); other.current == ida.current || slices.Contains(ida.former, other.current) || slices.Equal(other.former, ida.former) {
		t.Errorf("another home at %s on host-a: identities %+v, the first home's %+v: each would sweep or adopt the other's slots", dir, other, ida)
	}

	// A home without an audit key keeps the host and path, as before.
	bare := &Dispatcher{StateDir: filepath.Join(t.TempDir(), "bare", "dispatches"), testOnlyHostname: "host-a"}
	ids := homesOf(t, bare)
	if want := hostPathK8sHome("host-a", filepath.Dir(bare.StateDir), nil); ids.current != want || len(ids.former) != 0 {
		t.Errorf("a home without a key: %+v, want current %q and no former", ids, want)
	}
}

// homesOf is d.k8sHomes(), which must not fail here.
func homesOf(t testing.TB, d *Dispatcher) k8sHomeIDs {
	t.Helper()
	ids, err := d.k8sHomes()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// homeOf is d.k8sHome(), which must not fail here.
func homeOf(t testing.TB, d *Dispatcher) string {
	t.Helper()
	return homesOf(t, d).current
}
