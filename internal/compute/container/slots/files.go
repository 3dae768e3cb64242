package slots

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// A docker slot's read-only files. Were the slot's worker to fetch every mount of its
// dispatch into its tmpfs and take the write bits off the read-only ones, they would be
// read-only by mode only: the agent runs as the worker's uid and could chmod them back, where
// a cold container's binds are read-only mounts. So a slot container starts with a read-only bind
// of an empty host directory (or file) of its own at each read-only place of its template
// (the bundle, the capability files, the inputs, a runtime binary: AGORA_HOME/gateway/
// slotfiles/SLOT/N, root's); at claim, before the dispatch is bound to the slot, the host
// copies the dispatch's files there (with their mode, owner and time; never a hard link, which
// would give a shared bundle's files a second link the host's sandboxfs reads refuse) and
// exports only the other mounts. The agent sees the same read-only bind mounts a
// cold container has: a write is refused with EROFS by the kernel, whoever owns the file.
// Nothing in the container can write there before the claim either: the mount is read-only
// from the container's start.

// slotFiles are one docker slot's staged read-only places.
type slotFiles struct {
	dir    string // AGORA_HOME/gateway/slotfiles/SLOT
	places []stagedPlace
	once   sync.Once
}

// stagedPlace is one read-only bind of the slot: host is bound at dst.
type stagedPlace struct {
	dst, host string
	file      bool
}

// slotFilesDir is where the slots' staged places are.
func (g *gateway) slotFilesDir() string {
	return filepath.Join(filepath.Dir(g.slots.Dir), "slotfiles")
}

// stagedBind says whether a template bind is one a slot stages: read-only, below the layout
// root, neither the slot's own worker binary (bound with its source when it starts) nor the
// gateway's socket directory (the worker listens there, so it is a directory it writes). The
// system trust store of a dispatch with the egress proxy (wire.SystemTrustFile, its stage's
// trust file bound over the image's) is one too, though outside the layout root: a cold
// container has it as a read-only bind of a per-dispatch file, so a slot has a read-only place
// there, filled at the claim, and the dispatch's proxy trust reaches tools that read only the
// system store exactly as cold.
func stagedBind(b compute.Bind) bool {
	if b.Writable || b.Result {
		return false
	}
	return b.Dst == wire.SystemTrustFile ||
		strings.HasPrefix(b.Dst, wire.DefaultRoot+"/") && b.Dst != wire.BinPath && b.Dst != wire.GatewayPath
}

// placeIsFile says whether the template's bind b is a file: by its source when it still
// stands, else by its place (a bundle's manifest and a runtime binary are files).
func placeIsFile(b compute.Bind) bool {
	if fi, err := os.Stat(b.Src); err == nil {
		return fi.Mode().IsRegular()
	}
	return b.Dst == wire.BundlePath+"/"+wire.ManifestFile || b.Dst == wire.SystemTrustFile || strings.HasPrefix(b.Dst, wire.RuntimeBinDir+"/")
}

// stageSlotFiles makes slot id's empty places for tmpl's read-only binds, each with the
// mount points of the places nested in it, and returns them with the binds that put them in
// the container.
func (g *gateway) stageSlotFiles(id string, tmpl compute.Spec) (*slotFiles, []compute.Bind, error) {
	if !remote.ValidSlotID(id) {
		return nil, nil, fmt.Errorf("slot files: slot id %q is not valid", id)
	}
	f := &slotFiles{dir: filepath.Join(g.slotFilesDir(), id)}
	if err := os.MkdirAll(g.slotFilesDir(), 0o700); err != nil {
		return nil, nil, fmt.Errorf("slot files: %w", err)
	}
	if err := os.Mkdir(f.dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("slot files: %w", err)
	}
	for _, b := range tmpl.Binds {
		if stagedBind(b) {
			f.places = append(f.places, stagedPlace{dst: b.Dst, host: filepath.Join(f.dir, fmt.Sprint(len(f.places))), file: placeIsFile(b)})
		}
	}
	var binds []compute.Bind
	for _, p := range f.places {
		if err := makePlace(p.host, p.file); err != nil {
			f.remove()
			return nil, nil, fmt.Errorf("slot files: %w", err)
		}
		// A place nested in this one needs its mount point here: the engine cannot make it in
		// a read-only bind.
		for _, q := range f.places {
			if rel, ok := strings.CutPrefix(q.dst, p.dst+"/"); ok && !p.file {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(p.host, rel)), 0o755); err != nil {
					f.remove()
					return nil, nil, fmt.Errorf("slot files: %w", err)
				}
				if err := makePlace(filepath.Join(p.host, rel), q.file); err != nil && !errors.Is(err, fs.ErrExist) {
					f.remove()
					return nil, nil, fmt.Errorf("slot files: %w", err)
				}
			}
		}
		binds = append(binds, compute.Bind{Src: p.host, Dst: p.dst})
	}
	return f, binds, nil
}

func makePlace(path string, file bool) error {
	if file {
		fd, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o444)
		if err != nil {
			return err
		}
		return fd.Close()
	}
	return os.Mkdir(path, 0o755)
}

// fill puts the claiming dispatch's read-only binds in the slot's places and returns the
// binds left to export (the writable ones, the gateway's sockets). An error means the
// dispatch does not fit the slot (a place it lacks, a file where the slot has a directory,
// a mount to fetch below a read-only place): the slot is spent and the dispatch starts cold.
func (f *slotFiles) fill(binds []compute.Bind) ([]compute.Bind, error) {
	byDst := map[string]compute.Bind{}
	for _, b := range binds {
		byDst[b.Dst] = b
	}
	staged := map[string]bool{}
	for _, p := range f.places {
		b, ok := byDst[p.dst]
		if !ok || b.Writable || b.Result {
			return nil, fmt.Errorf("the slot has a read-only %s the dispatch does not", p.dst)
		}
		staged[p.dst] = true
		var skip []string // the places nested in this one: their mount points stay
		for _, q := range f.places {
			if rel, ok := strings.CutPrefix(q.dst, p.dst+"/"); ok {
				skip = append(skip, rel)
			}
		}
		if err := fillPlace(b.Src, p, skip); err != nil {
			return nil, fmt.Errorf("slot place %s: %w", p.dst, err)
		}
	}
	var rest []compute.Bind
	for _, b := range binds {
		if staged[b.Dst] {
			continue
		}
		if stagedBind(b) {
			return nil, fmt.Errorf("the dispatch has a read-only %s the slot has no place for", b.Dst)
		}
		for _, p := range f.places {
			if strings.HasPrefix(b.Dst, p.dst+"/") {
				return nil, fmt.Errorf("the dispatch's %s is below the slot's read-only %s", b.Dst, p.dst)
			}
		}
		rest = append(rest, b)
	}
	return rest, nil
}

// fillPlace puts src (the dispatch's bind source) at place p, with src's mode and owner.
func fillPlace(src string, p stagedPlace, skip []string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	if p.file != fi.Mode().IsRegular() || (!p.file && !fi.IsDir()) {
		return fmt.Errorf("%s is a %s where the slot has a %s", src, kindOf(fi.Mode()), map[bool]string{true: "file", false: "directory"}[p.file])
	}
	if p.file {
		// The place's inode is what the container has bound: it is written in place.
		return copyInto(src, p.host, fi)
	}
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		for _, s := range skip {
			if rel == s {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		dst := filepath.Join(p.host, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case rel == ".":
			return nil // the place itself: its mode and owner last, after its contents
		case d.IsDir():
			if err := os.Mkdir(dst, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			return sameOwnerMode(dst, info)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
			return lchownAs(dst, info)
		case d.Type().IsRegular():
			// A copy, never a hard link: the host refuses to read a file with a second link
			// (sandboxfs), and a shared bundle's files are read again for the next dispatch.
			return copyInto(path, dst, info)
		default:
			return fmt.Errorf("%s is a %s: not put in a slot", path, kindOf(d.Type()))
		}
	})
	if err != nil {
		return err
	}
	return sameOwnerMode(p.host, fi)
}

// copyInto writes src's bytes into dst (made, or truncated in place) with src's mode, owner
// and modification time. src was a regular file when listed; it is opened non-blocking and
// checked again, so one swapped for a FIFO since never holds the claim in its open.
func copyInto(src, dst string, fi fs.FileInfo) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%s is no longer a regular file: not put in a slot", src)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := sameOwnerMode(dst, fi); err != nil {
		return err
	}
	return os.Chtimes(dst, fi.ModTime(), fi.ModTime())
}

func sameOwnerMode(path string, fi fs.FileInfo) error {
	if err := lchownAs(path, fi); err != nil {
		return err
	}
	return os.Chmod(path, fi.Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
}

func lchownAs(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return os.Lchown(path, int(st.Uid), int(st.Gid))
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	default:
		return "special file"
	}
}

// remove removes the slot's places (after its container has ended: nothing binds them).
func (f *slotFiles) remove() {
	if f == nil {
		return
	}
	f.once.Do(func() { os.RemoveAll(f.dir) })
}

// sweepSlotFiles removes the places of slots that neither stand nor run a living holder's
// dispatch (live), after their containers were swept.
func (g *gateway) sweepSlotFiles() {
	ents, _ := os.ReadDir(g.slotFilesDir())
	for _, e := range ents {
		if remote.ValidSlotID(e.Name()) && !g.live(e.Name()) {
			os.RemoveAll(filepath.Join(g.slotFilesDir(), e.Name()))
		}
	}
}
