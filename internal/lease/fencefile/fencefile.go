// Package fencefile carries a leader's fence (internal/lease) to the processes it starts: the
// detached dispatch supervisors and the warm standbys of `agora orch serve` write the same
// agora.db and act on the same cluster as serve, so a serve that lost its lease must stop them
// too, and they outlive it in their own sessions.
//
// The leader writes a small file in the home ([Create]) whose one mutable word is its fence's
// deadline on CLOCK_BOOTTIME, the very deadline its [lease.Fence] holds, updated in place (an
// atomic store into a shared mapping) with each renew and set to shut when leadership ends.
// A child is told the file by the environment ([EnvName]: the term's id and the path) and
// checks it before every commit ([FromEnv], store.SetFence) with a clock read and an atomic
// load: the same host and the same boot, so the same clock as the leader's own check.
//
// Every term writes a new file (renamed over the last), so a child of an old term keeps its old
// term's mapping, shut, and never passes under a newer leader it was not started by. A child
// told of a fence that it cannot read, whose header is not what it was told, whose boot is not
// this one, whose deadline lies further ahead than a renew can push it (a garbled word), or
// that is not the leader's own file (a symlink, another user's, writable by others) is fenced:
// the check fails closed. So is one truncated under the child's mapping: the load's fault is
// recovered as a refusal, not a crash.
package fencefile

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnvName names the variable that tells a child its leader's fence: "TERM:PATH", TERM the
// hex of the file's 16-byte term id.
const EnvName = "AGORA_LEADER_FENCE"

// The file is one fixed-size record. Only the deadline changes after Create, by atomic stores.
const (
	size      = 64
	offMagic  = 0  // 8 bytes
	offBoot   = 8  // 16 bytes: the boot id of the host's boot whose clock the deadline reads
	offTerm   = 24 // 16 bytes: random, one per leadership term
	offValid  = 40 // int64: how far a renew moves the deadline (the fence's 4/5 of the lease)
	offDead   = 48 // int64, 8-aligned: the deadline; 0 never renewed, -1 shut
	maxValid  = int64(time.Hour)
	termBytes = 16
)

var magic = [8]byte{'a', 'g', 'f', 'e', 'n', 'c', 'e', 1}

// Header is a fence file's fixed part.
type Header struct {
	Boot  [16]byte
	Term  [termBytes]byte
	Valid time.Duration
}

// ErrFenced wraps every refusal of a child's fence.
var ErrFenced = errors.New("leader fence")

// parseFixed reads the part before the deadline word, which no one writes after Create: a
// check reads it plainly, and the word only atomically.
func parseFixed(b []byte) (Header, error) {
	var h Header
	if len(b) != offDead {
		return h, fmt.Errorf("%d bytes of header, want %d", len(b), offDead)
	}
	if !bytes.Equal(b[offMagic:offMagic+8], magic[:]) {
		return h, errors.New("not a fence file (bad magic)")
	}
	copy(h.Boot[:], b[offBoot:offBoot+16])
	copy(h.Term[:], b[offTerm:offTerm+termBytes])
	v := int64(binary.NativeEndian.Uint64(b[offValid:]))
	if v <= 0 || v > maxValid {
		return h, fmt.Errorf("renew validity %d ns out of range", v)
	}
	h.Valid = time.Duration(v)
	if h.Term == ([termBytes]byte{}) {
		return h, errors.New("no term id")
	}
	return h, nil
}

func (h Header) marshal(deadline int64) []byte {
	b := make([]byte, size)
	copy(b[offMagic:], magic[:])
	copy(b[offBoot:], h.Boot[:])
	copy(b[offTerm:], h.Term[:])
	binary.NativeEndian.PutUint64(b[offValid:], uint64(h.Valid))
	binary.NativeEndian.PutUint64(b[offDead:], uint64(deadline))
	return b
}

// ParseEnv splits the value of [EnvName] into the term id and the file's path, which must
// be absolute.
func ParseEnv(v string) (term [termBytes]byte, path string, err error) {
	t, p, ok := strings.Cut(v, ":")
	if !ok {
		return term, "", fmt.Errorf("%s: want TERM:PATH", EnvName)
	}
	raw, err := hex.DecodeString(t)
	if err != nil || len(raw) != termBytes {
		return term, "", fmt.Errorf("%s: the term is not %d hex bytes", EnvName, termBytes)
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return term, "", fmt.Errorf("%s: %q is not a clean absolute path", EnvName, p)
	}
	copy(term[:], raw)
	return term, p, nil
}

// now reads CLOCK_BOOTTIME, as lease's fence does; a failing read stops the process (a
// stopped process writes nothing). Tests replace it.
var now = func() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		panic("fencefile: read CLOCK_BOOTTIME: " + err.Error())
	}
	return ts.Nano()
}

// bootID is this boot's id, read once.
var bootID = sync.OnceValues(func() ([16]byte, error) {
	var id [16]byte
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id, err
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err != nil || len(raw) != 16 {
		return id, fmt.Errorf("boot id %q: not a uuid", strings.TrimSpace(string(b)))
	}
	copy(id[:], raw)
	return id, nil
})

// word is the deadline in a mapping of the file (page-aligned, so offDead is 8-aligned).
func word(mem []byte) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&mem[offDead]))
}

// Writer is a leader's side of a fence file: it mirrors the fence's deadline into the file.
type Writer struct {
	path string
	term [termBytes]byte
	mem  []byte
	dead *atomic.Int64
}

// Create writes a new, shut fence file at path for a term whose renews keep the fence open
// for valid, replacing any file there (a new term: the children of the old one keep its
// shut record), and maps it for [Writer.Advance].
func Create(path string, valid time.Duration) (*Writer, error) {
	if int64(valid) <= 0 || int64(valid) > maxValid {
		return nil, fmt.Errorf("leader fence file: renew validity %v out of range", valid)
	}
	boot, err := bootID()
	if err != nil {
		return nil, fmt.Errorf("leader fence file: %w", err)
	}
	h := Header{Boot: boot, Valid: valid}
	if _, err := rand.Read(h.Term[:]); err != nil {
		return nil, fmt.Errorf("leader fence file: term id: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".leader-fence-*")
	if err != nil {
		return nil, fmt.Errorf("leader fence file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	defer tmp.Close()
	// 0: a fence never renewed, closed until the leader's fence passes its first deadline on.
	if _, err := tmp.Write(h.marshal(0)); err != nil {
		return nil, fmt.Errorf("leader fence file: %w", err)
	}
	// Children run as this user; no one else needs to read it (0600 from CreateTemp).
	mem, err := unix.Mmap(int(tmp.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("leader fence file: map: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("leader fence file: %w", err)
	}
	return &Writer{path: path, term: h.Term, mem: mem, dead: word(mem)}, nil
}

// Env is the [EnvName] entry that tells a child this fence.
func (w *Writer) Env() string {
	return EnvName + "=" + hex.EncodeToString(w.term[:]) + ":" + w.path
}

// Advance moves the deadline forward to end (an instant of CLOCK_BOOTTIME, nanoseconds), as
// lease's Fence does: never back, and never reopening a shut file.
func (w *Writer) Advance(end int64) {
	for {
		old := w.dead.Load()
		if old < 0 || end <= old || w.dead.CompareAndSwap(old, end) {
			return
		}
	}
}

// Shut closes the file's fence for good: every child of this term is fenced from now on.
func (w *Writer) Shut() { w.dead.Store(-1) }

// Check reads the file's fence as a child would; for tests and diagnostics.
func (w *Writer) Check() error { return check(w.dead, w.mem, w.term, w.path) }

// Reader is a child's side: the file's mapping, read-only.
type Reader struct {
	path string
	term [termBytes]byte
	mem  []byte
	dead *atomic.Int64
}

// Open maps the fence file that env (the value of [EnvName]) names, after checking it is
// one of this boot and of the term env names.
func Open(env string) (*Reader, error) {
	term, path, err := ParseEnv(env)
	if err != nil {
		return nil, err
	}
	// The leader renames a regular file of its own into place and never writes a symlink
	// there, and only it and its children (its user) may move the deadline: a
	// symlink at the path, a file of another user, or one that others may write (a home
	// made group- or world-writable) could be kept open by someone else, so it is refused.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != size {
		return nil, fmt.Errorf("%s: not a fence file (%d bytes, mode %#o)", path, st.Size, st.Mode)
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o022 != 0 {
		return nil, fmt.Errorf("%s: not this user's own fence file (owner uid %d, mode %#o): others could keep it open", path, st.Uid, st.Mode&0o777)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: map: %w", path, err)
	}
	r := &Reader{path: path, term: term, mem: mem, dead: word(mem)}
	if err := check(nil, mem, term, path); err != nil && !errors.Is(err, errClosed) {
		_ = unix.Munmap(mem)
		return nil, err
	}
	return r, nil
}

// errClosed marks a refusal of a well-formed file whose fence is not open now.
var errClosed = errors.New("closed")

// Check is nil while the leader's fence is open. It reads the clock, the deadline (an atomic
// load) and compares 40 bytes of header: cheap enough for every commit.
func (r *Reader) Check() error { return check(r.dead, r.mem, r.term, r.path) }

// check is the fence's answer for mapping mem; dead nil checks the header only.
//
// The file may be truncated under the mapping (by its user, by hand or by a repair), and a
// load from the page past the file's end faults (SIGBUS), which would kill the
// process. So the loads run with the runtime's panic on fault, and a fault inside mem is a
// closed fence, as a garbled file is: the process refuses to commit, stated, and goes on.
// A fault elsewhere is a bug here and panics on. Per check the cost is two deferred calls
// and two stores to the goroutine: BenchmarkFenceFile_Check, about 400 ns (mostly the clock
// read) before and 420 ns after, no allocation.
func check(dead *atomic.Int64, mem []byte, term [termBytes]byte, path string) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(interface{ Addr() uintptr })
			base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
			if !ok || f.Addr() < base || f.Addr() >= base+uintptr(len(mem)) {
				panic(r)
			}
			err = fmt.Errorf("%w %s: fence file truncated (its mapping faulted); refusing to commit", ErrFenced, path)
		}
	}()
	h, err := parseFixed(mem[:offDead])
	if err == nil && h.Term != term {
		err = errors.New("a newer leadership term replaced it")
	}
	if err == nil {
		var boot [16]byte
		if boot, err = bootID(); err == nil && boot != h.Boot {
			err = errors.New("written in another boot")
		}
	}
	if err != nil {
		return fmt.Errorf("%w %s: %v; refusing to commit", ErrFenced, path, err)
	}
	if dead == nil {
		return nil
	}
	d := dead.Load()
	t := now()
	switch {
	case d == 0:
		return fmt.Errorf("%w %s: %w: not held yet; refusing to commit", ErrFenced, path, errClosed)
	case d < 0:
		return fmt.Errorf("%w %s: %w: leadership ended; refusing to commit", ErrFenced, path, errClosed)
	case t >= d:
		return fmt.Errorf("%w %s: %w: not renewed in time (passed %s ago); refusing to commit, another replica may lead",
			ErrFenced, path, errClosed, time.Duration(t-d).Round(time.Millisecond))
	case d-t > int64(h.Valid):
		// No renew sets a deadline further than valid from now: the word is garbled.
		return fmt.Errorf("%w %s: deadline %s ahead, beyond a renew's %s; refusing to commit", ErrFenced, path,
			time.Duration(d-t).Round(time.Millisecond), h.Valid)
	}
	return nil
}

// FromEnv is the fence a child started by a leader must keep: ok is false when the
// environment names none. A named fence that cannot be opened gives a check that always
// fails (fail closed), with why.
func FromEnv() (check func() error, env string, ok bool) {
	v, ok := os.LookupEnv(EnvName)
	if !ok {
		return nil, "", false
	}
	r, err := Open(v)
	if err != nil && !errors.Is(err, ErrFenced) {
		err = fmt.Errorf("%w: %s names no readable fence: %v; refusing to commit", ErrFenced, EnvName, err)
	}
	if err != nil {
		return func() error { return err }, EnvName + "=" + v, true
	}
	return r.Check, EnvName + "=" + v, true
}

// inherited is the [EnvName] entry this process passes to the processes it starts: its own
// fence's file (a leader's) or the one it was started under (a child's); "" for none.
var inherited atomic.Pointer[string]

// SetInherited makes env (an [EnvName] entry, "" for none) what [ChildEnv] passes on. The
// returned function puts back the one it replaced.
func SetInherited(env string) (restore func()) {
	old := inherited.Swap(&env)
	return func() { inherited.Store(old) }
}

// ChildEnv is base (os.Environ()) for a child this process starts, with the fence of this
// process in place of any [EnvName] base holds: a child is fenced exactly when its parent
// is, by its parent's fence.
func ChildEnv(base []string) []string {
	out := make([]string, 0, len(base)+1)
	for _, kv := range base {
		if !strings.HasPrefix(kv, EnvName+"=") {
			out = append(out, kv)
		}
	}
	if p := inherited.Load(); p != nil && *p != "" {
		out = append(out, *p)
	}
	return out
}
