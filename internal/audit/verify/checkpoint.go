package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// MaxCheckpointSize caps a signed checkpoint. Ours are under 300 bytes; anything much larger is
// not one of ours and is refused before it is parsed.
const MaxCheckpointSize = 4 << 10

// HashSize is the size of every hash in the log: SHA-256.
const HashSize = 32

// ErrCheckpoint is matched (with [errors.Is]) by every malformed checkpoint body.
var ErrCheckpoint = errors.New("malformed checkpoint")

// Checkpoint is the body of a C2SP tlog-checkpoint
// (https://c2sp.org/tlog-checkpoint): the log's origin, its size and the RFC 6962 root hash of
// its first Size leaves.
type Checkpoint struct {
	Origin string
	Size   uint64
	Hash   []byte
}

// Marshal returns the checkpoint body: three lines, origin, decimal size and base64 root hash,
// each ending in a newline. agora writes no extension lines.
func (c Checkpoint) Marshal() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Hash))
}

// ParseCheckpoint parses a checkpoint body in its one canonical form: a non-empty origin, a
// decimal size without leading zeros, a base64 root of exactly [HashSize] bytes in canonical
// encoding, and nothing else (no extension lines). Errors match [ErrCheckpoint].
func ParseCheckpoint(body []byte) (Checkpoint, error) {
	if len(body) > MaxCheckpointSize {
		return Checkpoint{}, fmt.Errorf("%w: larger than %d bytes", ErrCheckpoint, MaxCheckpointSize)
	}
	lines := strings.Split(string(body), "\n")
	if len(lines) != 4 || lines[3] != "" {
		return Checkpoint{}, fmt.Errorf("%w: want exactly 3 newline-terminated lines", ErrCheckpoint)
	}
	origin, sizeText, hashText := lines[0], lines[1], lines[2]
	if origin == "" || strings.TrimSpace(origin) != origin || !isPrintable(origin) {
		return Checkpoint{}, fmt.Errorf("%w: origin line is empty or has spaces or control characters at its ends", ErrCheckpoint)
	}
	size, err := strconv.ParseUint(sizeText, 10, 64)
	if err != nil || strconv.FormatUint(size, 10) != sizeText {
		return Checkpoint{}, fmt.Errorf("%w: size %q is not a canonical decimal", ErrCheckpoint, truncate(sizeText, 24))
	}
	hash, err := base64.StdEncoding.DecodeString(hashText)
	if err != nil || len(hash) != HashSize || base64.StdEncoding.EncodeToString(hash) != hashText {
		return Checkpoint{}, fmt.Errorf("%w: root hash is not %d bytes of canonical base64", ErrCheckpoint, HashSize)
	}
	return Checkpoint{Origin: origin, Size: size, Hash: hash}, nil
}

// OpenCheckpoint verifies a signed checkpoint (a C2SP signed note whose text is a checkpoint
// body) with v, and returns its body. The note MUST carry exactly one signature, by v, in
// canonical encoding, and the origin MUST equal origin. It is strict so that one checkpoint
// has one byte form, which anchors bind by hash.
func OpenCheckpoint(signed []byte, v note.Verifier, origin string) (Checkpoint, error) {
	if len(signed) > MaxCheckpointSize {
		return Checkpoint{}, fmt.Errorf("open checkpoint: larger than %d bytes", MaxCheckpointSize)
	}
	text, err := openNote(signed, v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("open checkpoint: %w", err)
	}
	c, err := ParseCheckpoint([]byte(text))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("open checkpoint: %w", err)
	}
	if c.Origin != origin {
		return Checkpoint{}, fmt.Errorf("open checkpoint: origin %q, want %q", truncate(c.Origin, 80), origin)
	}
	return c, nil
}

// openNote verifies a C2SP signed note (https://c2sp.org/signed-note) with v and returns its
// text. The note MUST carry exactly one signature, by v, and be in its one canonical byte form,
// so that a signed statement has one encoding.
func openNote(signed []byte, v note.Verifier) (string, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		var ue *note.UnverifiedNoteError
		if errors.As(err, &ue) {
			return "", fmt.Errorf("not signed by key %s", keyID(v))
		}
		return "", err
	}
	if len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 0 {
		return "", fmt.Errorf("want exactly one signature, by %s", keyID(v))
	}
	sig, err := base64.StdEncoding.DecodeString(n.Sigs[0].Base64)
	if err != nil {
		return "", err
	}
	want := n.Text + "\n— " + n.Sigs[0].Name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
	if !bytes.Equal(signed, []byte(want)) {
		return "", fmt.Errorf("signed note is not in canonical form")
	}
	return n.Text, nil
}

// SignCheckpoint signs c with s and returns the signed note.
func SignCheckpoint(c Checkpoint, s note.Signer) ([]byte, error) {
	signed, err := note.Sign(&note.Note{Text: string(c.Marshal())}, s)
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint %d: %w", c.Size, err)
	}
	return signed, nil
}

// Origin is the checkpoint origin of the log in file logName of the agora instance whose
// audit key is named keyName: "agora/<instance-hex>/agora.db".
func Origin(keyName, logName string) string { return keyName + "/" + logName }

// keyID names a verifier key for messages: its name and hash, both public.
func keyID(v note.Verifier) string {
	var h [4]byte
	binary.BigEndian.PutUint32(h[:], v.KeyHash())
	return fmt.Sprintf("%s+%x", v.Name(), h)
}

func isPrintable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
