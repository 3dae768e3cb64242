package home

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// countDerivations counts note.NewSigner's derivations for the test's length and gives this
// test a process cache of its own.
func countDerivations(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	old := deriveSigner
	deriveSigner = func(s string) (note.Signer, error) { n.Add(1); return old(s) }
	derived = sync.Map{}
	t.Cleanup(func() { deriveSigner = old; derived = sync.Map{} })
	return &n
}

// A one-shot command opens AGORA_HOME, and most never sign: opening checks the audit key
// without deriving its key pair, and a process derives it once, at its first signature, however
// often it asks for the signer (#28 session 4: it was derived at every open and every
// AuditSigner, the first costing ~1.4 ms of a one-shot dispatch).
func TestOpen_DerivesTheAuditKeyOncePerProcessAtItsFirstSignature(t *testing.T) {
	n := countDerivations(t)
	dir := filepath.Join(t.TempDir(), "home")
	if _, err := Init(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
	h, err := Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	s1, err := h.AuditSigner()
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("open and AuditSigner derived the key %d times before any signature, want 0", got)
	}
	sig1, err := s1.Sign([]byte("one\n"))
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	s2, err := h2.AuditSigner()
	if err != nil {
		t.Fatal(err)
	}
	sig2, err := s2.Sign([]byte("one\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("two opens and two signatures derived the key %d times, want 1", got)
	}
	// The signature is note's own, byte for byte (ed25519 is deterministic).
	text, err := os.ReadFile(filepath.Join(dir, AuditKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := note.NewSigner(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := ref.Sign([]byte("one\n"))
	if string(sig1) != string(want) || string(sig2) != string(want) {
		t.Fatal("the lazily derived signer's signature differs from note.NewSigner's")
	}
	if s1.Name() != ref.Name() || s1.KeyHash() != ref.KeyHash() {
		t.Fatalf("signer %s+%08x, note says %s+%08x", s1.Name(), s1.KeyHash(), ref.Name(), ref.KeyHash())
	}
}

// privateKeyText is note's private key encoding of seed under name with the hash given.
func privateKeyText(name string, hash uint32, seed []byte) string {
	return fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, hash, base64.StdEncoding.EncodeToString(append([]byte{1}, seed...)))
}

// checkAuditKey takes the keys note.NewSigner takes and refuses the ones it refuses: a wrong
// hash, another seed under the same hash, another name, another algorithm, bad encodings.
func TestCheckAuditKey_AgreesWithNote(t *testing.T) {
	for i := range 50 {
		skey, _, err := note.GenerateKey(rand.Reader, fmt.Sprintf("agora/%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := checkAuditKey(skey); err != nil {
			t.Fatalf("a key note generated is refused: %v", err)
		}
		ref, _ := note.NewSigner(skey)
		parts := strings.SplitN(skey, "+", 5)
		key, _ := base64.StdEncoding.DecodeString(parts[4])
		otherSeed := make([]byte, 32)
		rand.Read(otherSeed)
		bad := []string{
			privateKeyText(ref.Name(), ref.KeyHash()^1, key[1:]),
			privateKeyText(ref.Name(), ref.KeyHash(), otherSeed),
			privateKeyText(ref.Name()+"x", ref.KeyHash(), key[1:]),
			strings.Replace(skey, "+"+parts[4], "+"+base64.StdEncoding.EncodeToString(append([]byte{2}, key[1:]...)), 1),
			strings.Replace(skey, "PRIVATE", "PUBLIC", 1),
			skey[:len(skey)-4],
			skey + "+",
		}
		for _, b := range bad {
			if _, err := note.NewSigner(b); err == nil {
				t.Fatalf("test case note takes: %q", b)
			}
			if _, _, err := checkAuditKey(b); err == nil {
				t.Fatalf("checkAuditKey takes a key note refuses: %q", b)
			}
		}
	}
}

// The one key the open's check cannot tell from a good one: a hash naming the negated public
// key (the X25519 ladder has no sign of x). It is only made on purpose, by someone who can
// write keys/ already; its first signature is refused before anything is signed.
func TestAuditSigner_NegatedPublicKeyIsRefusedAtTheFirstSignature(t *testing.T) {
	countDerivations(t)
	dir := filepath.Join(t.TempDir(), "home")
	if _, err := Init(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, 32)
	rand.Read(seed)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	neg := append([]byte{1}, pub...)
	neg[32] ^= 0x80
	text := privateKeyText("agora/neg", keyHash("agora/neg", neg), seed)
	if _, err := note.NewSigner(text); err == nil {
		t.Fatal("note takes the negated key's hash")
	}
	if _, _, err := checkAuditKey(text); err != nil {
		t.Fatalf("the open's check was expected to take it (see checkAuditKey): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, AuditKeyFile), []byte(text+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := Open(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	s, err := h.AuditSigner()
	if err != nil {
		t.Fatal(err)
	}
	if sig, err := s.Sign([]byte("x\n")); err == nil {
		t.Fatalf("the negated key signed: %x", sig)
	}
	if _, err := note.Sign(&note.Note{Text: "x\n"}, s); err == nil {
		t.Fatal("note.Sign with the negated key succeeded")
	}
}

// Open refuses a home whose audit key is not a valid signing key, as it did.
func TestOpen_RefusesABadAuditKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	if _, err := Init(t.Context(), dir, nil); err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, 32)
	rand.Read(seed)
	for _, text := range []string{"garbage", privateKeyText("agora/x", 0x12345678, seed)} {
		if err := os.WriteFile(filepath.Join(dir, AuditKeyFile), []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		h, err := Open(t.Context(), dir, nil)
		if err == nil {
			h.Close()
			t.Fatalf("open took audit key %q", text)
		}
		if !strings.Contains(err.Error(), "is not a valid signing key") {
			t.Fatalf("error %q does not say the key is bad", err)
		}
	}
}

// FuzzCheckAuditKey: checkAuditKey parses the key file's text; it takes exactly what
// note.NewSigner takes (the negated-key case needs a chosen 32-bit hash, out of a fuzzer's
// reach), never panics, and returns note's name and hash.
func FuzzCheckAuditKey(f *testing.F) {
	skey, _, _ := note.GenerateKey(rand.Reader, "agora/0011223344556677")
	f.Add(skey)
	f.Add("PRIVATE+KEY+a+00000000+AQ==")
	f.Add("PRIVATE+KEY+a+0000000g+" + base64.StdEncoding.EncodeToString(make([]byte, 33)))
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		name, hash, err := checkAuditKey(text)
		ref, rerr := note.NewSigner(text)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("checkAuditKey err %v, note.NewSigner err %v", err, rerr)
		}
		if err == nil && (name != ref.Name() || hash != ref.KeyHash()) {
			t.Fatalf("checkAuditKey %s+%08x, note %s+%08x", name, hash, ref.Name(), ref.KeyHash())
		}
	})
}
