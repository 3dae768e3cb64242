package cli_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestRedTeam46xWitness_SameWitnessTwiceMeetsQuorumTwo: an auditor passes one witness twice
// (its key, and a file holding the same key — or the key with its hash in upper case) and
// --witness-quorum 2, meaning "two cosignatures". The CLI checks the quorum against the number
// of --witness values (2, so it is accepted); verify then deduplicates the witnesses and caps
// the quorum at the 1 distinct witness: the bundle with one cosignature verifies, exit 0.
func TestRedTeam46xWitness_SameWitnessTwiceMeetsQuorumTwo(t *testing.T) {
	env, _ := standalone(t)
	data, err := os.ReadFile(goldenV3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, "witness.example/w1")
	if err != nil {
		t.Fatal(err)
	}
	w1, _ := note.NewSigner(skey)
	text := b.Checkpoint[:bytes.Index(b.Checkpoint, []byte("\n\n"))+1]
	alone, err := note.Sign(&note.Note{Text: string(text)}, w1)
	if err != nil {
		t.Fatal(err)
	}
	b.Checkpoint = append(bytes.Clone(b.Checkpoint), alone[len(text)+1:]...)
	var buf bytes.Buffer
	if err := verify.WriteBundle(&buf, b); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bundle := filepath.Join(dir, "cosigned.json")
	os.WriteFile(bundle, buf.Bytes(), 0o600)
	keyFile := filepath.Join(dir, "w1.pub")
	os.WriteFile(keyFile, []byte(vkey+"\n"), 0o644)
	parts := strings.SplitN(vkey, "+", 3)
	upper := parts[0] + "+" + strings.ToUpper(parts[1]) + "+" + parts[2]

	for name, second := range map[string]string{"a file holding it": keyFile, "its hash in upper case": upper, "the same text": vkey} {
		t.Run(name, func(t *testing.T) {
			r := runAgora(t, env, "verify", bundle, "--key", goldenV3Key, "--tsa-ca", goldenV3TSACA,
				"--witness", vkey, "--witness", second, "--witness-quorum", "2")
			if r.code == cmdutil.ExitOK {
				row := ""
				for _, l := range strings.Split(r.stdout, "\n") {
					if strings.HasPrefix(l, "witness\t") {
						row = l
					}
				}
				t.Fatalf("--witness W --witness (W as %s) --witness-quorum 2 with one cosignature: exit 0, verified (%q): the quorum of 2 was silently met by one witness (the CLI counts --witness values, verify counts distinct keys and caps the quorum)", name, row)
			}
		})
	}
}
