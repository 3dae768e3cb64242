package verify

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/verify"
)

// TestVerifyFile_StreamedAsRead: a bundle above streamFrom (here every bundle) is streamed
// from its file, and from standard input through a temporary file, with the verdict and
// failed rows of reading it whole (a bundle refused as malformed by both may be refused in
// other words: the stream's error says at which byte); a run bundle, which is not streamed, is read whole.
func TestVerifyFile_StreamedAsRead(t *testing.T) {
	dir := "../../audit/verify/testdata/"
	cases := []struct{ bundle, pub string }{
		{"bundle-v3.json", "audit-v3.pub"},
		{"bundle-pre28.json", "audit-pre28.pub"},
		{"bundle-v1.json", "audit.pub"},
		{"run-bundle-v2.json", "run-bundle-v2.pub"},
	}
	for _, c := range cases {
		data, err := os.ReadFile(dir + c.bundle)
		if err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile(dir + c.pub)
		if err != nil {
			t.Fatal(err)
		}
		vo := verify.Options{Key: string(key)}
		variants := map[string][]byte{
			"as written": data,
			"proof byte": bytes.Replace(data, []byte(`"inclusion_proof": [`+"\n    \""), []byte(`"inclusion_proof": [`+"\n    \"A"), 1),
			"format":     bytes.Replace(data, []byte(`"format"`), []byte(`"formats"`), 1),
			"proof hash": otherProofHash(data),
		}
		for name, content := range variants {
			path := filepath.Join(t.TempDir(), "b.json")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			whole, err := verifyFile(nil, path, vo)
			if err != nil {
				t.Fatal(err)
			}
			for _, stdin := range []bool{false, true} {
				func() {
					defer func(prev int64) { streamFrom = prev }(streamFrom)
					streamFrom = 0
					var got *verify.Report
					var err error
					if stdin {
						got, err = verifyFile(bytes.NewReader(content), "-", vo)
					} else {
						got, err = verifyFile(nil, path, vo)
					}
					if err != nil {
						t.Fatalf("%s %s stdin %v: %v", c.bundle, name, stdin, err)
					}
					if gf, wf := got.Failed(), whole.Failed(); len(wf) == 1 && wf[0].Check == verify.CheckBundle &&
						len(gf) == 1 && gf[0].Check == verify.CheckBundle && strings.HasPrefix(gf[0].Detail, "malformed audit bundle: ") {
						return // refused by both; the stream's error says where, in other words
					}
					if got.OK != whole.OK || got.Tier != whole.Tier || !reflect.DeepEqual(got.Failed(), whole.Failed()) {
						t.Errorf("%s %s stdin %v: streamed ok %v tier %s failed %+v; whole ok %v tier %s failed %+v",
							c.bundle, name, stdin, got.OK, got.Tier, got.Failed(), whole.OK, whole.Tier, whole.Failed())
					}
				}()
			}
		}
	}
}

// otherProofHash is data with the first character of its first proof hash changed: another
// valid hash, so the bundle parses and its inclusion row fails.
func otherProofHash(data []byte) []byte {
	out := bytes.Clone(data)
	i := bytes.Index(out, []byte(`"inclusion_proof": [`))
	j := i + bytes.IndexByte(out[i+len(`"inclusion_proof": [`):], '"') + len(`"inclusion_proof": [`) + 1
	if out[j] == 'A' {
		out[j] = 'B'
	} else {
		out[j] = 'A'
	}
	return out
}
