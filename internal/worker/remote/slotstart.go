package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// A warm worker is started before its dispatch exists: no init step fetched anything for
// it. [StartSlot] claims the slot's dispatch ([ClaimFromEnv]), then fetches that dispatch's
// mounts into their places below the layout root itself ([FetchInto]), and from there runs as
// a cold remote worker ([StartClient]).

// SlotEnabled reports whether this worker was started for a warm slot.
func SlotEnabled() bool {
	return os.Getenv(remote.SlotEnv) != "" || os.Getenv(remote.SlotFileEnv) != ""
}

// maxSlotToken caps the slot token read from fd 3.
const maxSlotToken = 256

// slotTokenFD is where a docker slot's token arrives (its stdin, moved there by fdpass).
const slotTokenFD = 3

// slotToken returns the slot's token: [remote.TokenEnv]'s (a pod's Secret), else fd 3's (a
// docker slot: fdpass put the stdin's bytes in a sealed memfd there, since the engine shows the
// environment to anyone with its socket), read to its end and closed. fd 3 is touched only when
// it is a regular file (a memfd): a process started without one may have anything there (Go's
// own poller).
func slotToken() (string, error) {
	if t := os.Getenv(remote.TokenEnv); t != "" {
		return t, nil
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(slotTokenFD, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", fmt.Errorf("no slot token in %s or on fd %d", remote.TokenEnv, slotTokenFD)
	}
	f := os.NewFile(slotTokenFD, "slot-token")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSlotToken+1))
	if err != nil || len(b) == 0 || len(b) > maxSlotToken {
		clear(b)
		return "", fmt.Errorf("no slot token on fd %d (read %d bytes: %v)", slotTokenFD, len(b), err)
	}
	t := string(b)
	clear(b)
	return t, nil
}

// StartSlot is [Start] for a warm slot's worker: it claims the dispatch bound to the slot,
// fetches its mounts below root and starts the worker's remote mode for it.
func StartSlot(ctx context.Context, root string, stdout, stderr io.Writer) (*Worker, error) {
	// Before the claim: a build without a version hashes its own bytes for its identity, and a
	// claim must not wait for that.
	Version()
	fill := os.Getenv(remote.SlotFillEnv)
	os.Unsetenv(remote.SlotFillEnv)
	c, err := ClaimFromEnv(ctx, stderr)
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	var filled map[string]bool
	if fill != "" {
		// A Kubernetes slot: its filler puts the read-only mounts in their read-only places.
		filled, err = handOver(fctx, fill, c)
	}
	if err == nil {
		err = FetchInto(fctx, c, root, filled, fill != "")
	}
	cancel()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("fetch: %w", err)
	}
	return StartClient(ctx, c, root, stdout, stderr)
}

// FetchInto makes the session's layout below root (a directory the worker may write: a docker
// slot's tmpfs): every Fetch mount downloaded to its place, every other mount an empty
// directory (the out directory, a sockets directory). A File mount whose place exists already
// is the slot's own (its worker binary, bound read-only when it started) and is left. A
// mount that is not writable is left without write permission: by mode only, since the agent
// runs as the same uid. A docker slot's host exports no read-only mount: it puts those files in
// the slot's read-only bind places itself (dispatch/warmdocker_files.go, docs/providers.md).
// A Kubernetes slot's filler filled its read-only mounts (filled, by name) in read-only
// places: with places set, every read-only mount must be one of those, and is left.
func FetchInto(ctx context.Context, c *Client, root string, filled map[string]bool, places bool) error {
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if v := Version(); info.Version != v {
		return fmt.Errorf("worker is agora %s, the host runs %s: start the slot from this agora's worker", v, info.Version)
	}
	for _, m := range info.Mounts {
		if !remote.ValidMountName(m.Name) || !filepath.IsAbs(m.Dst) {
			return fmt.Errorf("mount %q -> %q is not valid", m.Name, m.Dst)
		}
		if places && remote.ReadOnlyMount(m) != filled[m.Name] {
			return fmt.Errorf("mount %s at %s: read-only %v, filled in a read-only place %v", m.Name, m.Dst, remote.ReadOnlyMount(m), filled[m.Name])
		}
		if filled[m.Name] {
			continue
		}
		dst := Local(root, m.Dst)
		if rel, err := filepath.Rel(root, dst); err != nil || rel == "." || !filepath.IsLocal(rel) {
			return fmt.Errorf("mount %s: %s is not below the layout root %s", m.Name, m.Dst, root)
		}
		if err := fetchMount(ctx, c, m, root, dst); err != nil {
			return err
		}
	}
	return nil
}

// fetchMount puts mount m at dst.
func fetchMount(ctx context.Context, c *Client, m remote.Mount, root, dst string) error {
	if m.File {
		if _, err := os.Lstat(dst); err == nil {
			return nil // the slot's own file, bound when it started
		}
		if !m.Fetch {
			return fmt.Errorf("mount %s: a file mount without content is not supported in a warm slot", m.Name)
		}
		tmp := filepath.Join(root, ".fetch-"+m.Name)
		if err := c.Fetch(ctx, m, tmp); err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("mount %s: %w", m.Name, err)
		}
		if err := os.Rename(filepath.Join(tmp, remote.FileName), dst); err != nil {
			return fmt.Errorf("mount %s: %w", m.Name, err)
		}
		os.RemoveAll(tmp)
		if !m.Writable {
			return os.Chmod(dst, 0o444|fileExec(dst))
		}
		return nil
	}
	// The place must be new (or an empty directory): whatever ran in the slot before its claim
	// could have planted files there, and the dispatch would run on them. Nor
	// may it be reached through a symlink: one planted at the place (or above it) to an empty
	// directory passed the emptiness check, and the fetch went into the planter's directory,
	// where it can add files after the check.
	if err := noPlantedLink(root, dst); err != nil {
		return fmt.Errorf("mount %s: %w", m.Name, err)
	}
	if ents, err := os.ReadDir(dst); err == nil && len(ents) > 0 {
		return fmt.Errorf("mount %s: its place %s in the slot is not empty before the fetch", m.Name, m.Dst)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mount %s: %w", m.Name, err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("mount %s: %w", m.Name, err)
	}
	if m.Fetch {
		if err := c.Fetch(ctx, m, dst); err != nil {
			return err
		}
	}
	if m.Writable || len(m.Sockets) > 0 {
		return nil // the worker listens on the host's sockets there
	}
	return readOnly(dst)
}

// fileExec keeps a fetched file's execute bits.
func fileExec(path string) os.FileMode {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Mode().Perm() & 0o111
}

// readOnly takes the write bits off every file and directory below dir.
func readOnly(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if d.IsDir() {
			dirs = append(dirs, p) // after their contents
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm()&^0o222)
	})
	for i := len(dirs) - 1; i >= 0 && err == nil; i-- {
		err = os.Chmod(dirs[i], 0o555)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("make %s read-only: %w", dir, err)
	}
	return nil
}

// noPlantedLink refuses a place dst below root any existing component of which (dst itself
// included) is a symlink or, for dst, anything but a directory.
func noPlantedLink(root, dst string) error {
	rel, err := filepath.Rel(root, dst)
	if err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("%s is not below the layout root %s", dst, root)
	}
	p := root
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("its place %s in the slot is a %s before the fetch, not a directory", p, fi.Mode().Type())
		}
	}
	return nil
}
