package runtimebin

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRedTeam38_ExecOnly: the copy a sandbox runs is mode 0111 (runnable, not readable, so
// the CLI it starts is not dumpable), named by its digest, holds the source's bytes, and is
// made only when they hash to the digest the record carries; a copy already there is reused
// as it is, and one of another size or mode is written again.
func TestRedTeam38_ExecOnly(t *testing.T) {
	src := filepath.Join(t.TempDir(), "codex")
	body := []byte("#!/bin/sh\necho exec-only\n")
	if err := os.WriteFile(src, body, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	dir := filepath.Join(t.TempDir(), ExecOnlyDirName)

	if _, err := ExecOnly(dir, src, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "changed since it was resolved") {
		t.Errorf("a source that does not hash to the record's digest: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a refused copy left %v", left)
	}
	for _, bad := range []string{"", "ABC", strings.Repeat("A", 64), "../" + sum[3:]} {
		if _, err := ExecOnly(dir, src, bad); err == nil {
			t.Errorf("digest %q accepted", bad)
		}
	}

	p, err := ExecOnly(dir, src, sum)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if p != filepath.Join(dir, sum) || fi.Mode().Perm() != 0o111 || !fi.Mode().IsRegular() {
		t.Errorf("copy %s mode %v, want %s mode 0111", p, fi.Mode(), filepath.Join(dir, sum))
	}
	if dfi, err := os.Stat(dir); err != nil || dfi.Mode().Perm() != 0o700 {
		t.Errorf("the copies' directory: %v %v, want mode 0700", dfi.Mode(), err)
	}
	os.Chmod(p, 0o400)
	got, err := os.ReadFile(p)
	os.Chmod(p, 0o111)
	if err != nil || string(got) != string(body) {
		t.Errorf("the copy holds %q (%v), want the source's bytes", got, err)
	}

	ino := func(p string) uint64 {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	first := ino(p)
	if p2, err := ExecOnly(dir, src, sum); err != nil || p2 != p || ino(p2) != first {
		t.Errorf("a second dispatch made a new copy (%v)", err)
	}
	// A copy cut short, or made readable, is not taken.
	for _, spoil := range []func(){
		func() { os.Chmod(p, 0o755); os.Truncate(p, 3) },
		func() { os.Chmod(p, 0o555) },
	} {
		spoil()
		p3, err := ExecOnly(dir, src, sum)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(p3)
		if fi.Mode().Perm() != 0o111 || fi.Size() != int64(len(body)) {
			t.Errorf("a spoiled copy was taken: mode %v size %d", fi.Mode(), fi.Size())
		}
	}
	// A copies directory others may write is refused.
	os.Chmod(dir, 0o777)
	if _, err := ExecOnly(dir, src, sum); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("a directory others may write: %v", err)
	}
}

// TestRedTeam38_ExecOnlyKill9MidCopy: a process killed with -9 while it copies (a real child,
// killed as soon as its partial file appears) leaves at most a partial ".copy-*" file, never
// a partial file under the binary's name (that is a rename once whole and hashed). The next
// copy is whole and right, and a partial one older than staleCopy is removed; a younger one
// (another process may be writing it) stays.
func TestRedTeam38_ExecOnlyKill9MidCopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "claude")
	body := []byte(strings.Repeat("x", 1<<16))
	if err := os.WriteFile(src, body, 0o755); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	dir := filepath.Join(t.TempDir(), ExecOnlyDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A real kill -9 mid-copy: whatever it leaves, the binary's name is never a partial copy.
	big := filepath.Join(t.TempDir(), "codex")
	bigBody := make([]byte, 64<<20)
	rand.Read(bigBody)
	if err := os.WriteFile(big, bigBody, 0o755); err != nil {
		t.Fatal(err)
	}
	bh := sha256.Sum256(bigBody)
	bigSum := hex.EncodeToString(bh[:])
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "AGORA_TEST_EXECONLY="+dir+"|"+big+"|"+bigSum)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
		if m, _ := filepath.Glob(filepath.Join(dir, ".copy-*")); len(m) > 0 {
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if fi, err := os.Lstat(filepath.Join(dir, bigSum)); err == nil && fi.Size() != int64(len(bigBody)) {
		t.Fatalf("a copy killed with -9 left a partial file under the binary's name (%d bytes)", fi.Size())
	}
	if p, err := ExecOnly(dir, big, bigSum); err != nil {
		t.Fatal(err)
	} else if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(bigBody)) {
		t.Fatalf("the copy after the killed one: %v %v", fi, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".copy-*"))
	t.Logf("the killed copy left %d partial file(s)", len(left))

	old, young := filepath.Join(dir, ".copy-111"), filepath.Join(dir, ".copy-222")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, body[:100], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-staleCopy - time.Minute)
	if err := os.Chtimes(old, long, long); err != nil {
		t.Fatal(err)
	}
	// The big binary's copy is there already: a dispatch that reuses it sweeps too.
	if _, err := ExecOnly(dir, big, bigSum); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(old); err == nil {
		t.Error("a partial copy left long ago was not removed by a dispatch that reused a copy")
	}
	if err := os.WriteFile(old, body[:100], 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(old, long, long)
	p, err := ExecOnly(dir, src, sum)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != int64(len(body)) || fi.Mode().Perm() != 0o111 {
		t.Errorf("the copy after a killed one: %v %v", fi, err)
	}
	if _, err := os.Lstat(old); err == nil {
		t.Error("a partial copy left long ago by a killed process was not removed")
	}
	if _, err := os.Lstat(young); err != nil {
		t.Errorf("a partial copy another process may be writing was removed: %v", err)
	}
}
