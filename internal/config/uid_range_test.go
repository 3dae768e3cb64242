package config

import "testing"

// TestUIDFor: a dispatch's uid is in its target's range, fixed by its id, and ids spread.
func TestUIDFor(t *testing.T) {
	base := UID(DefaultSandboxUID)
	first, last := base.Range()
	if first != DefaultSandboxUID || last != DefaultSandboxUID+SandboxUIDs-1 {
		t.Fatalf("range %d-%d", first, last)
	}
	seen := map[uint32]bool{}
	for _, id := range []string{"01M81AWM9TBMTHQ8CA1G5S8DHH", "01M81AWM9TBRKMS0QGT65EZG9Z", "01M81AWMJ51GWYW86WB2Y9E56S", "a", "b"} {
		u := base.For(id)
		if u < first || u > last || u != base.For(id) {
			t.Errorf("For(%q) = %d, outside %d-%d or not stable", id, u, first, last)
		}
		seen[u] = true
	}
	if len(seen) < 4 {
		t.Errorf("five ids got %d uids", len(seen))
	}
	// Near the top the range is cut below 2^31.
	if f, l := UID(maxUID - 10).Range(); l != maxUID || f != maxUID-10 || UID(maxUID-10).For("x") > maxUID {
		t.Errorf("top range %d-%d", f, l)
	}
}
