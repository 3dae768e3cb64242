package verify_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestSelectionText pins the signed statement's text, byte for byte, as docs/audit-bundle.md
// gives it: a verifier in any language must compute the same bytes.
func TestSelectionText(t *testing.T) {
	b := &verify.Bundle{
		Format: verify.Format,
		Origin: "agora/0123456789abcdef/orch.db",
		Selection: verify.Selection{FromIndex: 2, EndIndex: 9, Kind: "orch.*", Count: 2, Run: "R1",
			Subjects: []string{"run/R1", "odd \"subject\"\n\u00e9"}},
		Entries: []verify.Entry{{Index: 3}, {Index: 7}},
	}
	// indexes: SHA-256 of the 16 bytes 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 07, as
	// sha256sum computes it from printf.
	want := `agora-audit-selection/v1
origin "agora/0123456789abcdef/orch.db"
format "agora-audit-bundle/v3"
run "R1"
from_index 2
end_index 9
kind "orch.*"
subjects 2
subject "run/R1"
subject "odd \"subject\"\n\u00e9"
count 2
indexes sha256:d8a04ca95a6ef56ab2be80e984cffa6cc73c67e5aaec5501a9fada2fd394e379
`
	got := string(verify.SelectionText(b))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("selection text (-want +got):\n%s", diff)
	}
}

// FuzzSelectionNote puts arbitrary bytes where the golden bundle's signed selection was. The
// only note the selection row may accept is the exporter's own: any other byte string, even
// another encoding of the same signature, fails it.
func FuzzSelectionNote(f *testing.F) {
	data, opts := readGolden(f)
	golden, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		f.Fatal(err)
	}
	signed := golden.SelectionNote
	f.Add(signed)
	f.Add(bytes.Replace(signed, []byte("count 2"), []byte("count 1"), 1))
	f.Add(append(bytes.Clone(signed), signed[bytes.LastIndex(signed, []byte("\n\u2014")):]...))
	f.Add([]byte("agora-audit-selection/v1\n\n\u2014 agora/0 AAAA\n"))
	f.Fuzz(func(t *testing.T, note []byte) {
		b, err := verify.ParseBundle(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		b.SelectionNote = note
		rep := verify.Verify(b, opts)
		for _, c := range rep.Checks {
			if c.Check == verify.CheckSelection && c.OK && !bytes.Equal(note, signed) {
				t.Errorf("selection row passed a note that is not the exporter's: %q", note)
			}
		}
	})
}
