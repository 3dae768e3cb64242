package runtimebin

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// CacheFileName is the cache file agora keeps in AGORA_HOME.
const CacheFileName = "runtimebin.json"

// DefaultVersionTimeout bounds `BINARY --version`.
const DefaultVersionTimeout = 10 * time.Second

// Resolver resolves runtime binaries and remembers each one's version and sha256 by the
// file's identity. The zero value works, with an in-memory cache; it is safe for concurrent
// use.
type Resolver struct {
	// CacheFile, when set, keeps the cache across processes (agora uses
	// AGORA_HOME/runtimebin.json). It MUST be a file only agora writes: a forged entry would
	// put a false version and digest on the record.
	CacheFile string
	// PATH is searched when no binary is configured; "" means the process's PATH.
	PATH string
	// VersionTimeout bounds `BINARY --version` (0: DefaultVersionTimeout).
	VersionTimeout time.Duration

	mu  sync.Mutex
	mem map[string]cacheEntry
}

// fileID is what must be unchanged for a cached version and digest to still describe a file.
// ctime moves on every write and on every metadata change, and no unprivileged user can set
// it back.
type fileID struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

func identify(st os.FileInfo) (fileID, error) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, fmt.Errorf("no stat identity for %s", st.Name())
	}
	return fileID{
		Dev: uint64(sys.Dev), Ino: sys.Ino, Size: st.Size(),
		MtimeNs: st.ModTime().UnixNano(), CtimeNs: sys.Ctim.Nano(),
	}, nil
}

type cacheEntry struct {
	ID          fileID `json:"id"`
	SHA256      string `json:"sha256"`
	Version     string `json:"version"`
	Interpreter string `json:"interpreter,omitempty"`
}

// Resolve finds runtime's native executable (configured, or on the PATH when configured is
// ""), checks that a sandbox can run it, and returns it with its version and sha256, from the
// cache when the file is unchanged. Errors: [*UnknownRuntimeError], [*NotFoundError], or one
// that says why the file cannot be used.
func (r *Resolver) Resolve(ctx context.Context, runtime, configured string) (Binary, error) {
	if _, ok := known(runtime); !ok {
		return Binary{}, &UnknownRuntimeError{Runtime: runtime}
	}
	pathEnv := cmp.Or(r.PATH, os.Getenv("PATH"))
	path, err := locate(runtime, configured, pathEnv)
	if err != nil {
		return Binary{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return Binary{}, fmt.Errorf("%s runtime: %w", runtime, err)
	}
	if st.Mode()&0o111 == 0 {
		return Binary{}, fmt.Errorf("%s runtime: %s is not executable", runtime, path)
	}
	if st.Mode()&0o022 != 0 {
		// Anyone who can rewrite it decides what every sandbox of this runtime runs.
		return Binary{}, fmt.Errorf("%s runtime: %s is writable by its group or others (mode %v); fix it with chmod go-w %s", runtime, path, st.Mode().Perm(), path)
	}
	id, err := identify(st)
	if err != nil {
		return Binary{}, fmt.Errorf("%s runtime: %w", runtime, err)
	}
	b := Binary{Runtime: runtime, Path: path, Size: st.Size()}
	if e, ok := r.lookup(path, id); ok {
		b.SHA256, b.Version, b.Interpreter = e.SHA256, e.Version, e.Interpreter
		return b, nil
	}
	if b.Interpreter, err = checkRunnable(path); err != nil {
		return Binary{}, fmt.Errorf("%s runtime: %w", runtime, err)
	}
	if b.SHA256, err = hashFile(path, id); err != nil {
		return Binary{}, fmt.Errorf("%s runtime: %w", runtime, err)
	}
	if b.Version, err = version(ctx, path, r.timeout()); err != nil {
		return Binary{}, fmt.Errorf("%s runtime: %w", runtime, err)
	}
	r.store(path, cacheEntry{ID: id, SHA256: b.SHA256, Version: b.Version, Interpreter: b.Interpreter})
	return b, nil
}

func (r *Resolver) timeout() time.Duration {
	if r.VersionTimeout > 0 {
		return r.VersionTimeout
	}
	return DefaultVersionTimeout
}

// hashFile hashes the file at path and checks it is still the file identified by want
// afterwards, so a file changed while it was read is not described by a digest of neither.
func hashFile(path string, want fileID) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if got, err := identify(st); err != nil || got != want {
		return "", fmt.Errorf("%s changed while it was hashed; try again", path)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
