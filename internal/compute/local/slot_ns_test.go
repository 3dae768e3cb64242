package local

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSlot_HoldsItsSandboxNamespaceUntilTeardown: a slot holds its sandbox's mount
// namespace (holdNamespace: so the worker's exit does not take it down first), that
// namespace and not the host's, and lets it go with the slot, claimed or discarded. The
// attack: a holder that kept a dispatch's sandbox mounts (its workspace, its out directory)
// alive past the slot's teardown, one slot after another.
func TestSlot_HoldsItsSandboxNamespaceUntilTeardown(t *testing.T) {
	requireSlots(t)
	p := newProvider(t, Options{})
	for name, prestart := range map[string]bool{"held": false, "prestarted": true} {
		t.Run(name, func(t *testing.T) {
			for _, claim := range []bool{true, false} {
				slot, spec, out := outSlot(t, p, prestart, false)
				if slot.ns == nil {
					t.Fatal("the slot holds no namespace")
				}
				ns := heldNamespace(t, slot)
				if host, _ := os.Readlink("/proc/self/ns/mnt"); ns == host {
					t.Fatalf("the slot holds the host's mount namespace %s", ns)
				}
				if sandbox, err := os.Readlink("/proc/" + strconv.Itoa(slot.h.sandboxPID) + "/ns/mnt"); err != nil || ns != sandbox {
					t.Fatalf("the slot holds %s, its sandbox is in %s (%v)", ns, sandbox, err)
				}
				if claim {
					h, err := p.StartInSlot(t.Context(), slot, spec)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := h.Wait(); err != nil {
						t.Fatal(err)
					}
					if b, _ := os.ReadFile(filepath.Join(out, "y")); string(b) != "ran\n" {
						t.Fatalf("the claim's command wrote %q", b)
					}
				} else {
					slot.Discard()
				}
				if fd := fdLinkingTo(t, ns); fd != "" {
					t.Errorf("claimed %v: descriptor %s still holds the sandbox's namespace %s after the slot's teardown", claim, fd, ns)
				}
			}
		})
	}
}

// heldNamespace is what the slot's namespace descriptor names ("mnt:[INODE]").
func heldNamespace(t *testing.T, slot *Slot) string {
	t.Helper()
	ns, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(slot.ns.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// fdLinkingTo names a descriptor of this process that links to target, "" for none.
func fdLinkingTo(t *testing.T, target string) string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && l == target {
			return e.Name()
		}
	}
	return ""
}
