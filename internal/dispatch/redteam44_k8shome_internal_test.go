package dispatch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/home"
)

// The home's Kubernetes identity is its audit key's text. Replicas get audit.pub
// through other hands (the keys Secret of deploy/kubernetes/ha, a copy edited elsewhere), so the
// same key with other line endings or surrounding blanks must be the same home, or a standby
// neither adopts nor sweeps the dead leader's slots; and a key of another name (another home's
// verifier key text) must not be. Held: TrimSpace of the text.
func TestRedTeam44_K8sHomeKeyTextVariants(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "agora")
	initHome(t, dir)
	d := &Dispatcher{StateDir: filepath.Join(dir, "dispatches"), testOnlyHostname: "host-a"}
	want := homesOf(t, d).current
	raw, err := os.ReadFile(filepath.Join(dir, home.AuditPubFile))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))
	write := func(text string) {
		if err := os.WriteFile(filepath.Join(dir, home.AuditPubFile), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{
		"CRLF":              key + "\r\n",
		"no newline":        key,
		"blank lines":       "\n" + key + "\n\n",
		"leading blanks":    "  \t" + key + "\n",
		"trailing blanks":   key + " \t\n",
		"CRLF, blank lines": "\r\n" + key + "\r\n\r\n",
	} {
		write(text)
		if got := homesOf(t, d).current; got != want {
			t.Errorf("audit.pub with %s: identity %q, want the home's %q", name, got, want)
		}
	}
	// The key's name is part of its text: another home's key of the same bytes but another
	// name is not this home (agora never makes one; the hash tells them apart anyway).
	name, rest, ok := strings.Cut(key, "+")
	if !ok {
		t.Fatalf("audit.pub %q: not a note verifier key", key)
	}
	write(name + "x+" + rest + "\n")
	if got := homesOf(t, d).current; got == want {
		t.Errorf("a key of another name: the same identity %q", got)
	}
}
