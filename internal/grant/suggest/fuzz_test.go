package suggest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
)

// FuzzEvidence feeds entries an agent could shape (details as the audit decodes them) to the
// evidence reader and the proposal: nothing panics, every proposal's capability.yaml reads back
// as the grant proposed, and everything shown is one line of ASCII.
func FuzzEvidence(f *testing.F) {
	f.Add("tool.would_deny", []byte(`{"tool":"run_command","command":["go","test","./a"]}`))
	f.Add("tool.would_deny", []byte(`{"tool":"run_command","command":"go test ./... | sh"}`))
	f.Add("net.request", []byte(`{"host":"api.github.com","port":443,"method":"POST","path":"/repos/a"}`))
	f.Add("net.connect", []byte(`{"host":"*.com","port":443,"decision":"deny"}`))
	f.Add("net.connect", []byte(`{"host":"api.github.com.exfil.example\u001b[2J","port":443,"decision":"deny","reason":"x\ny"}`))
	f.Add("net.connect", []byte(`{"host":"api.github.com","port":443,"decision":"allow","via":"connect"}`))
	f.Add("net.would_deny", []byte(`{"host":"a.example","port":"443","method":"GET","path":"/%2e%2e/x"}`))
	f.Add("tool.call", []byte(`{"tool":"Bash","decision":"allowed"}`))
	f.Add("file.would_deny", []byte(`{"path":"/etc/\u001b[2Jx","op":"write"}`))
	f.Fuzz(func(t *testing.T, kind string, details []byte) {
		var d map[string]any
		dec := json.NewDecoder(bytes.NewReader(details))
		dec.UseNumber()
		if dec.Decode(&d) != nil {
			return
		}
		current := grant.Set{Commands: []string{"make **"}, Egress: grant.MustEgressRules("*.github.com")}
		ev := suggest.NewEvidence()
		dv := ev.Dispatch("d-1", current, nil)
		for range 4 { // the same entry again and again: generalisation's threshold is reached
			dv.Entry(kind, d)
		}
		for _, narrow := range []bool{false, true} {
			p, err := suggest.Propose(ev, current, suggest.Options{Narrow: narrow})
			if errors.Is(err, suggest.ErrTooMuch) {
				continue
			}
			if err != nil {
				t.Fatalf("Propose: %v", err)
			}
			y, err := p.YAML()
			if err != nil {
				t.Fatalf("YAML: %v", err)
			}
			if _, err := catalog.ParseCapabilityDoc("capability.yaml", y, nil); err != nil {
				t.Fatalf("register would refuse:\n%s\n%v", y, err)
			}
			for _, it := range p.Items {
				oneLine(t, it.Text)
			}
			for _, r := range slices.Concat(p.Refused, p.ProxyRefused) {
				oneLine(t, r.Item+r.Reason+r.Dispatch)
			}
			// What the proxy refused is never proposed: a refused entry adds no rule.
			if kind == "net.request" || (kind == "net.connect" && d["decision"] == "deny") {
				if len(p.Grant.Egress) != 0 {
					t.Fatalf("a refused %s proposed egress %v", kind, p.Grant.Egress)
				}
			}
			for _, r := range p.Grant.Egress {
				if r.Host != "" && r.Host[0] == '*' {
					t.Fatalf("proposed a host pattern %q", r.Host)
				}
			}
		}
	})
}

func oneLine(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			t.Fatalf("shown text %q holds byte %#x", s, s[i])
		}
	}
}
