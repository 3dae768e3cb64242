package netgw

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// FuzzParseSlot: a slot route names a valid slot id and nothing else; slot.json and a
// binder's grant decode to valid shapes or are refused, never a panic.
func FuzzParseSlot(f *testing.F) {
	id := "s0123456789abcdef0123456789abcdef"
	for _, s := range []string{
		remote.SlotRoutePrefix + id + "/claim",
		remote.SlotRoutePrefix + id + "/claim/",
		remote.SlotRoutePrefix + "../" + id + "/claim",
		`{"version":1,"slot":"` + id + `","token_sha256":"` + strings.Repeat("a", 64) + `"}`,
		`{"version":1,"slot":"` + id + `","slot":"x","token_sha256":""}`,
		`{"dispatch":"01ABC","token":"agw_x"}`,
		`{"dispatch":"01ABC","token":"agw_x","Dispatch":"01EVIL"}`,
		`{"dispatch":"../x","token":"agw_"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := parseSlotRoute(s); ok && (!remote.ValidSlotID(got) || s != remote.SlotRoutePrefix+got+"/claim") {
			t.Fatalf("route %q parsed to slot %q", s, got)
		}
		if r, err := parseSlotRecord([]byte(s)); err == nil && (!remote.ValidSlotID(r.Slot) || len(r.TokenSHA256) != 64) {
			t.Fatalf("slot.json %q accepted as %+v", s, r)
		}
		if g, err := parseSlotGrant([]byte(s)); err == nil && (!wire.ValidDispatchID(g.Dispatch) || !strings.HasPrefix(g.Token, TokenPrefix)) {
			t.Fatalf("grant %q accepted as %+v", s, g)
		}
	})
}
