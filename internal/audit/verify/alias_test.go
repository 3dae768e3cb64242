package verify_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestParseBundleBytes_KeepsNoByteOfItsInput: the parsed bundle holds copies of what it read,
// none of its input, on the scanner's path and on the strict reading's: agora verify lets the
// file's bytes go once the bundle parsed (cli/verify/verify.go), and whatever changes them after the
// parse changes nothing checked. The input is overwritten after the parse; the bundle and its
// report must be what a pristine copy gives.
func TestParseBundleBytes_KeepsNoByteOfItsInput(t *testing.T) {
	golden, opts := readGolden(t)
	// An escaped key is not the scanner's: the whole document goes to the strict reading.
	strict := bytes.Replace(golden, []byte(`"format"`), []byte(`"\u0066ormat"`), 1)
	for name, data := range map[string][]byte{"scanner": golden, "strict reading": strict} {
		t.Run(name, func(t *testing.T) {
			want, err := verify.ParseBundleBytes(bytes.Clone(data))
			if err != nil {
				t.Fatal(err)
			}
			wantRep := verify.Verify(want, opts)
			if !wantRep.OK {
				t.Fatalf("the golden bundle does not verify: %+v", wantRep.Failed())
			}
			input := bytes.Clone(data)
			got, err := verify.ParseBundleBytes(input)
			if err != nil {
				t.Fatal(err)
			}
			for i := range input {
				input[i] = 'x'
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatal("the parsed bundle changed when its input was overwritten: it points into it")
			}
			if rep := verify.Verify(got, opts); !reflect.DeepEqual(rep, wantRep) {
				t.Fatal("the report changed when the input was overwritten after the parse")
			}
		})
	}
}
