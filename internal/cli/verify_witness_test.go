package cli_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/verify"
	"github.com/agora-dev/agora/internal/cli/cmdutil"
)

// TestVerify_WitnessFlags: the golden bundle with its checkpoint cosigned by a witness
// key agora never saw (Ed25519, made by x/mod's note) verifies without --witness; with
// --witness (the key, or a file holding it) the witness row passes; a second named witness
// that did not cosign fails it (exit 5) unless --witness-quorum 1; a forged cosignature by a
// named witness fails the checkpoint row. A private key passed as --witness is refused
// without being printed.
func TestVerify_WitnessFlags(t *testing.T) {
	env, _ := standalone(t)
	data, err := os.ReadFile(goldenV3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	newKey := func(name string) (note.Signer, string, string) {
		skey, vkey, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			t.Fatal(err)
		}
		s, err := note.NewSigner(skey)
		if err != nil {
			t.Fatal(err)
		}
		return s, skey, vkey
	}
	w1, w1Private, w1Key := newKey("witness.example/w1")
	_, _, w2Key := newKey("witness.example/w2")
	text := b.Checkpoint[:bytes.Index(b.Checkpoint, []byte("\n\n"))+1]
	alone, err := note.Sign(&note.Note{Text: string(text)}, w1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, checkpoint []byte) string {
		c := *b
		c.Checkpoint = checkpoint
		var buf bytes.Buffer
		if err := verify.WriteBundle(&buf, &c); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cosigned := write("cosigned.json", append(bytes.Clone(b.Checkpoint), alone[len(text)+1:]...))
	w1File := filepath.Join(dir, "w1.pub")
	os.WriteFile(w1File, []byte(w1Key+"\n"), 0o644)
	base := []string{"verify", cosigned, "--key", goldenV3Key, "--tsa-ca", goldenV3TSACA}
	args := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }

	if r := runAgora(t, env, args()...); r.code != cmdutil.ExitOK {
		t.Fatalf("a cosignature by an unknown key: %+v", r)
	}
	for _, w := range []string{w1Key, w1File} {
		r := runAgora(t, env, args("--witness", w)...)
		if r.code != cmdutil.ExitOK || !strings.Contains(r.stdout, "witness\tpass\t1 of the 1 named witnesses cosigned") {
			t.Errorf("--witness %s: %+v", w, r)
		}
	}
	r := runAgora(t, env, args("--witness", w1Key, "--witness", w2Key)...)
	if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "witness\tFAIL\t1 of the 2 named witnesses") || !strings.Contains(r.stdout, "missing: witness.example/w2+") {
		t.Errorf("w2 named, not cosigned: %+v", r)
	}
	if r := runAgora(t, env, args("--witness", w1Key, "--witness", w2Key, "--witness-quorum", "1")...); r.code != cmdutil.ExitOK {
		t.Errorf("quorum 1 of 2: %+v", r)
	}
	if r := runAgora(t, env, args("--witness", w1Key, "--witness-quorum", "2")...); r.code == cmdutil.ExitOK || !strings.Contains(r.stderr, "--witness-quorum 2") {
		t.Errorf("a quorum above the witnesses named: %+v", r)
	}

	// A forged cosignature: w1's name and key hash, a signature by another key.
	forger, _, _ := newKey("witness.example/w1")
	fake, _ := note.Sign(&note.Note{Text: string(text)}, forger)
	line := strings.Fields(string(alone[len(text)+1:]))
	fakeLine := strings.Fields(string(fake[len(text)+1:]))
	forged := write("forged.json", append(bytes.Clone(b.Checkpoint), []byte("— witness.example/w1 "+keepHash(t, line[2], fakeLine[2])+"\n")...))
	r = runAgora(t, env, "verify", forged, "--key", goldenV3Key, "--tsa-ca", goldenV3TSACA, "--witness", w1Key)
	if r.code != cmdutil.ExitCheckFailed || !strings.Contains(r.stdout, "checkpoint\tFAIL\t") || !strings.Contains(r.stdout, "does not verify") {
		t.Errorf("a forged cosignature: %+v", r)
	}

	r = runAgora(t, env, args("--witness", w1Private)...)
	if r.code == cmdutil.ExitOK || !strings.Contains(r.stderr, "private signing key") || strings.Contains(r.stdout+r.stderr, w1Private) {
		t.Errorf("a private key as --witness: %+v", r)
	}
}

// keepHash is signature field sig with the key hash (first 4 bytes) of field from.
func keepHash(t *testing.T, from, sig string) string {
	t.Helper()
	a, err1 := base64.StdEncoding.DecodeString(from)
	b, err2 := base64.StdEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || len(a) < 4 || len(b) < 4 {
		t.Fatalf("signature fields %q %q", from, sig)
	}
	return base64.StdEncoding.EncodeToString(append(bytes.Clone(a[:4]), b[4:]...))
}
