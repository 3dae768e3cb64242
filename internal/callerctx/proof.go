package callerctx

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A Prover issues challenges that only a process the kernel lets inspect this one can
// answer. Each is a memfd of this process whose name holds a fresh random secret; the caller
// reads the name from /proc/<pid>/fd/<fd> (readlink), which the kernel allows only after
// ptrace_may_access(PTRACE_MODE_READ_FSCREDS) of this process: the caller's user is this
// process's (or it holds CAP_SYS_PTRACE), its effective capabilities hold every capability
// this process may use, it is in no Landlock domain that this process is outside of, and
// every LSM's ptrace rule lets it read this process. That is the kernel's own word that the
// caller may do what this process may do, in exactly the ways [Read] cannot see (a Landlock
// domain has no /proc file). Yama's ptrace_scope governs only attaching, not this read.
//
// A challenge is answered once, by the process it was issued to, within ProofTTL. The zero
// Prover is ready to use.
type Prover struct {
	mu      sync.Mutex
	pending map[int]*challenge // by fd
}

type challenge struct {
	f      *os.File
	secret string
	peer   int32
	issued time.Time
}

// ProofTTL bounds how long a challenge waits for its answer: the CLI answers at once (a
// readlink between two requests).
const ProofTTL = 10 * time.Second

// maxPending bounds the challenges waiting at once (each holds a descriptor); the oldest
// gives way to a new one.
const maxPending = 64

// memfdPrefix begins every challenge's memfd name; the secret follows.
const memfdPrefix = "agora-handoff-proof-"

// Issue makes a challenge for the process peer (by its pid, as this process sees it) and
// returns the descriptor the caller reads at /proc/<this pid>/fd/<fd>.
func (p *Prover) Issue(peer int32, now time.Time) (int, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return 0, err
	}
	secret := hex.EncodeToString(b[:])
	fd, err := unix.MemfdCreate(memfdPrefix+secret, unix.MFD_CLOEXEC)
	if err != nil {
		return 0, fmt.Errorf("hand-off proof: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "handoff-proof")
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(now)
	if p.pending == nil {
		p.pending = map[int]*challenge{}
	}
	for len(p.pending) >= maxPending {
		oldest := -1
		for k, c := range p.pending {
			if oldest < 0 || c.issued.Before(p.pending[oldest].issued) {
				oldest = k
			}
		}
		p.drop(oldest)
	}
	p.pending[fd] = &challenge{f: f, secret: secret, peer: peer, issued: now}
	return fd, nil
}

// Check takes the answer (the secret read at fd) of process peer: nil when it is the secret
// of a challenge issued to peer within ProofTTL. An answer from peer uses its challenge up,
// right or wrong; one from another process leaves it.
func (p *Prover) Check(peer int32, fd int, secret string, now time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expire(now)
	c, ok := p.pending[fd]
	if !ok {
		return errors.New("no hand-off proof is waiting at that descriptor (none asked for, answered already, or older than " + ProofTTL.String() + ")")
	}
	if c.peer != peer {
		// Left for its own process: another may not use up a challenge it was not issued.
		return errors.New("the hand-off proof was issued to another process")
	}
	p.drop(fd)
	if subtle.ConstantTimeCompare([]byte(c.secret), []byte(secret)) != 1 {
		return errors.New("the hand-off proof's secret is wrong")
	}
	return nil
}

// Pending is how many challenges wait for their answer.
func (p *Prover) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pending)
}

func (p *Prover) expire(now time.Time) {
	for fd, c := range p.pending {
		if now.Sub(c.issued) > ProofTTL || now.Before(c.issued) {
			p.drop(fd)
		}
	}
}

func (p *Prover) drop(fd int) {
	if c, ok := p.pending[fd]; ok {
		c.f.Close()
		delete(p.pending, fd)
	}
}

// Answer reads the secret of the challenge at descriptor fd of process pid (as this process
// sees it: the peer credentials of its connection, never a number the taker sends). Its
// error is the kernel's refusal (EACCES, EPERM) when this process may not inspect pid.
func Answer(pid int32, fd int) (string, error) {
	if pid <= 0 || fd < 0 {
		return "", fmt.Errorf("hand-off proof: no process to read (pid %d, fd %d)", pid, fd)
	}
	link, err := os.Readlink("/proc/" + strconv.Itoa(int(pid)) + "/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", fmt.Errorf("hand-off proof: %w", err)
	}
	// "/memfd:<name> (deleted)"
	name, ok := strings.CutPrefix(link, "/memfd:"+memfdPrefix)
	secret, ok2 := strings.CutSuffix(name, " (deleted)")
	if !ok || !ok2 || len(secret) != 64 {
		return "", fmt.Errorf("hand-off proof: descriptor %d of process %d is not a proof", fd, pid)
	}
	return secret, nil
}
