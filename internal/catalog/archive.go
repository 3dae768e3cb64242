package catalog

import (
	"github.com/agora-dev/agora/internal/capped"

	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one entry of a capability archive.
type File struct {
	Path       string // slash-separated, relative, clean
	Mode       int64  // 0644 or 0755 (normalised)
	Size       int64
	LinkTarget string // non-empty for a symlink (relative, stays inside the capability)
	Data       []byte // nil for symlinks
}

// Limits caps what an archive may hold.
type Limits struct {
	MaxTotalSize int64 // bytes of regular-file content
	MaxFiles     int
}

// DefaultMaxFiles caps the number of entries in a capability.
const DefaultMaxFiles = 10000

// epoch is the modification time of every archive entry, so archives are reproducible.
var epoch = time.Unix(0, 0).UTC()

// SizeError reports a capability over its size limit.
type SizeError struct {
	Size, Limit int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("capability is %s, over the %s limit (set catalog.capability_max_size in agora.yaml to raise it)",
		humanBytes(e.Size), humanBytes(e.Limit))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/(1<<10), n)
	}
	return fmt.Sprintf("%d bytes", n)
}

// ReadDir collects the files under root for a capability. It refuses device files, sockets,
// pipes and symlinks that are absolute or point outside root, and stops as soon as the
// total size passes the limit (before reading the content).
func ReadDir(root string, lim Limits) ([]File, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("read capability directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("read capability directory: %s is not a directory", root)
	}
	// WalkDir does not follow a symlink given as its root: it would report an empty capability.
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("read capability directory: %w", err)
	}
	var files []File
	var total int64
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := checkLinkTarget(rel, target); err != nil {
				return err
			}
			files = append(files, File{Path: rel, Mode: 0o777, LinkTarget: filepath.ToSlash(target)})
		case fi.Mode().IsRegular():
			total += fi.Size()
			if total > lim.MaxTotalSize {
				return &SizeError{Size: total, Limit: lim.MaxTotalSize}
			}
			data, err := readRegular(p, fi.Size())
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			files = append(files, File{Path: rel, Mode: normMode(int64(fi.Mode().Perm())), Size: int64(len(data)), Data: data})
		default:
			return fmt.Errorf("%s: %s files are not allowed in a capability", rel, fileKind(fi.Mode()))
		}
		if lim.MaxFiles > 0 && len(files) > lim.MaxFiles {
			return fmt.Errorf("capability has more than %d files", lim.MaxFiles)
		}
		return nil
	})
	if err != nil {
		var se *SizeError
		if errors.As(err, &se) {
			// Report the whole size so the user knows how far over they are.
			se.Size = dirSize(root)
			return nil, se
		}
		return nil, fmt.Errorf("read capability %s: %w", root, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	if err := checkLinkChains(files); err != nil {
		return nil, fmt.Errorf("read capability %s: %w", root, err)
	}
	return files, nil
}

// readRegular reads the file at p, which was a regular file of size bytes when the walk saw
// it. It does not follow a symlink or block on a pipe that replaced it since, and refuses a file
// that grew, so the size limit holds for the bytes actually read.
func readRegular(p string, size int64) ([]byte, error) {
	data, err := capped.NoFollow(p, size)
	var tl *capped.TooLargeError
	if errors.As(err, &tl) {
		return nil, fmt.Errorf("grew while being read")
	}
	return data, err
}

func dirSize(root string) int64 {
	var n int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special"
}

func normMode(perm int64) int64 {
	if perm&0o111 != 0 {
		return 0o755
	}
	return 0o644
}

// checkLinkTarget refuses a symlink at rel whose target is absolute or escapes the root.
func checkLinkTarget(rel, target string) error {
	if target == "" || path.IsAbs(filepath.ToSlash(target)) || filepath.IsAbs(target) {
		return fmt.Errorf("%s: symlink to an absolute path (%q) is not allowed", rel, target)
	}
	resolved := path.Join(path.Dir(rel), filepath.ToSlash(target))
	if resolved == ".." || strings.HasPrefix(resolved, "../") {
		return fmt.Errorf("%s: symlink points outside the capability (%q)", rel, target)
	}
	return nil
}

// checkLinkChains refuses a symlink whose target goes up ("..") after passing through another
// symlink of the capability. Each target is checked lexically by [checkLinkTarget], but the
// kernel resolves "d/x/.." by first following d/x: with d/x -> "..", that is the parent of the
// capability although the text cleans to "d".
func checkLinkChains(files []File) error {
	links := map[string]bool{}
	for _, f := range files {
		if f.LinkTarget != "" {
			links[f.Path] = true
		}
	}
	if len(links) == 0 {
		return nil
	}
	for _, f := range files {
		if f.LinkTarget == "" {
			continue
		}
		cur, via := path.Dir(f.Path), ""
		for _, c := range strings.Split(f.LinkTarget, "/") {
			switch c {
			case "", ".":
			case "..":
				if via != "" {
					return fmt.Errorf("%s: symlink target %q passes through the symlink %q and then goes up", f.Path, f.LinkTarget, via)
				}
				cur = path.Dir(cur)
			default:
				cur = path.Join(cur, c)
				if via == "" && links[cur] {
					via = cur
				}
			}
		}
	}
	return nil
}

// checkPath refuses paths that are not clean, relative and slash-separated.
func checkPath(p string) error {
	if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") ||
		strings.ContainsAny(p, "\\\x00") {
		return fmt.Errorf("invalid path %q in capability", p)
	}
	return nil
}

// Archive writes files (sorted by path, as [ReadDir] returns them) as a deterministic tar:
// normalised modes, zero times, no owners. The same files always give the same bytes.
func Archive(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := checkPath(f.Path); err != nil {
			return nil, err
		}
		h := &tar.Header{
			Name:    f.Path,
			Mode:    f.Mode,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if f.LinkTarget != "" {
			h.Typeflag = tar.TypeSymlink
			h.Linkname = f.LinkTarget
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("archive %s: %w", f.Path, err)
		}
		if f.LinkTarget == "" {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("archive %s: %w", f.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ReadArchive parses a capability archive strictly: regular files and in-tree symlinks only,
// clean relative paths in sorted order without duplicates, normalised headers, and the size
// limits. Anything else is an error, so a stored archive has exactly one reading.
func ReadArchive(data []byte, lim Limits) ([]File, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	var files []File
	var total int64
	prev := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read capability archive: %w", err)
		}
		if err := checkPath(h.Name); err != nil {
			return nil, err
		}
		if prev != "" && h.Name <= prev {
			return nil, fmt.Errorf("read capability archive: %q out of order or duplicated", h.Name)
		}
		prev = h.Name
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			return nil, fmt.Errorf("read capability archive: %q has a non-normalised header", h.Name)
		}
		if lim.MaxFiles > 0 && len(files) >= lim.MaxFiles {
			return nil, fmt.Errorf("read capability archive: more than %d files", lim.MaxFiles)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			if h.Mode != 0o644 && h.Mode != 0o755 {
				return nil, fmt.Errorf("read capability archive: %q has mode %o", h.Name, h.Mode)
			}
			total += h.Size
			if h.Size < 0 || total > lim.MaxTotalSize {
				return nil, &SizeError{Size: total, Limit: lim.MaxTotalSize}
			}
			body, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil || int64(len(body)) != h.Size {
				return nil, fmt.Errorf("read capability archive: %q is truncated", h.Name)
			}
			files = append(files, File{Path: h.Name, Mode: h.Mode, Size: h.Size, Data: body})
		case tar.TypeSymlink:
			if err := checkLinkTarget(h.Name, h.Linkname); err != nil {
				return nil, fmt.Errorf("read capability archive: %w", err)
			}
			if h.Mode != 0o777 || h.Size != 0 {
				return nil, fmt.Errorf("read capability archive: %q has a non-normalised header", h.Name)
			}
			files = append(files, File{Path: h.Name, Mode: 0o777, LinkTarget: h.Linkname})
		default:
			return nil, fmt.Errorf("read capability archive: %q has type %q; only files and symlinks are allowed", h.Name, string(h.Typeflag))
		}
	}
	// A path may not be both a file and a directory of other entries.
	names := make(map[string]bool, len(files))
	for _, f := range files {
		names[f.Path] = true
	}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "."; dir = path.Dir(dir) {
			if names[dir] {
				return nil, fmt.Errorf("read capability archive: %q is both a file and a directory", dir)
			}
		}
	}
	if err := checkLinkChains(files); err != nil {
		return nil, fmt.Errorf("read capability archive: %w", err)
	}
	// The checks above pin every field agora reads; tar can still vary in ways they do not see
	// (header format, extra PAX records, padding, trailing bytes). Writing the files back must
	// give exactly data, so an archive has one byte form and one digest.
	canon, err := Archive(files)
	if err != nil {
		return nil, fmt.Errorf("read capability archive: %w", err)
	}
	if !bytes.Equal(canon, data) {
		return nil, fmt.Errorf("read capability archive: not in canonical form (rewriting it changes its bytes)")
	}
	return files, nil
}

// ReadStored reads an archive the catalog stored already: its files can hold no more than
// the archive's own size.
func ReadStored(data []byte) ([]File, error) {
	return ReadArchive(data, Limits{MaxTotalSize: int64(len(data)), MaxFiles: DefaultMaxFiles})
}
