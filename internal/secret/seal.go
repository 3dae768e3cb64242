package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the length in bytes of a sealing key (AES-256).
const KeySize = 32

const (
	sealVersion = 1
	nonceSize   = 12
	tagSize     = 16
	refInfo     = "agora secret ref v1"
	refPrefix   = "sec_"
	refBytes    = 16
)

// ErrCorrupt means a sealed value cannot be opened: it is truncated, has an unknown version, was
// altered, or was sealed under another key or another ref. The cause is deliberately not
// distinguished, and the sealed bytes are never part of the message.
var ErrCorrupt = errors.New("open sealed secret: corrupt, or sealed under another key or ref")

// KeyModeError reports a key file whose permissions grant group or other users any access.
type KeyModeError struct {
	Path string
	Mode fs.FileMode
}

func (e *KeyModeError) Error() string {
	return fmt.Sprintf("load secret key %s: mode %04o grants group or other access, want 0600 (fix: chmod 600 %s)",
		e.Path, e.Mode.Perm(), e.Path)
}

// Sealer seals and opens secret values and derives their refs under one key. It is safe for
// concurrent use. It never reveals its key: every fmt verb prints a placeholder.
type Sealer struct {
	aead   cipher.AEAD
	refKey []byte // HKDF subkey for Ref; never the sealing key itself
}

// LoadOrCreateKey reads the 32-byte AES-256 key at path (by convention AGORA_HOME/keys/secret.key)
// and returns a [Sealer] for it. If the file does not exist it creates one from crypto/rand with mode
// 0600; the parent directory must already exist. The new key appears atomically, so a crash or a
// concurrent caller never sees a short key file, and two concurrent callers end up with the same key.
//
// It refuses a key file that is not a regular file, whose mode grants any group or other
// permission ([KeyModeError]), or whose size is not 32 bytes.
func LoadOrCreateKey(path string) (*Sealer, error) {
	key, err := readKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := createKey(path); err != nil {
			return nil, err
		}
		key, err = readKey(path)
	}
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return NewSealer(key)
}

func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load secret key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load secret key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("load secret key %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, &KeyModeError{Path: path, Mode: fi.Mode()}
	}
	if fi.Size() != KeySize {
		return nil, fmt.Errorf("load secret key %s: size is %d bytes, want %d", path, fi.Size(), KeySize)
	}
	// Read one byte more than a key so a file that grew after Stat is still refused.
	key := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, key)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		clear(key)
		return nil, fmt.Errorf("load secret key %s: %w", path, err)
	}
	if n != KeySize {
		clear(key)
		return nil, fmt.Errorf("load secret key %s: size changed while reading, want %d bytes", path, KeySize)
	}
	return key[:KeySize], nil
}

// createKey writes a fresh key to a temporary file beside path and hard-links it into place, so
// path either does not exist or holds a complete key. Losing the race to another creator is fine:
// the caller then reads the winner's key.
func createKey(path string) error {
	key := make([]byte, KeySize)
	defer clear(key)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("create secret key %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".secret-key-*.tmp")
	if err != nil {
		return fmt.Errorf("create secret key %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(key)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("create secret key %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create secret key %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync key directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync key directory: %w", err)
	}
	return nil
}

// NewSealer returns a [Sealer] for a 32-byte key. Production code uses [LoadOrCreateKey]; NewSealer
// exists for tests and for keys that arrive by other means. The key slice is not retained.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("new sealer: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("new sealer: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("new sealer: %w", err)
	}
	refKey, err := hkdf.Key(sha256.New, key, nil, refInfo, sha256.Size)
	if err != nil {
		return nil, fmt.Errorf("new sealer: derive ref key: %w", err)
	}
	return &Sealer{aead: aead, refKey: refKey}, nil
}

// Seal encrypts plaintext with AES-256-GCM under a fresh random 12-byte nonce, using ref as the
// additional data, so a sealed value opened under any other ref fails with [ErrCorrupt]. The output
// is a version byte (1), the nonce, then the ciphertext with its 16-byte tag.
func (s *Sealer) Seal(ref string, plaintext []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, 1+nonceSize+len(plaintext)+tagSize)
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal secret %q: %w", ref, err)
	}
	return s.aead.Seal(out, out[1:1+nonceSize], plaintext, []byte(ref)), nil
}

// Open decrypts a value made by [Sealer.Seal] under the same key and ref. Any failure (bad length,
// unknown version, failed authentication) is [ErrCorrupt].
func (s *Sealer) Open(ref string, sealed []byte) ([]byte, error) {
	if len(sealed) < 1+nonceSize+tagSize || sealed[0] != sealVersion {
		return nil, ErrCorrupt
	}
	plain, err := s.aead.Open(nil, sealed[1:1+nonceSize], sealed[1+nonceSize:], []byte(ref))
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

// Ref returns the deterministic reference for a secret value: "sec_" followed by the hex of the
// first 16 bytes of HMAC-SHA256 over bundle, NUL, key, NUL, value, under a subkey derived from the
// sealing key with HKDF-SHA256 (info "agora secret ref v1").
//
// The same inputs give the same ref, so re-registering an unchanged secret is a no-op; a changed
// value gives a new ref; and without the key file nobody can test a guessed value against a ref.
// Bundle and key names MUST NOT contain NUL (catalog names never do), or two different
// (bundle, key) pairs could share a ref.
func (s *Sealer) Ref(bundle, key string, value []byte) string {
	mac := hmac.New(sha256.New, s.refKey)
	mac.Write([]byte(bundle))
	mac.Write([]byte{0})
	mac.Write([]byte(key))
	mac.Write([]byte{0})
	mac.Write(value)
	return refPrefix + hex.EncodeToString(mac.Sum(nil)[:refBytes])
}

// Format prints a placeholder under every verb, so a Sealer that ends up in a log line or an
// error never reveals key material. It has a value receiver so that a copied Sealer is covered too.
func (s Sealer) Format(f fmt.State, _ rune) {
	io.WriteString(f, "secret.Sealer{redacted}")
}
