package proxy

import (
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/jcs"
)

// A CONNECT target the sandbox writes with bytes that are not UTF-8
// still gives net.connect and net.close details the audit can encode (jcs refuses invalid
// UTF-8, and a refused entry would leave the connection unrecorded): parseAuthority lowers
// the host, which turns such bytes into U+FFFD.
func TestRedTeam28V_TargetNotUTF8KeepsTheEntryEncodable(t *testing.T) {
	parsed := 0
	for _, s := range []string{"\xff.example:443", "A\xc3:443", "[\xff]:443", "\xe2\x82:80", "EXAMPLE.\xfe.COM:443"} {
		tg, err := parseAuthority(s, 0)
		if err != nil {
			continue // refused before any entry names it
		}
		parsed++
		for _, d := range []map[string]any{connectEntry(tg, "connect", "denied", "not granted", false),
			closeEntry(tg, 1, 2, time.Second, 1, []string{"TOKEN"}, "dial "+tg.String()+": refused")} {
			if _, err := jcs.Marshal(d); err != nil {
				t.Errorf("%q: details %q have no canonical form: %v", s, d, err)
			}
		}
	}
	if parsed < 3 {
		t.Errorf("only %d targets parsed: the attack reached no entry", parsed)
	}
}
