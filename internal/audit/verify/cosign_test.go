package verify_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/audit/audittest"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// witness is a witness key agora never saw: Ed25519, made by x/mod's note as a witness's
// operator would make it.
func witness(t *testing.T, name string) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, vkey
}

// cosign appends s's signature of the checkpoint's text to the signed checkpoint, as a witness
// adds its cosignature line.
func cosign(t *testing.T, signed []byte, s note.Signer) []byte {
	t.Helper()
	text := signed[:bytes.Index(signed, []byte("\n\n"))+1]
	alone, err := note.Sign(&note.Note{Text: string(text)}, s)
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.Clone(signed), alone[len(text)+1:]...)
}

func parsedGolden(t *testing.T) (*verify.Bundle, verify.Options) {
	t.Helper()
	data, opts := readGolden(t)
	b, err := verify.ParseBundle(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return b, opts
}

func row(rep *verify.Report, check string) (verify.Result, bool) {
	for _, c := range rep.Checks {
		if c.Check == check {
			return c, true
		}
	}
	return verify.Result{}, false
}

// TestVerify_IgnoresUnknownCosignatures: a checkpoint that carries cosignatures by
// witness keys the verifier was never given verifies as before (C2SP signed-note: verifiers
// MUST ignore signatures from unknown keys), at most 16 signatures in all; the log's own
// signature must still be there, once.
func TestVerify_IgnoresUnknownCosignatures(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	w1, _, _ := witness(t, "witness.example/w1")
	w2, _, _ := witness(t, "witness.example/w2")
	b.Checkpoint = cosign(t, cosign(t, signed, w1), w2)
	if rep := verify.Verify(b, opts); !rep.OK {
		t.Fatalf("a checkpoint with two unknown cosignatures: %v", rep.Failed())
	}
	if _, ok := row(verify.Verify(b, opts), verify.CheckWitness); ok {
		t.Error("a witness row without --witness")
	}

	many := signed
	for i := range verify.MaxNoteSignatures - 1 {
		s, _, _ := witness(t, "witness.example/w"+string(rune('a'+i)))
		many = cosign(t, many, s)
	}
	b.Checkpoint = many
	if rep := verify.Verify(b, opts); !rep.OK {
		t.Fatalf("16 signatures: %v", rep.Failed())
	}
	s17, _, _ := witness(t, "witness.example/w17")
	for name, c := range map[string]struct {
		signed []byte
		want   string
	}{
		"17 signatures":            {cosign(t, many, s17), "more than the 16"},
		"the log's own line twice": {append(bytes.Clone(cosign(t, signed, w1)), signed[bytes.Index(signed, []byte("\n\n"))+2:]...), "two signature lines"},
		"a cosignature line twice": {cosign(t, cosign(t, signed, w1), w1), "two signature lines"},
		"no log signature":         {signedBy(t, signed, w1), "not signed by key"},
		"non-canonical base64":     {append(bytes.Clone(signed), []byte("— witness.example/w9 AAAA\r\n")...), ""},
		"padding bits set":         {paddingBitsSet(t, cosign(t, signed, w1)), "not in canonical form"},
		"space after the name":     {bytes.Replace(cosign(t, signed, w1), []byte("w1 "), []byte("w1  "), 1), "malformed"},
	} {
		t.Run(name, func(t *testing.T) {
			b.Checkpoint = c.signed
			rep := verify.Verify(b, opts)
			r, _ := row(rep, verify.CheckCheckpoint)
			if rep.OK || r.OK || !strings.Contains(r.Detail, c.want) {
				t.Errorf("ok %v, checkpoint row %+v; want it failed saying %q", rep.OK, r, c.want)
			}
		})
	}
}

// TestVerify_Witnesses: with witnesses named (agora verify --witness), the bundle's
// checkpoint must carry the quorum of their cosignatures; a missing one fails the witness
// row naming it, a forged one (the witness's name and key hash, another key's signature)
// fails the checkpoint, and a quorum of 1 of 2 passes with one.
func TestVerify_Witnesses(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	w1, v1, _ := witness(t, "witness.example/w1")
	w2, v2, _ := witness(t, "witness.example/w2")
	opts.Witnesses = verify.Witnesses{Keys: []note.Verifier{v1, v2}}

	b.Checkpoint = cosign(t, cosign(t, signed, w2), w1)
	rep := verify.Verify(b, opts)
	if r, ok := row(rep, verify.CheckWitness); !rep.OK || !ok || !r.OK || !strings.Contains(r.Detail, "2 of the 2") {
		t.Fatalf("both witnesses cosigned: ok %v, witness row %+v; failed %v", rep.OK, r, rep.Failed())
	}

	b.Checkpoint = cosign(t, signed, w1)
	rep = verify.Verify(b, opts)
	if r, _ := row(rep, verify.CheckWitness); rep.OK || r.OK || !strings.Contains(r.Detail, "missing: witness.example/w2+") {
		t.Errorf("w2's cosignature missing: ok %v, witness row %+v", rep.OK, r)
	}
	quorum := opts
	quorum.Witnesses.Quorum = 1
	if rep := verify.Verify(b, quorum); !rep.OK {
		t.Errorf("quorum 1 of 2, w1 cosigned: %v", rep.Failed())
	}
	b.Checkpoint = signed
	if rep := verify.Verify(b, quorum); rep.OK {
		t.Error("quorum 1 of 2, nobody cosigned: verified")
	}

	// A forger who knows only w2's public key signs with a key of the same name and puts w2's
	// key hash on the line: the line names w2, and its signature does not verify under w2.
	forger, _, _ := witness(t, "witness.example/w2")
	b.Checkpoint = append(bytes.Clone(signed), []byte("— witness.example/w2 "+
		withKeyHash(t, sigField(t, cosign(t, signed, w2), signed), sigField(t, cosign(t, signed, forger), signed))+"\n")...)
	rep = verify.Verify(b, opts)
	if r, _ := row(rep, verify.CheckCheckpoint); rep.OK || r.OK || !strings.Contains(r.Detail, "does not verify") {
		t.Errorf("forged w2 cosignature: ok %v, checkpoint row %+v", rep.OK, r)
	}
	if r, ok := row(rep, verify.CheckWitness); !ok || r.OK {
		t.Errorf("forged w2 cosignature: witness row %+v (present %v), want failed", r, ok)
	}
}

// signedBy is the checkpoint's text signed by s alone.
func signedBy(t *testing.T, signed []byte, s note.Signer) []byte {
	t.Helper()
	text := signed[:bytes.Index(signed, []byte("\n\n"))+1]
	out, err := note.Sign(&note.Note{Text: string(text)}, s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sigField is the base64 field of the signature line cosigned added to signed.
func sigField(t *testing.T, cosigned, signed []byte) string {
	t.Helper()
	line := strings.TrimSuffix(string(cosigned[len(signed):]), "\n")
	f := strings.Fields(line)
	if len(f) != 3 {
		t.Fatalf("signature line %q", line)
	}
	return f[2]
}

// withKeyHash is the signature field sig with the key hash (its first 4 bytes) of field from.
func withKeyHash(t *testing.T, from, sig string) string {
	t.Helper()
	a, err1 := base64.StdEncoding.DecodeString(from)
	b, err2 := base64.StdEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || len(a) < 4 || len(b) < 4 {
		t.Fatalf("signature fields %q %q", from, sig)
	}
	return base64.StdEncoding.EncodeToString(append(bytes.Clone(a[:4]), b[4:]...))
}

// paddingBitsSet sets the unused low bits of the last base64 character before the padding on
// the note's last signature line: the same signature bytes, another encoding.
func paddingBitsSet(t *testing.T, signed []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(signed, []byte("=\n"))
	if i < 1 {
		t.Fatalf("no padded signature line in %q", signed)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	out := bytes.Clone(signed)
	out[i-1] = alphabet[strings.IndexByte(alphabet, out[i-1])|1]
	if bytes.Equal(out, signed) {
		out[i-1] = alphabet[strings.IndexByte(alphabet, out[i-1])^2]
	}
	return out
}

// FuzzOpenCosignedCheckpoint: opening never panics, and a checkpoint it accepts carries the
// log's signature and re-reads the same (its text parses; opened again, the same witnesses).
func FuzzOpenCosignedCheckpoint(f *testing.F) {
	s, vkey := audittest.NewKey(f)
	v, err := note.NewVerifier(vkey)
	if err != nil {
		f.Fatal(err)
	}
	origin := verify.Origin(s.Name(), "agora.db")
	signed, err := verify.SignCheckpoint(verify.Checkpoint{Origin: origin, Size: 3, Hash: root}, s)
	if err != nil {
		f.Fatal(err)
	}
	skey, wkey, _ := note.GenerateKey(rand.Reader, "witness.example/w1")
	ws, _ := note.NewSigner(skey)
	wv, _ := note.NewVerifier(wkey)
	text := signed[:bytes.Index(signed, []byte("\n\n"))+1]
	alone, _ := note.Sign(&note.Note{Text: string(text)}, ws)
	f.Add(signed)
	f.Add(append(bytes.Clone(signed), alone[len(text)+1:]...))
	f.Add(append(bytes.Clone(signed), []byte("— x AAAA\n")...))
	f.Fuzz(func(t *testing.T, b []byte) {
		w := verify.Witnesses{Keys: []note.Verifier{wv}}
		c, by, err := verify.OpenCosignedCheckpoint(b, v, origin, w)
		if err != nil {
			return
		}
		if c.Origin != origin || !bytes.HasPrefix(b, c.Marshal()) {
			t.Fatalf("accepted %q as %+v", b, c)
		}
		c2, by2, err := verify.OpenCosignedCheckpoint(b, v, origin, w)
		if err != nil || c2.Size != c.Size || len(by2) != len(by) {
			t.Fatalf("opened again: %+v %v %v", c2, by2, err)
		}
	})
}

// TestVerify_KeyInCanonicalForm: a bundle whose key is respelled (the hash in upper
// case, whitespace around it) fails the key row,
// with and without --key: a bundle's bytes have one form.
func TestVerify_KeyInCanonicalForm(t *testing.T) {
	b, opts := parsedGolden(t)
	key := b.Key
	parts := strings.SplitN(key, "+", 3)
	respelled := map[string]string{
		"hash in upper case": parts[0] + "+" + strings.ToUpper(parts[1]) + "+" + parts[2],
		"trailing newline":   key + "\n",
		"leading space":      " " + key,
	}
	if strings.ToUpper(parts[1]) == parts[1] {
		t.Fatalf("fixture: key hash %s has no letter to respell", parts[1])
	}
	for name, text := range respelled {
		t.Run(name, func(t *testing.T) {
			b.Key = text
			for _, withKey := range []bool{false, true} {
				o := opts
				if !withKey {
					o.Key = ""
				} else {
					o.Key = text
				}
				rep := verify.Verify(b, o)
				r, _ := row(rep, verify.CheckKey)
				if rep.OK || r.OK || !strings.Contains(r.Detail, "canonical form") {
					t.Errorf("--key given %v: ok %v, key row %+v", withKey, rep.OK, r)
				}
			}
		})
	}
	b.Key = key
	if rep := verify.Verify(b, opts); !rep.OK {
		t.Fatalf("the golden key as it is: %v", rep.Failed())
	}
}
