package workerbin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// maxSize caps the worker binary read into memory to pin it (the binary-level test keeps it
// under 20 MiB).
const maxSize = 64 << 20

// DirName is the directory in AGORA_HOME holding the pinned copies.
const DirName = "bin"

// Pinner pins worker binaries into Dir. The zero value is not usable; it is safe for
// concurrent use, and several processes may share one Dir.
type Pinner struct {
	// Dir holds the pinned copies and their index (AGORA_HOME/bin). It MUST be a directory
	// only agora writes: a copy there is bound into sandboxes as it is.
	Dir string
	// Expect is the Build the worker must have been built from; nil means this process's own
	// ([Self]).
	Expect *Build

	mu  sync.Mutex
	mem map[string]pin
	// pinning serializes the pins this process makes: a hundred dispatches starting at once
	// pin once, and no copy is rewritten while another dispatch is binding it.
	pinning sync.Mutex
}

// fileID is what must be unchanged for a pin to still describe a file. ctime moves on every
// write and every metadata change, and no unprivileged user can set it back.
type fileID struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

func identify(st os.FileInfo) fileID {
	id := fileID{Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino, id.CtimeNs = uint64(sys.Dev), sys.Ino, sys.Ctim.Nano()
	}
	return id
}

// pin is one pinned source: the identity of the file read, the copy written, and what they
// hold.
type pin struct {
	Source fileID `json:"source"`
	Copy   fileID `json:"copy"`
	SHA256 string `json:"sha256"`
	Build  string `json:"build"`
	// Worker is the copy's build, checked against the pinning agora's on every use: the
	// index outlives the agora that wrote it (an upgraded agora must not take an older one's
	// pin of an older worker on trust).
	Worker Build `json:"worker"`
	// CopySeenNs is a time (Unix ns) before Copy was taken and the copy checked to hold the
	// worker's bytes. Copy is trusted without a read only when this is racyWindow or more
	// past the copy's ctime; an entry without it (written before it existed) is not.
	CopySeenNs int64 `json:"copy_seen_ns,omitempty"`
}

// racyWindow is how far past a file's ctime the clock must be when its identity is taken
// for that identity to be trusted later without reading the file. On a filesystem whose
// ctime comes from the kernel's coarse clock (ext4 and xfs before Linux 6.13, ramfs: one
// tick, 1-10 ms), a change within the tick of the ctime leaves the ctime as it was, so an
// identity taken then also describes the file as rewritten after it; once the clock is
// more than a tick past the ctime, every change moves it. (A filesystem that keeps whole
// seconds, such as ext4 with 128-byte inodes, is not covered.) See
// TestRedTeam28S3_CopyRewrittenWhileItIsHashedInTheSameTick.
const racyWindow = 20 * time.Millisecond

// Pin returns the pinned copy of the worker binary at source (from [Locate]; configured says
// agora.yaml named it, for the error's fix). An unchanged source with an unchanged copy costs
// two stat calls; otherwise the source is read, checked and copied again. Errors:
// [*MissingError], [*MismatchError], or one that says what failed.
func (p *Pinner) Pin(ctx context.Context, source string, configured bool) (Binary, error) {
	st, err := os.Stat(source)
	if err != nil {
		return Binary{}, &MissingError{Path: source, Configured: configured, Err: err}
	}
	if err := checkFile(source, st, configured); err != nil {
		return Binary{}, err
	}
	if err := checkDir(p.Dir); err != nil {
		return Binary{}, err
	}
	id := identify(st)
	if b, ok := p.pinned(source, id); ok {
		return b, nil
	}
	if err := ctx.Err(); err != nil {
		return Binary{}, err
	}
	p.pinning.Lock()
	defer p.pinning.Unlock()
	if b, ok := p.pinned(source, id); ok { // pinned while this one waited
		return b, nil
	}
	return p.pinFresh(source, id, configured)
}

// PinBeside is [Pinner.Pin] of source, a file whose name the dispatcher looks for beside the
// worker it pinned (the exec-only worker, [ExecBeside]), owned by whoever owns the worker: the
// name is optional, so where others may create files (a sticky directory, which the checks
// accept for a file its owner alone may replace) another user could otherwise be first to
// take it. Once the owners agree, nobody but the worker's owner can replace source there.
func (p *Pinner) PinBeside(ctx context.Context, worker Binary, source string) (Binary, error) {
	if err := sameOwner(worker.Source, source); err != nil {
		return Binary{}, err
	}
	return p.Pin(ctx, source, false)
}

// sameOwner refuses source unless whoever owns worker owns it.
func sameOwner(worker, source string) error {
	wst, err := os.Stat(worker)
	if err != nil {
		return &MissingError{Path: worker, Err: err}
	}
	st, err := os.Stat(source)
	if err != nil {
		return &MissingError{Path: source, Err: err}
	}
	if got, want := owner(st), owner(wst); got != want {
		return fmt.Errorf("worker binary %s is owned by uid %d, not uid %d as %s beside it is: anyone who can make a file there decides what a sandbox runs; remove it, or reinstall both with %s",
			source, got, want, worker, FixCommand)
	}
	return nil
}

// owner is the uid owning the file st describes.
func owner(st os.FileInfo) uint32 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Uid
	}
	return ^uint32(0)
}

// pinned returns the pin of source when source is still the file id describes and its copy
// is still the file the pin wrote.
func (p *Pinner) pinned(source string, id fileID) (Binary, bool) {
	e, ok := p.lookup(source)
	if !ok || e.Source != id || !p.want().accepts(e.Worker) {
		return Binary{}, false
	}
	if e.CopySeenNs-e.Copy.CtimeNs < int64(racyWindow) {
		return Binary{}, false // taken within a tick of its ctime: read and hashed again
	}
	cp := p.copyPath(e.SHA256)
	if cst, err := os.Stat(cp); err != nil || identify(cst) != e.Copy {
		return Binary{}, false
	}
	return Binary{Source: source, Path: cp, SHA256: e.SHA256, Version: e.Build}, true
}

// pinFresh reads source (which must still be the file id describes), checks its build, and
// writes the bytes it read, and only those, to the copy it hashes.
func (p *Pinner) pinFresh(source string, id fileID, configured bool) (Binary, error) {
	b, err := readIdentified(source, id, configured)
	if err != nil {
		return Binary{}, err
	}
	got, err := checkBuild(source, bytes.NewReader(b), p.want())
	if err != nil {
		return Binary{}, err
	}
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	cp := p.copyPath(digest)
	copyID, seen, ok := settledCopy(cp, digest)
	if !ok {
		copyID, seen, err = p.writeCopy(cp, digest, b)
	}
	if err != nil {
		return Binary{}, fmt.Errorf("pin the worker binary %s: %w", source, err)
	}
	e := pin{Source: id, Copy: copyID, SHA256: digest, Build: got.String(), Worker: got, CopySeenNs: seen}
	p.store(source, e)
	return Binary{Source: source, Path: cp, SHA256: digest, Version: e.Build}, nil
}

// want is the Build the worker must agree with: Expect, or this process's own.
func (p *Pinner) want() Build {
	if p.Expect != nil {
		return *p.Expect
	}
	return Self()
}

func (p *Pinner) copyPath(digest string) string {
	return filepath.Join(p.Dir, Name+"-"+digest)
}

// readIdentified reads the whole file and checks, on the open descriptor, that it is the file
// id describes before and after the read: a file replaced or rewritten meanwhile is refused.
func readIdentified(path string, id fileID, configured bool) ([]byte, error) {
	// O_NONBLOCK: a FIFO put at path after its stat fails the identity check below instead
	// of blocking the open (and every pin waiting on p.pinning) until someone writes to it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, &MissingError{Path: path, Configured: configured, Err: err}
	}
	defer f.Close()
	same := func() bool { st, err := f.Stat(); return err == nil && identify(st) == id }
	if !same() {
		return nil, fmt.Errorf("worker binary %s changed while it was read; try again", path)
	}
	if id.Size > maxSize {
		return nil, &MissingError{Path: path, Configured: configured, Err: fmt.Errorf("over %d bytes, so not %s", maxSize, MainPath)}
	}
	// One buffer of the size id holds, read in full (io.ReadAll's doubling
	// allocated ~60 MB to read a 13 MB worker). A file that shrank meanwhile ends early; one
	// that grew or was rewritten no longer matches id below.
	b := make([]byte, id.Size)
	if _, err := io.ReadFull(f, b); errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("worker binary %s changed while it was read; try again", path)
	} else if err != nil {
		return nil, fmt.Errorf("read the worker binary %s: %w", path, err)
	}
	if !same() {
		return nil, fmt.Errorf("worker binary %s changed while it was read; try again", path)
	}
	return b, nil
}

// settledCopy is sameCopy taken once the clock is racyWindow past the copy's ctime (it
// waits at most that long: only a copy just written is that young), with the time just
// before its check began: an identity that later pins may trust.
func settledCopy(path, digest string) (fileID, int64, bool) {
	if st, err := os.Lstat(path); err == nil {
		if wait := time.Until(time.Unix(0, identify(st).CtimeNs).Add(racyWindow)); wait > 0 {
			time.Sleep(min(wait, racyWindow))
		}
	}
	seen := time.Now().UnixNano()
	id, ok := sameCopy(path, digest)
	return id, seen, ok
}

// sameCopy returns the identity of the copy at path when it already holds exactly the bytes
// of digest, mode 0555 (another process pinned the same worker): it is not rewritten under
// a dispatch that may be binding it.
func sameCopy(path, digest string) (fileID, bool) {
	f, err := os.Open(path)
	if err != nil {
		return fileID{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o555 {
		return fileID{}, false
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, maxSize+1)); err != nil || hex.EncodeToString(h.Sum(nil)) != digest {
		return fileID{}, false
	}
	after, err := f.Stat()
	if err != nil || identify(after) != identify(st) {
		return fileID{}, false
	}
	return identify(st), true
}

// writeCopy writes b to path, mode 0555, and returns the identity of the copy at path as
// [settledCopy] takes it. The temporary file is linked to path, never renamed over it (a
// reader never sees half a file): every dispatch runs in its own `agora dispatch supervise`
// process, and several pinning a new worker at once would otherwise replace one another's
// copy while a sandbox binds it, whose bind of the unlinked file then fails (bwrap: "No such
// file or directory"). When another process linked it first, its copy is used if it holds
// exactly b; a copy with other bytes (tampered with: the name is its digest) is replaced.
func (p *Pinner) writeCopy(path, digest string, b []byte) (fileID, int64, error) {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return fileID{}, 0, err
	}
	tmp, err := p.writeTemp(b)
	if err != nil {
		return fileID{}, 0, err
	}
	defer os.Remove(tmp) // the link at path, if any, keeps the file
	err = os.Link(tmp, path)
	if errors.Is(err, fs.ErrExist) {
		if id, seen, ok := settledCopy(path, digest); ok {
			return id, seen, nil // another process pinned the same worker first
		}
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fileID{}, 0, err
	}
	// The temporary name goes before the copy's identity is taken: unlinking it changes the
	// copy's link count and so its ctime, and an identity taken before would not match the
	// next dispatch's stat, which would then read and hash the whole worker again.
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fileID{}, 0, err
	}
	// The identity recorded is trusted by every later pin without a read, so it is taken of
	// the bytes checked to be b's, not of whatever is at path: between the link and now the
	// copy may have been replaced or rewritten (whoever can write AGORA_HOME, a sandbox: none
	// agent), and a stat of the name recorded that file as the worker for good
	// (TestRedTeam28S3_CopyChangedWhilePinnedIsNeverTrusted). One more hash of the
	// copy, on a fresh pin only.
	id, seen, ok := settledCopy(path, digest)
	if !ok {
		return fileID{}, 0, fmt.Errorf("the copy %s changed while it was written; try again", path)
	}
	return id, seen, nil
}

// writeTemp writes b to a new temporary file in p.Dir, mode 0555, synced, and returns its
// name. The file is open for writing under syscall.ForkLock: a sandbox this process starts
// meanwhile would otherwise inherit the write descriptor until its exec, and exec'ing the
// copy while any process holds it open for writing fails with ETXTBSY (golang/go#22315).
func (p *Pinner) writeTemp(b []byte) (string, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	tmp, err := os.CreateTemp(p.Dir, ".pin-*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Chmod(0o555)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// checkDir refuses a pin directory that someone other than agora's user (or root) may write:
// a copy there is bound as it is, so whoever can replace it between its pin and its bind
// decides what the sandbox runs. A missing directory is fine: writeCopy makes it 0700.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("the worker's pin directory %s: %w", dir, err)
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return fmt.Errorf("the worker's pin directory %s is not a directory; remove it and agora makes it again", dir)
	case st.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("the worker's pin directory %s is writable by its group or others (mode %v): whoever can write it decides what every sandbox runs; fix it with chmod go-w %s", dir, st.Mode().Perm(), dir)
	case sys != nil && sys.Uid != uint32(os.Geteuid()) && sys.Uid != 0:
		return fmt.Errorf("the worker's pin directory %s belongs to uid %d, not to agora's user (uid %d): whoever owns it decides what every sandbox runs; remove it and agora makes it again", dir, sys.Uid, os.Geteuid())
	}
	return nil
}

// Inspect checks the worker binary at source as Pin would (a regular executable only its
// owner writes, cmd/agora-worker built from this agora's source) and returns its digest,
// without pinning anything: Binary.Path is "". agora doctor runs it.
func Inspect(source string, configured bool, want Build) (Binary, error) {
	st, err := os.Stat(source)
	if err != nil {
		return Binary{}, &MissingError{Path: source, Configured: configured, Err: err}
	}
	if err := checkFile(source, st, configured); err != nil {
		return Binary{}, err
	}
	b, err := readIdentified(source, identify(st), configured)
	if err != nil {
		return Binary{}, err
	}
	got, err := checkBuild(source, bytes.NewReader(b), want)
	if err != nil {
		return Binary{}, err
	}
	sum := sha256.Sum256(b)
	return Binary{Source: source, SHA256: hex.EncodeToString(sum[:]), Version: got.String()}, nil
}

// InspectBeside is [Inspect] of source, found beside worker as [Pinner.PinBeside] finds it,
// with PinBeside's owner check.
func InspectBeside(worker Binary, source string, want Build) (Binary, error) {
	if err := sameOwner(worker.Source, source); err != nil {
		return Binary{}, err
	}
	return Inspect(source, false, want)
}
