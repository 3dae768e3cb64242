package secret

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testKey(b byte) []byte {
	return bytes.Repeat([]byte{b}, KeySize)
}

func mustSealer(t testing.TB, key []byte) *Sealer {
	t.Helper()
	s, err := NewSealer(key)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

func TestNewSealer_KeyLength(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			if _, err := NewSealer(make([]byte, n)); err == nil {
				t.Errorf("NewSealer(%d-byte key): got nil error, want refusal", n)
			}
		})
	}
	if _, err := NewSealer(make([]byte, KeySize)); err != nil {
		t.Errorf("NewSealer(32-byte key): %v", err)
	}
}

func TestSealer_SealOpen(t *testing.T) {
	s := mustSealer(t, testKey(1))
	plain := []byte("canary-plaintext-value")
	sealed, err := s.Seal("sec_a", plain)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if got, want := len(sealed), 1+nonceSize+len(plain)+tagSize; got != want {
		t.Errorf("sealed length: got %d, want %d", got, want)
	}
	if sealed[0] != 1 {
		t.Errorf("version byte: got %d, want 1", sealed[0])
	}
	if bytes.Contains(sealed, plain) {
		t.Error("sealed value contains the plaintext")
	}
	got, err := s.Open("sec_a", sealed)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if !bytes.Equal(got, plain) {
		t.Errorf("Open: got %q, want %q", got, plain)
	}
	again, err := s.Seal("sec_a", plain)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if bytes.Equal(again[1:1+nonceSize], sealed[1:1+nonceSize]) {
		t.Error("two seals reused a nonce")
	}
	empty, err := s.Seal("sec_a", nil)
	if err != nil {
		t.Fatalf("Seal(empty): %v", err)
	}
	if got, err := s.Open("sec_a", empty); err != nil || len(got) != 0 {
		t.Errorf("Open(sealed empty): got %q, %v; want empty, nil", got, err)
	}
}

func TestSealer_OpenRefuses(t *testing.T) {
	s := mustSealer(t, testKey(1))
	plain := []byte("canary-plaintext-value")
	sealed, err := s.Seal("sec_a", plain)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	mutate := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(sealed)) }
	tests := []struct {
		name   string
		sealer *Sealer
		ref    string
		sealed []byte
	}{
		{"other ref", s, "sec_b", sealed},
		{"empty ref", s, "", sealed},
		{"other key", mustSealer(t, testKey(2)), "sec_a", sealed},
		{"version 0", s, "sec_a", mutate(func(b []byte) []byte { b[0] = 0; return b })},
		{"version 2", s, "sec_a", mutate(func(b []byte) []byte { b[0] = 2; return b })},
		{"nonce flipped", s, "sec_a", mutate(func(b []byte) []byte { b[3] ^= 1; return b })},
		{"ciphertext flipped", s, "sec_a", mutate(func(b []byte) []byte { b[1+nonceSize] ^= 0x80; return b })},
		{"tag flipped", s, "sec_a", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b })},
		{"truncated by one", s, "sec_a", sealed[:len(sealed)-1]},
		{"extended by one", s, "sec_a", append(bytes.Clone(sealed), 0)},
		{"header only", s, "sec_a", sealed[:1+nonceSize]},
		{"shorter than header and tag", s, "sec_a", sealed[:1+nonceSize+tagSize-1]},
		{"empty", s, "sec_a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.sealer.Open(tt.ref, tt.sealed)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: got %q, %v; want ErrCorrupt", got, err)
			}
			if got != nil {
				t.Errorf("Open returned %d bytes alongside the error", len(got))
			}
			msg := err.Error()
			if strings.Contains(msg, string(plain)) || len(tt.sealed) > 0 && strings.Contains(msg, hex.EncodeToString(tt.sealed)) {
				t.Errorf("error %q echoes secret material", msg)
			}
		})
	}
	// Every single-bit flip anywhere is refused.
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		if _, err := s.Open("sec_a", b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open with byte %d flipped: got %v, want ErrCorrupt", i, err)
		}
	}
}

// refReference computes Ref's documented construction with the primitives directly.
func refReference(t *testing.T, key []byte, bundle, name string, value []byte) string {
	t.Helper()
	sub, err := hkdf.Key(sha256.New, key, nil, "agora secret ref v1", 32)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, sub)
	mac.Write([]byte(bundle + "\x00" + name + "\x00"))
	mac.Write(value)
	return "sec_" + hex.EncodeToString(mac.Sum(nil)[:16])
}

func TestSealer_Ref(t *testing.T) {
	key := testKey(7)
	s := mustSealer(t, key)
	base := s.Ref("prod", "API_TOKEN", []byte("value-1"))

	if !regexp.MustCompile(`^sec_[0-9a-f]{32}$`).MatchString(base) {
		t.Fatalf("Ref: got %q, want sec_ + 32 lowercase hex", base)
	}
	if want := refReference(t, key, "prod", "API_TOKEN", []byte("value-1")); base != want {
		t.Errorf("Ref: got %q, want %q (HKDF + HMAC-SHA256 construction)", base, want)
	}
	// Pinned vector, computed independently with Python hmac/hashlib (RFC 5869 HKDF, empty salt).
	if want := "sec_b5390c47795b57aaf8dddb1d14f49cea"; base != want {
		t.Errorf("Ref pinned vector: got %q, want %q", base, want)
	}
	if again := mustSealer(t, key).Ref("prod", "API_TOKEN", []byte("value-1")); again != base {
		t.Errorf("Ref not deterministic: %q then %q", base, again)
	}
	differ := []struct {
		name string
		ref  string
	}{
		{"value changed", s.Ref("prod", "API_TOKEN", []byte("value-2"))},
		{"bundle changed", s.Ref("dev", "API_TOKEN", []byte("value-1"))},
		{"key name changed", s.Ref("prod", "API_TOKEN2", []byte("value-1"))},
		{"separator shifted", s.Ref("prodA", "PI_TOKEN", []byte("value-1"))},
		{"other sealing key", mustSealer(t, testKey(8)).Ref("prod", "API_TOKEN", []byte("value-1"))},
	}
	for _, d := range differ {
		t.Run(d.name, func(t *testing.T) {
			if d.ref == base {
				t.Errorf("Ref: got the same ref %q, want a different one", d.ref)
			}
		})
	}
	// The ref is not a plain hash of the value, so it cannot be tested without the key.
	plain := sha256.Sum256([]byte("prod\x00API_TOKEN\x00value-1"))
	if strings.Contains(base, hex.EncodeToString(plain[:16])) {
		t.Error("Ref equals an unkeyed SHA-256 of its inputs")
	}
}

func TestSealer_FormatHidesKey(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s := mustSealer(t, key)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		got := fmt.Sprintf(verb, s)
		if got != "secret.Sealer{redacted}" {
			t.Errorf("Sprintf(%s, sealer): got %q, want the placeholder", verb, got)
		}
	}
	if got := fmt.Sprintf("%v %+v", *s, []*Sealer{s}); got != "secret.Sealer{redacted} [secret.Sealer{redacted}]" {
		t.Errorf("formatting a Sealer value or slice: got %q, want placeholders", got)
	}
}

func TestLoadOrCreateKey_Creates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secret.key")
	s1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("LoadOrCreateKey (create): %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != KeySize {
		t.Errorf("created key file: mode %04o size %d, want 0600 and %d", fi.Mode().Perm(), fi.Size(), KeySize)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("key directory holds %d entries, want only secret.key (temp file left behind?)", len(entries))
	}
	key, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(key, make([]byte, KeySize)) {
		t.Error("created key is all zeros")
	}
	s2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("LoadOrCreateKey (load): %v", err)
	}
	sealed, err := s1.Seal("sec_x", []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s2.Open("sec_x", sealed); err != nil || string(got) != "hello" {
		t.Errorf("reloaded key cannot open: got %q, %v", got, err)
	}
	if s1.Ref("b", "k", []byte("v")) != mustSealer(t, key).Ref("b", "k", []byte("v")) {
		t.Error("sealer from LoadOrCreateKey does not use the file's key")
	}
	other, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open("sec_x", sealed); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a second created key opened the first key's value: %v", err)
	}
}

func TestLoadOrCreateKey_ConcurrentCreateAgrees(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	const n = 8
	refs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := LoadOrCreateKey(path)
			if err != nil {
				errs[i] = err
				return
			}
			refs[i] = s.Ref("b", "k", []byte("v"))
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if refs[i] != refs[0] {
			t.Errorf("caller %d got a different key than caller 0", i)
		}
	}
}

func TestLoadOrCreateKey_Refuses(t *testing.T) {
	good := bytes.Repeat([]byte{0xA5}, KeySize)
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
		dir     bool
		modeErr bool
		wantMsg []string
	}{
		{name: "world readable", content: good, mode: 0o644, modeErr: true, wantMsg: []string{"0644", "chmod 600"}},
		{name: "group readable", content: good, mode: 0o640, modeErr: true, wantMsg: []string{"0640", "chmod 600"}},
		{name: "other writable", content: good, mode: 0o602, modeErr: true, wantMsg: []string{"0602", "chmod 600"}},
		{name: "group executable", content: good, mode: 0o610, modeErr: true, wantMsg: []string{"0610"}},
		{name: "short", content: good[:31], mode: 0o600, wantMsg: []string{"31 bytes", "want 32"}},
		{name: "long", content: append(bytes.Clone(good), 0), mode: 0o600, wantMsg: []string{"33 bytes", "want 32"}},
		{name: "empty", content: nil, mode: 0o600, wantMsg: []string{"0 bytes"}},
		{name: "directory", dir: true, wantMsg: []string{"not a regular file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret.key")
			if tt.dir {
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.WriteFile(path, tt.content, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.mode); err != nil {
					t.Fatal(err)
				}
			}
			s, err := LoadOrCreateKey(path)
			if err == nil {
				t.Fatalf("LoadOrCreateKey: got %v, want refusal", s)
			}
			var me *KeyModeError
			if got := errors.As(err, &me); got != tt.modeErr {
				t.Errorf("errors.As(KeyModeError): got %v, want %v (err %v)", got, tt.modeErr, err)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), hex.EncodeToString(good)) || strings.Contains(err.Error(), string(good)) {
				t.Errorf("error %q echoes key bytes", err)
			}
			if !tt.dir {
				after, _ := os.ReadFile(path)
				if !bytes.Equal(after, tt.content) {
					t.Error("refused key file was modified")
				}
			}
		})
	}
}

func TestLoadOrCreateKey_MissingParent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys", "secret.key")
	if _, err := LoadOrCreateKey(path); err == nil {
		t.Fatal("LoadOrCreateKey with a missing parent directory: got nil error")
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("parent directory was created: %v", err)
	}
}
