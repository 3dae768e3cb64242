package runtimebin

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
