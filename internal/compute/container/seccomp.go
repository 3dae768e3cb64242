package container

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// seccompProfile is podman's default seccomp profile (containers-common, Debian 12) with
// new namespaces refused: unshare(2) fails EPERM, clone(2) is allowed only without namespace
// flags (Docker's own default for a container without CAP_SYS_ADMIN), and clone3(2) fails
// ENOSYS so libc falls back to clone. Podman's default allows an unprivileged user
// namespace, inside which an agent holds every capability over new mount and network
// namespaces: the kernel attack surface bubblewrap's --disable-userns closes for the local
// provider.
//
//go:embed seccomp.json
var seccompProfile []byte

// seccompOpt is the security option that applies [seccompProfile] on this engine. Docker
// takes the profile's JSON inline; podman's compatible API reads it from a path on the
// engine's host, so for podman the profile is written to a private directory first.
func seccompOpt(podman bool) (string, error) {
	if !podman {
		return "seccomp=" + string(seccompProfile), nil
	}
	path, err := writeProfile(os.TempDir(), seccompProfile)
	if err != nil {
		return "", err
	}
	return "seccomp=" + path, nil
}

// writeProfile stores b as DIR/agora-seccomp-<euid>/<sha256>.json and returns its path.
// The directory is this user's alone (0700, checked without following a link), so nobody
// else can swap the profile between the write and the engine's read; an existing file is
// reused only when it holds exactly b.
func writeProfile(tmp string, b []byte) (string, error) {
	euid := os.Geteuid()
	dir := filepath.Join(tmp, fmt.Sprintf("agora-seccomp-%d", euid))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("seccomp profile directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("seccomp profile directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != euid || fi.Mode().Perm() != 0o700 {
		return "", fmt.Errorf("seccomp profile directory %s is not a 0700 directory of uid %d; remove it", dir, euid)
	}
	sum := sha256.Sum256(b)
	path := filepath.Join(dir, hex.EncodeToString(sum[:])+".json")
	if have, err := os.ReadFile(path); err == nil && string(have) == string(b) {
		return path, nil
	}
	f, err := os.CreateTemp(dir, "profile-*")
	if err != nil {
		return "", fmt.Errorf("write seccomp profile: %w", err)
	}
	_, werr := f.Write(b)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write seccomp profile: %w", werr)
	}
	return path, nil
}
