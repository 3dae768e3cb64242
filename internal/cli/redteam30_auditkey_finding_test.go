package cli_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestRedTeam30_PlantedAuditKeyRefusedBeforeAnyEntry (FINDING, not landed): before 91b0b85 a
// home whose audit key cannot sign (here: its hash names the negated public key, audit.pub to
// match) failed at open, so no command committed an entry it could never checkpoint. Since,
// the open takes it, `agora capability register` commits its entry and exits 0 with a warning,
// and every later checkpoint fails: the log grows unsigned until someone reads the warnings.
// The c0ed7ef binary on the same home: exit 1 "audit key ... is not a valid signing key".
func TestRedTeam30_PlantedAuditKeyRefusedBeforeAnyEntry(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	if r := runAgora(t, env, "init"); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	name := "agora/0011223344556677"
	seed := make([]byte, 32)
	rand.Read(seed)
	neg := append([]byte{1}, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)...)
	neg[32] ^= 0x80
	sum := sha256.Sum256([]byte(name + "\n" + string(neg)))
	hash := binary.BigEndian.Uint32(sum[:4])
	os.WriteFile(filepath.Join(env["AGORA_HOME"], "keys/audit.key"), []byte(fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s\n", name, hash, base64.StdEncoding.EncodeToString(append([]byte{1}, seed...)))), 0o600)
	os.WriteFile(filepath.Join(env["AGORA_HOME"], "keys/audit.pub"), []byte(fmt.Sprintf("%s+%08x+%s\n", name, hash, base64.StdEncoding.EncodeToString(neg))), 0o600)
	src := filepath.Join(dir, "tools")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "README.md"), []byte("# tools\n"), 0o644)
	if r := runAgora(t, env, "capability", "register", "tools", "--from", src); r.code == 0 {
		t.Errorf("a command ran and committed its entry in a home whose audit key cannot sign: %+v", r)
	}
}
