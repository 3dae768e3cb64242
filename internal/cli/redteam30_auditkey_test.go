package cli_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRedTeam30_PlantedNegatedAuditKeyFailsClosed: a key file whose hash names
// the negated public key (with an audit.pub that says the same, so the pair looks matched)
// must never let the audit go on as if signed: no command succeeds without saying so, no
// checkpoint is stored, `agora audit checkpoint` and `agora audit export` fail naming the key.
// 91b0b85's open (reverted in 6c48440) took such a key; this held even then.
func TestRedTeam30_PlantedNegatedAuditKeyFailsClosed(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	if r := runAgora(t, env, "init"); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	if err := os.WriteFile(filepath.Join(env["AGORA_HOME"], "agora.yaml"), []byte("audit:\n  checkpoint_every: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plantNegatedAuditKey(t, env["AGORA_HOME"])
	src := filepath.Join(dir, "tools")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "README.md"), []byte("# tools\n"), 0o644)
	r := runAgora(t, env, "capability", "register", "tools", "--from", src)
	t.Logf("register with the planted key: %+v", r)
	if r.code == 0 && !strings.Contains(r.stderr, "warning: audit checkpoint") {
		t.Errorf("a command appended entries, its checkpoint could not be signed, and it said nothing: %+v", r)
	}
	r = runAgora(t, env, "audit", "checkpoint")
	if r.code == 0 || !strings.Contains(r.stderr, "audit key") {
		t.Errorf("audit checkpoint with the planted key: %+v, want a failure naming the audit key", r)
	}
	r = runAgora(t, env, "audit", "export", "--out", filepath.Join(dir, "bundle.json"))
	if r.code == 0 {
		t.Errorf("audit export with the planted key succeeded: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "bundle.json")); err == nil {
		t.Error("audit export wrote a bundle with the planted key")
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(env["AGORA_HOME"], "agora.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var checkpoints int
	if err := db.QueryRow(`SELECT COUNT(*) FROM audit_checkpoints`).Scan(&checkpoints); err != nil {
		t.Fatal(err)
	}
	if checkpoints != 0 {
		t.Errorf("%d checkpoints stored with the planted key", checkpoints)
	}
}

// TestRedTeam30_PlantedAuditKeyRefusedBeforeAnyEntry: a home whose audit key cannot sign fails
// at open, so no command commits an entry it could never checkpoint. Failed with 91b0b85 (its
// open took the key; `capability register` committed and exited 0 with a warning), which
// 6c48440 reverted.
func TestRedTeam30_PlantedAuditKeyRefusedBeforeAnyEntry(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	if r := runAgora(t, env, "init"); r.code != 0 {
		t.Fatalf("init: %+v", r)
	}
	plantNegatedAuditKey(t, env["AGORA_HOME"])
	src := filepath.Join(dir, "tools")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "README.md"), []byte("# tools\n"), 0o644)
	if r := runAgora(t, env, "capability", "register", "tools", "--from", src); r.code == 0 || !strings.Contains(r.stderr, "audit key") {
		t.Errorf("a command in a home whose audit key cannot sign: %+v, want a refusal naming the key", r)
	}
}

// plantNegatedAuditKey writes home's audit.key and audit.pub as a pair whose hash names a real
// seed's public key with x's sign flipped: it parses, and it cannot sign.
func plantNegatedAuditKey(t *testing.T, home string) {
	t.Helper()
	name := "agora/0011223344556677"
	seed := make([]byte, 32)
	rand.Read(seed)
	neg := append([]byte{1}, ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)...)
	neg[32] ^= 0x80
	sum := sha256.Sum256([]byte(name + "\n" + string(neg)))
	hash := binary.BigEndian.Uint32(sum[:4])
	priv := fmt.Sprintf("PRIVATE+KEY+%s+%08x+%s", name, hash, base64.StdEncoding.EncodeToString(append([]byte{1}, seed...)))
	pub := fmt.Sprintf("%s+%08x+%s", name, hash, base64.StdEncoding.EncodeToString(neg))
	for file, text := range map[string]string{"keys/audit.key": priv, "keys/audit.pub": pub} {
		if err := os.WriteFile(filepath.Join(home, file), []byte(text+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
