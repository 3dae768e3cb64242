package remote

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// Caps of one fetched mount; the pod's volume bounds it too.
const (
	MaxFetchEntries = 1 << 20
	MaxFetchBytes   = 64 << 30
	maxNameLen      = 4096
)

// ExtractError is why a fetched tar was refused.
type ExtractError struct {
	Entry  string
	Reason string
}

func (e *ExtractError) Error() string {
	if e.Entry == "" {
		return "extract: " + e.Reason
	}
	return fmt.Sprintf("extract: entry %q: %s", e.Entry, e.Reason)
}

// Extract writes the tar in r beneath dir (made if missing): regular files (0644, or 0755
// when the tar marks them executable), directories (0755) and symlinks, each name clean and
// local and new. Nothing is written through a symlink: an entry below one is refused, and
// os.Root refuses any path that leaves dir. A symlink itself keeps its target as the host's
// tree had it (a repository's link), like the local sandbox shows it.
func Extract(r io.Reader, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("extract: %w", err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	seen := map[string]byte{}
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &ExtractError{Reason: "not a valid tar stream: " + err.Error()}
		}
		if n >= MaxFetchEntries {
			return &ExtractError{Reason: fmt.Sprintf("more than %d entries", MaxFetchEntries)}
		}
		name, err := cleanName(hdr)
		if err != nil {
			return err
		}
		if _, dup := seen[name]; dup {
			return &ExtractError{Entry: hdr.Name, Reason: "a duplicate entry"}
		}
		for p := path.Dir(name); p != "."; p = path.Dir(p) {
			if seen[p] == tar.TypeSymlink {
				return &ExtractError{Entry: hdr.Name, Reason: "below a symlink"}
			}
		}
		seen[name] = hdr.Typeflag
		if err := extractEntry(root, tr, hdr, name, &total); err != nil {
			return err
		}
	}
}

func extractEntry(root *os.Root, tr *tar.Reader, hdr *tar.Header, name string, total *int64) error {
	if dir := path.Dir(name); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return &ExtractError{Entry: hdr.Name, Reason: reason(err)}
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return &ExtractError{Entry: hdr.Name, Reason: reason(err)}
		}
	case tar.TypeSymlink:
		if hdr.Linkname == "" || strings.ContainsRune(hdr.Linkname, 0) {
			return &ExtractError{Entry: hdr.Name, Reason: "an empty or NUL symlink target"}
		}
		if err := root.Symlink(hdr.Linkname, name); err != nil {
			return &ExtractError{Entry: hdr.Name, Reason: reason(err)}
		}
	case tar.TypeReg:
		if hdr.Size < 0 || hdr.Size > MaxFetchBytes-*total {
			return &ExtractError{Entry: hdr.Name, Reason: fmt.Sprintf("over the %d byte limit", int64(MaxFetchBytes))}
		}
		*total += hdr.Size
		mode := os.FileMode(0o644)
		if hdr.Mode&0o111 != 0 {
			mode = 0o755
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
		if err != nil {
			return &ExtractError{Entry: hdr.Name, Reason: reason(err)}
		}
		n, err := io.CopyBuffer(f, io.LimitReader(tr, hdr.Size), make([]byte, min(hdr.Size+1, 1<<20)))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil && n != hdr.Size {
			err = errors.New("the tar ended inside the file")
		}
		if err != nil {
			return &ExtractError{Entry: hdr.Name, Reason: reason(err)}
		}
	default:
		return &ExtractError{Entry: hdr.Name, Reason: fmt.Sprintf("type %q is not a file, directory or symlink", string(rune(hdr.Typeflag)))}
	}
	return nil
}

// cleanName checks a tar name: local, clean, no NUL or backslash.
func cleanName(hdr *tar.Header) (string, error) {
	name := hdr.Name
	if hdr.Typeflag == tar.TypeDir {
		name = strings.TrimSuffix(name, "/")
	}
	if len(name) > maxNameLen || name == "" || !fs.ValidPath(name) || path.Clean(name) != name || strings.ContainsAny(name, "\\\x00") {
		return "", &ExtractError{Entry: truncate(hdr.Name, 128), Reason: "an absolute, empty, unclean or too long name"}
	}
	return name, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}

func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return err.Error()
}
