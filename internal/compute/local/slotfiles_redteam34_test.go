package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
)

// Attacks on the warm slot's claim files: the system trust store of a proxy
// dispatch is a slot-owned file bound read-only at fill and written in place by the host at
// the claim.

const rt34Place = "/etc/agora-rt34-claimfile.crt"

func rt34Spec(src, script string) compute.Spec {
	return compute.Spec{ID: "rt34", Argv: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin:/usr/sbin:/sbin"},
		Binds: []compute.Bind{{Src: src, Dst: rt34Place}}}
}

func rt34File(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "trust.crt")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// rt34Slot fills a slot whose template runs script with a claim file at rt34Place.
func rt34Slot(t *testing.T, script string) (*Provider, compute.WarmOptions, *Slot) {
	t.Helper()
	requireSlots(t)
	p := newProvider(t, Options{})
	o := slotOpts(t)
	o.ClaimFiles = []string{rt34Place}
	return p, o, newSlot(t, p, rt34Spec(rt34File(t, "TEMPLATE"), script), o)
}

// TestRedTeam34_ClaimFileAgentCannotReplace: the claimant's agent tries every way to put a
// trust store of its own at the place (write, truncate, remove, rename over it, a bind mount
// over it): each is refused, and the host's file keeps the dispatch's bytes.
func TestRedTeam34_ClaimFileAgentCannotReplace(t *testing.T) {
	script := `P=` + rt34Place + `
echo EVIL > /tmp/evil 2>/dev/null || true
true > $P 2>/dev/null && echo truncate=ok
echo EVIL >> $P 2>/dev/null && echo append=ok
rm -f $P 2>/dev/null && echo rm=ok
mv -f /tmp/evil $P 2>/dev/null && echo mv=ok
ln -sf /tmp/evil $P 2>/dev/null && echo ln=ok
mount --bind /tmp/evil $P 2>/dev/null && echo mount=ok
umount $P 2>/dev/null && echo umount=ok
chmod 666 $P 2>/dev/null && echo chmod=ok
cat $P`
	p, _, slot := rt34Slot(t, script)
	host := slot.files[rt34Place]
	r := runInSlot(t, p, slot, rt34Spec(rt34File(t, "DISPATCH-CA"), script))
	if r.stdout != "DISPATCH-CA" {
		t.Fatalf("the agent changed its trust store: stdout %q (stderr %q)", r.stdout, r.stderr)
	}
	// The host's file (until the slot's removal, which runs once the claim ended) never took
	// the agent's bytes: read it if it still stands.
	if b, err := os.ReadFile(host); err == nil && string(b) != "DISPATCH-CA" {
		t.Fatalf("the slot's host file holds %q", b)
	}
}

// TestRedTeam34_ClaimFileSpentWithFailedClaim: a claim that fails after its trust store was
// written into the slot (here: a claim-root bind whose source is gone) spends the slot: its
// directory, the written file with it, is removed, and no later claim of it is taken.
func TestRedTeam34_ClaimFileSpentWithFailedClaim(t *testing.T) {
	p, o, slot := rt34Slot(t, "true")
	slot.Discard()
	bad := rt34Spec(rt34File(t, "FIRST-CLAIMANT-CA"), "cat "+rt34Place)
	bad.Binds = append(bad.Binds, compute.Bind{Src: filepath.Join(t.TempDir(), "gone"), Dst: "/agora/x"})
	tmplWithX := rt34Spec(rt34File(t, "T"), "cat "+rt34Place)
	tmplWithX.Binds = append(tmplWithX.Binds, compute.Bind{Src: "/nonexistent", Dst: "/agora/x"})
	slot = newSlot(t, p, tmplWithX, o)
	host := slot.files[rt34Place]
	if _, err := p.StartInSlot(t.Context(), slot, bad); err == nil {
		t.Fatal("a claim whose bind source is gone was started")
	}
	if _, err := os.Lstat(host); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed claim's trust store is left on the host at %s: %v", host, err)
	}
	if _, err := os.Lstat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the failed claim's slot directory stands: %v", err)
	}
	next := rt34Spec(rt34File(t, "SECOND"), "cat "+rt34Place)
	next.Binds = tmplWithX.Binds[1:]
	next.Binds = append([]compute.Bind{{Src: rt34File(t, "SECOND"), Dst: rt34Place}}, next.Binds...)
	if _, err := p.StartInSlot(t.Context(), slot, next); !errors.Is(err, ErrSlotClaimed) {
		t.Fatalf("a second claim of a failed slot: %v, want ErrSlotClaimed", err)
	}
}

// TestRedTeam34_ClaimFileOversizeRefused: a source over the cap (16 MiB) is refused, the slot
// spent; one at the cap is delivered whole.
func TestRedTeam34_ClaimFileOversizeRefused(t *testing.T) {
	p, o, slot := rt34Slot(t, "wc -c < "+rt34Place)
	big := filepath.Join(t.TempDir(), "big.crt")
	if err := os.WriteFile(big, make([]byte, maxClaimFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.StartInSlot(t.Context(), slot, rt34Spec(big, "wc -c < "+rt34Place)); err == nil {
		t.Fatal("a claim file source over the cap was delivered")
	}
	if _, err := os.Lstat(slot.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused claim's slot directory stands: %v", err)
	}
	if err := os.Truncate(big, maxClaimFile); err != nil {
		t.Fatal(err)
	}
	slot = newSlot(t, p, rt34Spec(rt34File(t, "T"), "wc -c < "+rt34Place), o)
	r := runInSlot(t, p, slot, rt34Spec(big, "wc -c < "+rt34Place))
	if strings.TrimSpace(r.stdout) != "16777216" {
		t.Fatalf("a source at the cap: stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestRedTeam34_ClaimFileFIFOSourceRefused: a claim whose source is a FIFO (no writer) is
// refused at once; the claim never waits for a writer, whose bytes would be the dispatch's
// trust store.
func TestRedTeam34_ClaimFileFIFOSourceRefused(t *testing.T) {
	p, _, slot := rt34Slot(t, "cat "+rt34Place)
	fifo := filepath.Join(t.TempDir(), "trust.crt")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := p.StartInSlot(t.Context(), slot, rt34Spec(fifo, "cat "+rt34Place))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a claim whose claim file source is a FIFO was started")
		}
	case <-time.After(time.Minute): // a hang guard, not a measure: the refusal is immediate
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.WriteString("PLANTED-CA")
			w.Close()
		}
		<-done
		t.Fatal("the claim blocked on its FIFO source, waiting for a writer")
	}
}

// TestRedTeam34_ClaimFileSeenAsCold: what the sandbox can learn of its trust store (mode,
// owner, size, kind, bytes, its mount's options and file system, whether it may write it)
// is the same in a claimed slot as in a cold sandbox binding the same source, for a source
// of the usual mode and one only its owner reads.
func TestRedTeam34_ClaimFileSeenAsCold(t *testing.T) {
	script := `P=` + rt34Place + `
stat -c '%a %u %g %s %F' $P
sha256sum < $P
awk -v p=$P '$5 == p { for (i = 7; $i != "-"; i++) ; print $6, $(i+1), $(i+3) }' /proc/self/mountinfo
test -w $P && echo writable || echo read-only`
	for _, mode := range []os.FileMode{0o644, 0o600} {
		p, _, slot := rt34Slot(t, script)
		src := rt34File(t, "-----BEGIN CERTIFICATE-----\nDISPATCH\n")
		if err := os.Chmod(src, mode); err != nil {
			t.Fatal(err)
		}
		spec := rt34Spec(src, script)
		cold := run(t, p, spec)
		warm := runInSlot(t, p, slot, spec)
		if cold.exit.Code != 0 || warm.stdout != cold.stdout || warm.exit.Code != cold.exit.Code {
			t.Fatalf("mode %o: cold (exit %d):\n%s\nwarm (exit %d, stderr %q):\n%s", mode, cold.exit.Code, cold.stdout, warm.exit.Code, warm.stderr, warm.stdout)
		}
	}
}
