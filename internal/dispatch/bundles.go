package dispatch

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/sandboxfs"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A sandboxed dispatch's bundle is its manifest.json, which is its own, and the pinned
// catalog content (subagent.json and capabilities/*), which every dispatch of the same
// subagent version shares. When the sandboxes run as the invoking user (an unprivileged
// agora), that content is staged once per content digest under dispatches/.bundles/<key>
// and bound read-only at /agora/bundle, with the dispatch's manifest.json bound over the
// entry's empty placeholder. A root agora runs each sandbox as one of 65536 uids, and
// nothing in AGORA_HOME is readable by a uid that does not own it (0600 and 0700
// throughout), so it writes each dispatch's whole bundle into its stage, handed to that
// dispatch's uid, as does `sandbox: none`, which has no mount to bind an entry with.
//
// An entry is never trusted for being there. It is made in the dispatch's own stage
// directory and renamed into place whole, so a crash leaves no half entry at the key (what
// it leaves in the stage, removeWork and Reap delete); and every later use checks it again
// before binding it: the entry, its capabilities directory and .bundles are directories of
// this user's that nobody else may even read, and every file is read beneath the entry with
// no symlink on the way, one link only, and exactly the bytes of its digest (sandboxfs). An
// entry that fails is moved into the dispatch's stage, to be deleted with it, and staged
// again. Inside a sandbox the entry is a read-only mount, which neither the agent nor the
// worker can write through.
//
// Entries are not removed: they hold a copy of catalog content that the blob store keeps
// anyway, one per subagent version dispatched, and a running sandbox may be reading one.

const (
	// bundlesDir, beside the stage directories, holds the shared bundle entries.
	bundlesDir = ".bundles"
	// bundleStaging and bundleDiscard are the stage's names for an entry being made and
	// for one taken out of .bundles; removeWork deletes both.
	bundleStaging = "bundle.staging"
	bundleDiscard = "bundle.discard"
	// maxBundleFile caps a bundle file read back to verify it: the worker's cap on a
	// capability archive.
	maxBundleFile = 1 << 30
)

// bundleFile is one file of the shared part of a bundle: its path in the bundle and the
// catalog version whose content it holds.
type bundleFile struct {
	rel     string
	version catalog.Version
}

// bundleKey names the entry of files: a digest over their paths and digests, which fix
// their content.
func bundleKey(files []bundleFile) string {
	h := sha256.New()
	h.Write([]byte("agora bundle v1\n"))
	for _, f := range files {
		fmt.Fprintf(h, "%s %s\n", strconv.Quote(f.rel), f.version.Digest)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// shareBundle returns the entry holding files, staging it when it is missing or fails its
// check.
func (d *Dispatcher) shareBundle(s *stage, files []bundleFile) (string, error) {
	root := filepath.Join(d.StateDir, bundlesDir)
	if err := ensureBundlesDir(root, filepath.Join(s.dir, bundleDiscard)); err != nil {
		return "", fmt.Errorf("stage the shared bundle: %w", err)
	}
	entry := filepath.Join(root, bundleKey(files))
	if checkBundle(entry, files) == nil {
		return entry, nil
	}
	staging := filepath.Join(s.dir, bundleStaging)
	if err := d.writeBundleFiles(staging, files); err != nil {
		return "", fmt.Errorf("stage the shared bundle: %w", err)
	}
	// Twice at most: a failed entry is moved away once, then the rename must win or
	// another dispatch's good entry must be there.
	for range 2 {
		err := os.Rename(staging, entry)
		if err == nil {
			return entry, nil
		}
		if checkBundle(entry, files) == nil {
			os.RemoveAll(staging) // another dispatch staged the same content first
			return entry, nil
		}
		if err := discard(entry, filepath.Join(s.dir, bundleDiscard)); err != nil {
			return "", fmt.Errorf("stage the shared bundle: %w", err)
		}
	}
	return "", fmt.Errorf("stage the shared bundle: %s stays in the way", entry)
}

// writeBundleFiles writes files and an empty manifest.json placeholder into a new directory
// dir, private like everything in AGORA_HOME.
func (d *Dispatcher) writeBundleFiles(dir string, files []bundleFile) error {
	if err := os.RemoveAll(dir); err != nil { // a leftover of an earlier attempt
		return err
	}
	for _, sub := range []string{dir, filepath.Join(dir, wire.CapabilitiesDir)} {
		if err := os.Mkdir(sub, 0o700); err != nil {
			return err
		}
	}
	write := func(rel string, data []byte) error {
		f, err := os.OpenFile(filepath.Join(dir, rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return errors.Join(err, f.Close())
	}
	for _, f := range files {
		data, err := d.Catalog.Content(f.version)
		if err != nil {
			return err
		}
		if err := write(f.rel, data); err != nil {
			return err
		}
	}
	return write(wire.ManifestFile, nil)
}

// checkBundle reports why the entry at path may not be used for files, or nil.
func checkBundle(path string, files []bundleFile) error {
	for _, dir := range []string{path, filepath.Join(path, wire.CapabilitiesDir)} {
		if err := checkOwnDir(dir); err != nil {
			return err
		}
	}
	dir, err := sandboxfs.Open(path)
	if err != nil {
		return err
	}
	defer dir.Close()
	for _, f := range files {
		if _, err := dir.ReadVerified(f.rel, maxBundleFile, f.version.Digest.Hex()); err != nil {
			return err
		}
	}
	// The placeholder a manifest is bound over: a regular file, empty.
	_, err = dir.ReadFile(wire.ManifestFile, 0)
	return err
}

// checkOwnDir checks that path is a directory (not a link to one) of this user's that no
// other user may use at all.
func checkOwnDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory (%s)", path, fi.Mode().Type())
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is not owned by uid %d", path, os.Geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s is open to others (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

// ensureBundlesDir makes .bundles at root, 0700, first moving to discardAt whatever stands
// there that is not such a directory of this user's.
func ensureBundlesDir(root, discardAt string) error {
	err := checkOwnDir(root)
	if err == nil {
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		if err := discard(root, discardAt); err != nil {
			return err
		}
	}
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return checkOwnDir(root)
}

// discard moves path (a directory, file or link; a link is moved, not followed) to at, in the
// dispatch's stage, where removeWork deletes it.
func discard(path, at string) error {
	if err := os.RemoveAll(at); err != nil {
		return err
	}
	err := os.Rename(path, at)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// bundleBinds binds the stage's bundle at dst: the shared entry with the dispatch's
// manifest.json over its placeholder, or the stage's own bundle directory.
func (s *stage) bundleBinds(dst string) []compute.Bind {
	if s.shared == "" {
		return []compute.Bind{{Src: s.bundle, Dst: dst}}
	}
	return []compute.Bind{
		{Src: s.shared, Dst: dst},
		{Src: filepath.Join(s.bundle, wire.ManifestFile), Dst: dst + "/" + wire.ManifestFile},
	}
}

// bundleVersions lists the shared part of a bundle of p.
func bundleVersions(p *pinned) []bundleFile {
	files := []bundleFile{{rel: wire.SubagentFile, version: p.subagent}}
	for _, c := range p.capabilities {
		files = append(files, bundleFile{rel: wire.CapabilityPath(c.Digest), version: c})
	}
	return files
}
