package runtimebin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ExecOnlyDirName is the directory in AGORA_HOME holding the runtime binaries' execute-only
// copies.
const ExecOnlyDirName = "runtime-bin"

// execOnlyMode is the copies' mode: anyone may run one, nobody but a privileged process can
// read it.
const execOnlyMode = 0o111

// isSum says whether s is a SHA-256 in lowercase hex.
func isSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ExecOnly returns the path of a copy of the host file path, whose SHA-256 is sum (lowercase
// hex), that a sandbox can run but not read: mode 0111, in dir (AGORA_HOME/runtime-bin, made
// 0700), named by its digest.
//
// Why: the agent's own tools (Claude Code's Bash, codex's shell) run as the
// CLI's uid in the CLI's PID namespace. A process running a file its user may read is
// dumpable, so those tools could read the CLI's /proc/PID/environ (the relay token), open
// its /proc/PID/fd/1 (the pipe the worker reads its events from) and ptrace it. The kernel
// makes a process that runs a file its user cannot read non-dumpable (execve's would_dump):
// its /proc entries then belong to root and ptrace is refused, for every process of the same
// uid that lacks CAP_SYS_PTRACE, which no process of the sandbox has.
//
// A copy already there is taken when it is a regular file of mode 0111 and of the source's
// size; dir MUST be a directory only agora writes (like AGORA_HOME/bin for the worker): a
// copy there is bound into sandboxes as it is. A new copy is hashed as it is written and
// refused unless it hashes to sum: the source changed since it was resolved.
func ExecOnly(dir, path, sum string) (string, error) {
	if !isSum(sum) {
		return "", fmt.Errorf("runtime binary %s: sha256 %q is not 64 lowercase hex digits", path, sum)
	}
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("runtime binary: %w", err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return "", fmt.Errorf("runtime binary: %w", err)
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("runtime binary %s is not a regular file", path)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("runtime binary copy: %w", err)
	}
	if err := ownDir(dir); err != nil {
		return "", err
	}
	sweepCopies(dir)
	dst := filepath.Join(dir, sum)
	if fi, err := os.Lstat(dst); err == nil {
		if fi.Mode().IsRegular() && fi.Mode().Perm() == execOnlyMode && fi.Size() == st.Size() {
			return dst, nil
		}
		// Not what this function writes: a copy cut short or changed; write it again.
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("runtime binary copy: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".copy-*")
	if err != nil {
		return "", fmt.Errorf("runtime binary copy: %w", err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		return "", fmt.Errorf("runtime binary copy of %s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", fmt.Errorf("runtime binary %s changed since it was resolved (sha256 %s, resolved as %s)", path, got, sum)
	}
	if err := tmp.Chmod(execOnlyMode); err != nil {
		return "", fmt.Errorf("runtime binary copy: %w", err)
	}
	if err := errors.Join(tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("runtime binary copy: %w", err)
	}
	// Another dispatch may have placed the same bytes meanwhile: replacing them is harmless,
	// and a sandbox that bound the old file keeps it.
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("runtime binary copy: %w", err)
	}
	done = true
	return dst, nil
}

// ownDir refuses a copies directory that is not a directory of this process's user that
// nobody else may write: whoever can replace a copy there decides what sandboxes run.
func ownDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("runtime binary copy: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("runtime binary copies: %s is not a directory", dir)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("runtime binary copies: %s (mode %v) is writable by its group or others: chmod go-w it", dir, fi.Mode().Perm())
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("runtime binary copies: %s is not owned by agora's user (uid %d)", dir, os.Geteuid())
	}
	return nil
}

// staleCopy is how old a partial copy (".copy-*") must be before ExecOnly removes it: a copy
// being written is younger (a 300 MB binary is copied in seconds); an older one was left by a
// process killed while copying (kill -9 leaves the whole partial file behind).
const staleCopy = 10 * time.Minute

// sweepCopies removes the partial copies processes killed mid-copy left in dir. A copy only
// ever becomes the binary's name by a rename once whole and hashed, so nothing it removes was
// ever bound.
func sweepCopies(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".copy-") {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && time.Since(fi.ModTime()) > staleCopy {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
