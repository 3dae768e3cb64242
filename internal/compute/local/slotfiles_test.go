package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute"
)

// TestSlot_ClaimFileComesAtClaim: a read-only bind at a claim file place outside the claim
// root counts in the shape by its place, not its source: two specs with their own sources fit
// one slot, and the sandbox finds the claiming spec's file there, read-only. Before the claim
// the slot's file is empty (the template's source never reaches a slot), and a claim whose
// source is a symlink (to a host file the spec should not read) is refused.
func TestSlot_ClaimFileComesAtClaim(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	const place = "/etc/agora-claimfile-test.crt"
	o.ClaimFiles = []string{place}
	src := func(body string) string {
		f := filepath.Join(t.TempDir(), "trust.crt")
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	spec := func(s string, script string) compute.Spec {
		return compute.Spec{ID: "cf", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"},
			Binds: []compute.Bind{{Src: s, Dst: place}}}
	}
	script := `cat ` + place + `; echo; echo x >> ` + place + ` 2>/dev/null && echo write=ok || echo write=refused`
	tmpl := spec(src("TEMPLATE-TRUST"), script)
	claim := spec(src("CLAIM-TRUST"), script)
	if compute.SlotShape(tmpl, o) != compute.SlotShape(claim, o) {
		t.Fatal("two specs differing by their claim file's source have two shapes")
	}
	if w := spec(src("x"), script); compute.SlotShape(func() compute.Spec { w.Binds[0].Writable = true; return w }(), o) == compute.SlotShape(tmpl, o) {
		t.Fatal("a writable bind at a claim file place has a read-only one's shape")
	}
	slot := newSlot(t, p, tmpl, o)
	if b, err := os.ReadFile(slot.files[place]); err != nil || len(b) != 0 {
		t.Fatalf("the slot's claim file before the claim: %q, %v; want empty", b, err)
	}
	r := runInSlot(t, p, slot, claim)
	if r.exit.Code != 0 || r.stdout != "CLAIM-TRUST\nwrite=refused\n" {
		t.Fatalf("in the claimed slot: exit %d, stdout %q, stderr %q", r.exit.Code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "TEMPLATE") {
		t.Fatal("the template's file reached the claim")
	}

	secret := src("HOST-SECRET")
	link := filepath.Join(t.TempDir(), "link.crt")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	slot = newSlot(t, p, tmpl, o)
	if _, err := p.StartInSlot(t.Context(), slot, spec(link, script)); err == nil {
		t.Fatal("a claim whose claim file is a symlink was started")
	}
}
