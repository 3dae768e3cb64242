package verify

import (
	"crypto/rand"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// BenchmarkCheckSelection is what the signed selection adds to verifying a 100,000-entry
// bundle: the statement computed from the bundle (a SHA-256 over the indexes) and one
// Ed25519 signature checked.
func BenchmarkCheckSelection(b *testing.B) {
	skey, vkey, err := note.GenerateKey(rand.Reader, "agora/0123456789abcdef")
	if err != nil {
		b.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	k, _ := note.NewVerifier(vkey)
	bundle := &Bundle{Format: Format, Origin: "agora/0123456789abcdef/agora.db", Entries: make([]Entry, 100_000)}
	for i := range bundle.Entries {
		bundle.Entries[i].Index = uint64(i)
	}
	bundle.Selection = Selection{EndIndex: 100_000, Count: 100_000}
	if err := SignSelection(bundle, s); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		v := newVerifier(bundle, Options{})
		v.key = k
		v.checkSelection()
		if !v.rep.Checks[0].OK {
			b.Fatal(v.rep.Checks[0].Detail)
		}
	}
}
