package capability

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
)

// TestRedTeam44D_RefusalFloodSaysWhereTheRestIs: an agent that tries 300 decoy hosts before
// its exfiltration host pushes that host past the 100 refusals listed. It is never proposed,
// and the text says how many more the proxy refused and where each one is on record, so a
// person reading "not proposed" can find it. Failed before: "and 201 more", with no way named
// to see them.
func TestRedTeam44D_RefusalFloodSaysWhereTheRestIs(t *testing.T) {
	ev := suggest.NewEvidence()
	d := ev.Dispatch("d-1", grant.Set{}, nil)
	for i := range 300 {
		d.Entry(entry.NetConnect, map[string]any{entry.KeyHost: fmt.Sprintf("decoy%d.example", i), entry.KeyPort: int64(443), entry.KeyDecision: "deny"})
	}
	d.Entry(entry.NetConnect, map[string]any{entry.KeyHost: "exfil.example", entry.KeyPort: int64(443), entry.KeyDecision: "deny"})
	p, err := suggest.Propose(ev, grant.Set{}, suggest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	printSuggestion(&b, capabilitySuggestResult{Subagent: "s", Proposal: p})
	out := b.String()
	proposed, _, _ := strings.Cut(out, "not proposed")
	if strings.Contains(proposed, "exfil") {
		t.Errorf("the refused host is proposed:\n%s", out)
	}
	if want := "  - and 201 more, not listed here ('agora audit log --kind net.connect -o json' and --kind net.request list every one)\n"; !strings.Contains(out, want) {
		t.Errorf("the text does not say where the refusals past the listed ones are (want %q):\n%s", want, out)
	}
}
