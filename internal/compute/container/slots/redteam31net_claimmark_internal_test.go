package slots

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agora-dev/agora/internal/netgw"
)

// TestRedTeam31_ClaimMarkHeldOnlyWhileLiving is the attack on the claim marks themselves (claim
// marks spare a living holder's claimed docker slots from another holder's sweep): a mark is
// live only while its process holds it, so a killed holder's claimed slot (its mark left
// behind, unlocked) is swept as before; a mark cannot be taken twice; a slot that stands
// or is marked is live, anything else is not.
func TestRedTeam31_ClaimMarkHeldOnlyWhileLiving(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gateway")
	g := &gateway{slots: &netgw.Slots{Dir: filepath.Join(dir, "slots")}}
	const held, stale, none = "s00000000000000000000000000000001", "s00000000000000000000000000000002", "s00000000000000000000000000000003"
	release, err := g.holdClaim(held)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.holdClaim(held); err == nil {
		t.Error("a held claim mark was taken a second time")
	}
	// What a holder killed with -9 leaves: the mark's file, no lock on it.
	if err := os.WriteFile(filepath.Join(g.claimedDir(), stale), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !g.live(held) || g.live(stale) || g.live(none) || g.live("../../etc") {
		t.Errorf("live: held %v stale %v none %v traversal %v; want only the held one", g.live(held), g.live(stale), g.live(none), g.live("../../etc"))
	}
	g.sweepClaimMarks()
	if _, err := os.Lstat(filepath.Join(g.claimedDir(), stale)); !os.IsNotExist(err) {
		t.Errorf("the stale mark survived the sweep: %v", err)
	}
	if !g.live(held) {
		t.Error("the sweep removed a held mark")
	}
	release()
	release()
	if g.live(held) {
		t.Error("a released mark is still live")
	}
}
