package verify_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/audit/verify"
)

// Witness cosignatures (cosign.go, verify.go checkCheckpoint/checkKey).

// ownLine is the log's own signature line of a checkpoint signed by the log alone, and the
// name and 4-byte key hash it carries.
func ownLine(t *testing.T, signed []byte) (line, name string, hash []byte) {
	t.Helper()
	line = string(signed[bytes.Index(signed, []byte("\n\n"))+2:])
	f := strings.Fields(line)
	if len(f) != 3 {
		t.Fatalf("own line %q", line)
	}
	raw, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil || len(raw) < 4 {
		t.Fatalf("own line %q", line)
	}
	return line, f[1], raw[:4]
}

// junkLine is a canonical signature line naming name and key hash h with a signature that
// cannot verify (64 bytes of b).
func junkLine(name string, h []byte, b byte) string {
	return "— " + name + " " + base64.StdEncoding.EncodeToString(append(bytes.Clone(h), bytes.Repeat([]byte{b}, 64)...)) + "\n"
}

// TestRedTeam46xCosign_SecondUnverifiedLineByTheLogsKey: attack: after the log's valid
// signature line, a second line names the log's key (its name and key hash) with a signature
// that does not verify. x/mod's note.Open drops every line after the first by a known
// (name, hash) WITHOUT verifying it ("Drop repeated signatures by a single verifier"), and
// canonicalSignatures only refuses byte-identical lines, so the bundle verifies. That breaks
// OpenCosignedCheckpoint's documented rule "a signature by a key that is named and does not
// verify fails it", and lets anyone change a verified bundle's checkpoint bytes with lines
// that claim to be the log's own signature.
func TestRedTeam46xCosign_SecondUnverifiedLineByTheLogsKey(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	_, name, h := ownLine(t, signed)
	b.Checkpoint = append(bytes.Clone(signed), junkLine(name, h, 0xAA)...)
	rep := verify.Verify(b, opts)
	if r, _ := row(rep, verify.CheckCheckpoint); rep.OK || r.OK {
		t.Fatalf("a second line by the log's own key whose signature does not verify is accepted: ok %v, checkpoint row %+v; note.Open skips a repeated (name, hash) without verifying it, and canonicalSignatures only refuses identical lines", rep.OK, r)
	}
}

// TestRedTeam46xCosign_SecondUnverifiedLineByANamedWitness: the same for a named witness:
// its valid cosignature, then a junk line by its name and key hash: accepted, and counted.
func TestRedTeam46xCosign_SecondUnverifiedLineByANamedWitness(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	w1, v1, _ := witness(t, "witness.example/w1")
	opts.Witnesses = verify.Witnesses{Keys: []note.Verifier{v1}}
	cs := cosign(t, signed, w1)
	f := strings.Fields(string(cs[len(signed):]))
	raw, _ := base64.StdEncoding.DecodeString(f[2])
	b.Checkpoint = append(cs, junkLine("witness.example/w1", raw[:4], 0x55)...)
	rep := verify.Verify(b, opts)
	if r, _ := row(rep, verify.CheckCheckpoint); rep.OK || r.OK {
		t.Fatalf("a named witness's second cosignature line that does not verify is accepted (witness row counted it: %v): checkpoint row %+v", rep.OK, r)
	}
}

// TestRedTeam46xCosign_SixteenLineLimitBypassedByRepeats: MaxNoteSignatures counts
// len(n.Sigs)+len(n.UnverifiedSigs), which note.Open has already deduplicated by (name, hash)
// for known keys: 1 valid log line plus ~28 different junk lines by the log's key (what fits in
// MaxCheckpointSize) is a note of ~29 signature lines that passes the 16-line limit.
func TestRedTeam46xCosign_SixteenLineLimitBypassedByRepeats(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	_, name, h := ownLine(t, signed)
	out := bytes.Clone(signed)
	for i := 0; ; i++ {
		next := append(bytes.Clone(out), junkLine(name, h, byte(i+1))...)
		if len(next) > verify.MaxCheckpointSize {
			break
		}
		out = next
	}
	lines := bytes.Count(out[bytes.Index(out, []byte("\n\n")):], []byte("\n— "))
	if lines <= verify.MaxNoteSignatures {
		t.Fatalf("fixture: only %d lines fit in %d bytes", lines, verify.MaxCheckpointSize)
	}
	b.Checkpoint = out
	rep := verify.Verify(b, opts)
	if r, _ := row(rep, verify.CheckCheckpoint); rep.OK || r.OK {
		t.Fatalf("a checkpoint of %d signature lines (all but one repeats of the log's key with junk signatures) passes the %d-line limit: checkpoint row %+v", lines, verify.MaxNoteSignatures, r)
	}
}

// TestRedTeam46xCosign_DuplicateWitnessLowersQuorum: the auditor names one witness twice and
// asks for 2 cosignatures (the CLI's check compares the quorum with the number of --witness
// values, duplicates included). checkWitnesses deduplicates the names and then silently caps
// the quorum at 1, so one witness's cosignature satisfies "2 required".
func TestRedTeam46xCosign_DuplicateWitnessLowersQuorum(t *testing.T) {
	b, opts := parsedGolden(t)
	w1, v1, vkey := witness(t, "witness.example/w1")
	again, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	opts.Witnesses = verify.Witnesses{Keys: []note.Verifier{v1, again}, Quorum: 2}
	b.Checkpoint = cosign(t, b.Checkpoint, w1)
	rep := verify.Verify(b, opts)
	r, _ := row(rep, verify.CheckWitness)
	if rep.OK || r.OK {
		t.Fatalf("quorum 2 with one witness named twice and one cosignature: passes (%+v); want it refused (a duplicate witness) or failed, not the quorum silently lowered to 1", r)
	}
}

// TestRedTeam46xCosign_Holds: probes that find the code holding.
func TestRedTeam46xCosign_Holds(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	logKey, err := note.NewVerifier(strings.TrimSpace(b.Key))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("witness named like the log with another key: the log's line does not count", func(t *testing.T) {
		ws, wv, _ := witness(t, logKey.Name())
		o := opts
		o.Witnesses = verify.Witnesses{Keys: []note.Verifier{wv}}
		bb := *b
		rep := verify.Verify(&bb, o)
		if r, _ := row(rep, verify.CheckWitness); rep.OK || r.OK {
			t.Fatalf("no cosignature, witness of the log's name: %+v", r)
		}
		bb.Checkpoint = cosign(t, signed, ws)
		if rep := verify.Verify(&bb, o); !rep.OK {
			t.Fatalf("cosigned by the same-named witness: %v", rep.Failed())
		}
	})

	t.Run("the log's own key as a witness is refused", func(t *testing.T) {
		respelled, _ := note.NewVerifier(strings.Replace(strings.TrimSpace(b.Key), "+", "+", 1))
		o := opts
		o.Witnesses = verify.Witnesses{Keys: []note.Verifier{respelled}}
		if rep := verify.Verify(b, o); rep.OK {
			t.Fatal("the log's own key counted as its witness")
		}
	})

	t.Run("anchored checkpoint never takes a cosignature", func(t *testing.T) {
		if b.Anchored == nil {
			t.Fatal("fixture: the golden bundle has no anchored checkpoint")
		}
		w1, v1, _ := witness(t, "witness.example/w1")
		bb := *b
		a := *b.Anchored
		a.Checkpoint = cosign(t, a.Checkpoint, w1)
		bb.Anchored = &a
		o := opts
		o.Witnesses = verify.Witnesses{Keys: []note.Verifier{v1}}
		rep := verify.Verify(&bb, o)
		if r, _ := row(rep, verify.CheckAnchoredCheckpoint); rep.OK || r.OK {
			t.Fatalf("anchored checkpoint with a cosignature: %+v", r)
		}
	})

	t.Run("confusable witness name is another key", func(t *testing.T) {
		_, v1, _ := witness(t, "witness.example/w1")
		fake, _, _ := witness(t, "witness.examp\u04cfe/w1") // Cyrillic palochka for l
		o := opts
		o.Witnesses = verify.Witnesses{Keys: []note.Verifier{v1}}
		bb := *b
		bb.Checkpoint = cosign(t, signed, fake)
		if rep := verify.Verify(&bb, o); rep.OK {
			t.Fatal("a confusable-named key's cosignature counted")
		}
	})

	t.Run("never panics on odd notes", func(t *testing.T) {
		_, v1, _ := witness(t, "witness.example/w1")
		w := verify.Witnesses{Keys: []note.Verifier{v1, v1}, Quorum: -3}
		for _, in := range [][]byte{nil, []byte("\n\n"), []byte("— \n"), append(bytes.Clone(signed), "— a \n"...),
			append(bytes.Clone(signed), "\n— a AAAAAAA=\n"...), bytes.Repeat([]byte("— a AAAAAAA=\n"), 200)} {
			verify.OpenCosignedCheckpoint(in, logKey, b.Origin, w)
		}
	})
}

// TestRedTeam46xCosign_DuplicateLineNameReachesTerminalRaw: the "carries the signature line
// of NAME twice" detail prints the attacker's key name with %s (cut by bytes at 80): a
// name holding a bidi override (U+202E) or a C1 CSI (U+009B) — both accepted by note.Open and
// isValidName — reaches `agora verify`'s table on the terminal unescaped, and a cut name can
// end in half a UTF-8 character. Elsewhere verify quotes bundle strings with %q.
func TestRedTeam46xCosign_DuplicateLineNameReachesTerminalRaw(t *testing.T) {
	b, opts := parsedGolden(t)
	signed := b.Checkpoint
	name := "evil\u202Elin\u009b2J" + strings.Repeat("é", 40)
	line := "— " + name + " " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 68)) + "\n"
	b.Checkpoint = append(append(bytes.Clone(signed), line...), line...)
	rep := verify.Verify(b, opts)
	r, _ := row(rep, verify.CheckCheckpoint)
	if rep.OK || r.OK {
		t.Fatalf("a duplicated line passed: %+v", r)
	}
	if !utf8.ValidString(r.Detail) {
		t.Errorf("checkpoint detail is not valid UTF-8 (name cut inside a character): %q", r.Detail)
	}
	for _, c := range r.Detail {
		if agenttext.Hidden(c) {
			t.Fatalf("checkpoint detail carries the bundle's key name raw, with hidden/control character %U: %q", c, r.Detail)
		}
	}
}

// TestRedTeam46xCosign_DuplicateLineNameCutMidCharacter: the same detail cuts the name at 80
// bytes, which can split a UTF-8 character: the report's detail is then not valid UTF-8.
func TestRedTeam46xCosign_DuplicateLineNameCutMidCharacter(t *testing.T) {
	b, opts := parsedGolden(t)
	name := "a" + strings.Repeat("é", 50)
	line := "— " + name + " " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 68)) + "\n"
	b.Checkpoint = append(append(bytes.Clone(b.Checkpoint), line...), line...)
	rep := verify.Verify(b, opts)
	r, _ := row(rep, verify.CheckCheckpoint)
	if rep.OK || r.OK {
		t.Fatalf("a duplicated line passed: %+v", r)
	}
	if !utf8.ValidString(r.Detail) {
		t.Fatalf("checkpoint detail is not valid UTF-8 (the key name cut inside a character by truncate): %q", r.Detail)
	}
}
