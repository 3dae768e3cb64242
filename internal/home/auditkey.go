package home

import (
	"crypto/ecdh"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// The audit signing key is checked every time a process opens AGORA_HOME, and most processes
// (a one-shot `agora dispatch run`, a catalog command) never sign: a checkpoint is signed only
// when one is due. note.NewSigner derives the ed25519 key pair, and the first derivation in a
// process builds the standard library's fixed-base table (~1.4 ms of a one-shot dispatch, #28).
// So the open checks the key file the way note.NewSigner does with a Montgomery ladder
// (X25519, no table: ~60 us), and the derivation waits for the first signature, once per
// process per key text (the key stays in memory only, as before).

// errAuditKey is what a key file that is not a valid signing key gets; the caller names the path.
var errAuditKey = errors.New("not a valid signing key")

// deriveSigner is note.NewSigner; a test counts the derivations through it.
var deriveSigner = note.NewSigner

// derived holds this process's signers by key text: one derivation per key per process.
var derived sync.Map // string -> func() (note.Signer, error)

// checkAuditKey accepts exactly the key texts note.NewSigner accepts (ed25519 only), without
// deriving the ed25519 key pair, and returns the key's name and hash. One difference, by
// construction only: the X25519 ladder gives the public point's y, not the sign of its x, so a
// file whose hash names the negated public key passes here; its first signature then fails
// in note.NewSigner (lazySigner.Sign), before anything is signed.
func checkAuditKey(text string) (name string, hash uint32, err error) {
	priv1, rest, _ := strings.Cut(text, "+")
	priv2, rest, _ := strings.Cut(rest, "+")
	name, rest, _ = strings.Cut(rest, "+")
	hash16, key64, _ := strings.Cut(rest, "+")
	h, err1 := strconv.ParseUint(hash16, 16, 32)
	key, err2 := base64.StdEncoding.DecodeString(key64)
	if priv1 != "PRIVATE" || priv2 != "KEY" || len(hash16) != 8 || err1 != nil || err2 != nil ||
		!validKeyName(name) || len(key) != 33 || key[0] != 1 { // 1: note's algEd25519
		return "", 0, errAuditKey
	}
	if !seedMatches(name, uint32(h), key[1:]) {
		return "", 0, errAuditKey
	}
	return name, uint32(h), nil
}

// validKeyName is note's isValidName.
func validKeyName(name string) bool {
	return name != "" && utf8.ValidString(name) && strings.IndexFunc(name, unicode.IsSpace) < 0 && !strings.Contains(name, "+")
}

// fieldP is 2^255 - 19, the field of Curve25519 and edwards25519.
var fieldP = sync.OnceValue(func() *big.Int {
	p := new(big.Int).Lsh(big.NewInt(1), 255)
	return p.Sub(p, big.NewInt(19))
})

// seedMatches reports whether the ed25519 seed's public key, with either sign of x, has the
// note key hash hash under name. The ed25519 scalar is the clamped first half of SHA-512(seed)
// (RFC 8032 5.1.5), the same clamping X25519 applies (RFC 7748 5), and Curve25519's base point
// (u = 9) is edwards25519's under u = (1+y)/(1-y); so X25519(scalar, 9) is the u of the public
// point, y = (u-1)/(u+1), and the public key is y in little-endian with x's sign in bit 255.
func seedMatches(name string, hash uint32, seed []byte) bool {
	digest := sha512.Sum512(seed)
	k, err := ecdh.X25519().NewPrivateKey(digest[:32])
	if err != nil {
		return false
	}
	u := littleEndianInt(k.PublicKey().Bytes())
	p := fieldP()
	num := new(big.Int).Sub(u, big.NewInt(1))
	den := new(big.Int).Add(u, big.NewInt(1))
	if den.Mod(den, p).Sign() == 0 {
		return false
	}
	y := num.Mul(num, den.ModInverse(den, p))
	y.Mod(y, p)
	pub := make([]byte, 33)
	pub[0] = 1 // note's algEd25519
	yb := y.FillBytes(make([]byte, 32))
	for i := range yb {
		pub[32-i] = yb[i]
	}
	if keyHash(name, pub) == hash {
		return true
	}
	pub[32] |= 0x80
	return keyHash(name, pub) == hash
}

func littleEndianInt(b []byte) *big.Int {
	be := make([]byte, len(b))
	for i := range b {
		be[len(b)-1-i] = b[i]
	}
	return new(big.Int).SetBytes(be)
}

// keyHash is note's key hash: the first 4 bytes of SHA-256(name "\n" key), big-endian.
func keyHash(name string, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte("\n"))
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// lazySigner is a checked audit key that derives its key pair on its first signature.
type lazySigner struct {
	name string
	hash uint32
	text string
}

func (s *lazySigner) Name() string    { return s.name }
func (s *lazySigner) KeyHash() uint32 { return s.hash }

// Sign derives the key pair (once per process per key text) with note.NewSigner, which checks
// the key in full, and signs msg.
func (s *lazySigner) Sign(msg []byte) ([]byte, error) {
	f, _ := derived.LoadOrStore(s.text, sync.OnceValues(func() (note.Signer, error) { return deriveSigner(s.text) }))
	signer, err := f.(func() (note.Signer, error))()
	if err != nil {
		return nil, fmt.Errorf("audit key %s: %w", s.name, err)
	}
	if signer.Name() != s.name || signer.KeyHash() != s.hash {
		return nil, fmt.Errorf("audit key %s: derived key %s+%08x differs from its file", s.name, signer.Name(), signer.KeyHash())
	}
	return signer.Sign(msg)
}
