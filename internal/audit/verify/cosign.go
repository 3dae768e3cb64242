package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// A witness cosigns a log's checkpoint: it checks that the checkpoint extends every one it
// cosigned before, then adds its own signature line to the note (C2SP tlog-witness). A
// verifier that requires the cosignatures of witnesses it trusts knows that the log showed
// them, too, this history: a log owner cannot show one auditor one history and another a
// different one unless the witnesses collude. The C2SP signed-note spec says verifiers MUST
// ignore signatures from keys they do not know (this is what lets a log rotate its key and
// gain witnesses without breaking verifiers), and may refuse a note of more than 16.
//
// Only the bundle's checkpoint is opened this way. The anchored checkpoint stays exactly the
// log's own signed note: its anchors bind those bytes.

// MaxNoteSignatures is how many signature lines a cosigned checkpoint may carry.
const MaxNoteSignatures = 16

// Witnesses are the witness keys a verifier requires and how many of them must have
// cosigned.
type Witnesses struct {
	// Keys are the witnesses' signed-note verifier keys (name+hash+base64, Ed25519 as x/mod's
	// note makes them).
	Keys []note.Verifier
	// Quorum is how many of Keys must have cosigned; 0 means all of them.
	Quorum int
}

// OpenCosignedCheckpoint is [OpenCheckpoint] for a checkpoint that may carry other signatures
// besides the log's (witness cosignatures): signatures by keys neither v nor w names are
// ignored; a signature by a key that is named and does not verify fails it; the log's own
// signature must be there exactly once; at most [MaxNoteSignatures] lines; every line in its
// canonical form. It returns the checkpoint and the key IDs of the witnesses in w that
// cosigned it, in w's order (each key once).
func OpenCosignedCheckpoint(signed []byte, v note.Verifier, origin string, w Witnesses) (Checkpoint, []string, error) {
	if len(signed) > MaxCheckpointSize {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: larger than %d bytes", MaxCheckpointSize)
	}
	known := []note.Verifier{v}
	for _, k := range w.Keys {
		if k.Name() == v.Name() && k.KeyHash() == v.KeyHash() {
			return Checkpoint{}, nil, fmt.Errorf("open checkpoint: witness key %s is the log's own key", keyID(k))
		}
		if !slices.ContainsFunc(known, func(x note.Verifier) bool { return x.Name() == k.Name() && x.KeyHash() == k.KeyHash() }) {
			known = append(known, k)
		}
	}
	n, err := note.Open(signed, note.VerifierList(known...))
	if err != nil {
		var ue *note.UnverifiedNoteError
		var ie *note.InvalidSignatureError
		switch {
		case errors.As(err, &ue):
			return Checkpoint{}, nil, fmt.Errorf("open checkpoint: not signed by key %s", keyID(v))
		case errors.As(err, &ie):
			return Checkpoint{}, nil, fmt.Errorf("open checkpoint: the signature of %s+%08x does not verify (a forged signature by a key it names)", truncate(ie.Name, 80), ie.Hash)
		}
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: %w", err)
	}
	if len(n.Sigs)+len(n.UnverifiedSigs) > MaxNoteSignatures {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: %d signatures, more than the %d a note may carry", len(n.Sigs)+len(n.UnverifiedSigs), MaxNoteSignatures)
	}
	if err := canonicalSignatures(signed, n.Text); err != nil {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: %w", err)
	}
	own := 0
	cosigned := map[uint32]map[string]bool{}
	for _, s := range n.Sigs {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			own++
			continue
		}
		if cosigned[s.Hash] == nil {
			cosigned[s.Hash] = map[string]bool{}
		}
		cosigned[s.Hash][s.Name] = true
	}
	if own != 1 {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: want the log's own signature (%s) once, found it %d times", keyID(v), own)
	}
	c, err := ParseCheckpoint([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: %w", err)
	}
	if c.Origin != origin {
		return Checkpoint{}, nil, fmt.Errorf("open checkpoint: origin %q, want %q", truncate(c.Origin, 80), origin)
	}
	var by []string
	for _, k := range known[1:] {
		if cosigned[k.KeyHash()][k.Name()] {
			by = append(by, keyID(k))
		}
	}
	return c, by, nil
}

// canonicalSignatures checks that signed is text, a blank line and signature lines each in its
// one form ("— name base64", the base64 canonical), none repeated, so that a cosigned
// checkpoint has one byte form for the signatures it carries.
func canonicalSignatures(signed []byte, text string) error {
	if !bytes.HasPrefix(signed, []byte(text+"\n")) {
		return errors.New("signed note is not in canonical form")
	}
	block := string(signed[len(text)+1:])
	if !strings.HasSuffix(block, "\n") {
		return errors.New("signed note is not in canonical form: its last signature line has no newline")
	}
	// Counted here, from the bytes: note.Open keeps only the first line of each key (name and
	// key hash) and drops the others unverified, so a second line of a key, and any line past
	// the limit behind it, would pass unseen.
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	if len(lines) > MaxNoteSignatures {
		return fmt.Errorf("%d signature lines, more than the %d a note may carry", len(lines), MaxNoteSignatures)
	}
	seen := map[string]bool{}
	for _, line := range lines {
		rest, ok := strings.CutPrefix(line, "— ")
		name, b64, ok2 := strings.Cut(rest, " ")
		sig, err := base64.StdEncoding.DecodeString(b64)
		if !ok || !ok2 || name == "" || err != nil || len(sig) < 4 || base64.StdEncoding.EncodeToString(sig) != b64 {
			return fmt.Errorf("signed note is not in canonical form: signature line %q", truncate(line, 120))
		}
		key := name + "+" + fmt.Sprintf("%08x", binary.BigEndian.Uint32(sig[:4]))
		if seen[key] {
			return fmt.Errorf("signed note carries two signature lines of key %q: one key signs once", truncate(key, 80))
		}
		seen[key] = true
	}
	return nil
}

// ParseWitnessKey reads one witness key: a signed-note verifier key (name+hash+base64). Its
// errors never quote the text, which may be a private key given by mistake.
func ParseWitnessKey(text string) (note.Verifier, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "PRIVATE+KEY+") {
		return nil, errors.New("a witness key is the witness's public verifier key (name+hash+base64); this is a private signing key: keep it secret, and rotate it if it was shared")
	}
	k, err := note.NewVerifier(text)
	if err != nil {
		return nil, fmt.Errorf("not a signed-note verifier key (name+hash+base64, as note.GenerateKey makes it): %w", err)
	}
	return k, nil
}

// checkWitnesses is the witness row: at least the quorum of the named witnesses cosigned the
// bundle's checkpoint (by: those that did, from [OpenCosignedCheckpoint]).
func (v *verifier) checkWitnesses(by []string) {
	w := v.opts.Witnesses
	if len(w.Keys) == 0 {
		return
	}
	var named []string
	for _, k := range w.Keys {
		if id := keyID(k); !slices.Contains(named, id) {
			named = append(named, id)
		}
	}
	need := w.Quorum
	if need <= 0 {
		need = len(named)
	}
	if need > len(named) {
		v.fail(CheckWitness, "", "a quorum of %d, but only %d distinct witnesses are named (a key named twice counts once)", need, len(named))
		return
	}
	var missing []string
	for _, id := range named {
		if !slices.Contains(by, id) {
			missing = append(missing, id)
		}
	}
	if len(by) < need {
		v.fail(CheckWitness, "", "%d of the %d named witnesses cosigned the checkpoint, %d required; missing: %s", len(by), len(named), need, strings.Join(missing, ", "))
		return
	}
	v.pass(CheckWitness, "", "%d of the %d named witnesses cosigned the checkpoint (%d required): %s", len(by), len(named), need, strings.Join(by, ", "))
}
