package catalog_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agora-dev/agora/internal/catalog"
)

// FuzzParseEnvDoc parses arbitrary env document bytes: it must never panic, and anything it
// accepts has valid bindings and survives a canonical round trip (Marshal, then ParseEnvDoc,
// gives the same document and Marshal the same bytes), so the dispatcher reads a stored bundle
// exactly one way.
func FuzzParseEnvDoc(f *testing.F) {
	for _, s := range []string{
		`{"secrets":{},"values":{},"version":1}`,
		`{"secrets":{"T":"sec_01"},"values":{"A":"1"},"version":1}`,
		`{"bindings":{"T":{"headers":["X-Api-Key"],"hosts":["api.github.com","github.com"]}},"secrets":{"T":"sec_01"},"values":{},"version":2}`,
		`{"bindings":{"T":{"headers":[],"hosts":["*.npmjs.org","192.0.2.1","2001:db8::1"]}},"secrets":{"T":"sec_01"},"values":{},"version":2}`,
		`{"bindings":{"T":{"headers":[],"hosts":["[2001:db8::1]:8443","a.example:8443","b.example"]}},"secrets":{"T":"sec_01"},"values":{},"version":2}`,
		`{"bindings":{"T":{"headers":[],"hosts":["a.example:443"]}},"secrets":{"T":"sec_01"},"values":{},"version":2}`,
		`{"bindings":{"V":{"hosts":["a.example"]}},"secrets":{},"values":{"V":"x"},"version":2}`,
		`{"bindings":{"T":{"hosts":["b.example","a.example","127.1"],"headers":["host","Proxy-Authorization"]}},"secrets":{"T":"s"},"version":2}`,
		`{"bindings":{},"secrets":{"T":"s"},"values":{},"version":1}`,
		`{"bindings":{"T":null},"secrets":{"T":"s"},"version":2}`,
		`{"version":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		doc, err := catalog.ParseEnvDoc(src)
		if err != nil {
			return
		}
		if problems := catalog.CheckBindings(doc.Bindings, doc.Values, doc.Secrets); len(problems) > 0 {
			t.Fatalf("accepted bindings with problems: %v", problems)
		}
		b, err := doc.Marshal()
		if err != nil {
			// Only a value jcs cannot write (invalid UTF-8 survives json.Unmarshal as U+FFFD,
			// so nothing should land here).
			t.Fatalf("Marshal of an accepted document: %v", err)
		}
		again, err := catalog.ParseEnvDoc(b)
		if err != nil {
			t.Fatalf("ParseEnvDoc(Marshal(doc)) = %v\n%s", err, b)
		}
		if diff := cmp.Diff(doc, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip mismatch (-first +second):\n%s", diff)
		}
		b2, err := again.Marshal()
		if err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("Marshal is not stable: %s vs %s (%v)", b, b2, err)
		}
	})
}
