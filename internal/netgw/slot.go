package netgw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/strictjson"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Warm slots: a worker container or pod started ahead, holding only its slot's token,
// waits on the gateway (POST /v1/slots/SLOT/claim) until the host binds a dispatch to it.
// The gateway then revokes the slot's token FIRST (slot.json goes) and only then hands the
// worker the bound dispatch's id and session token: a slot is claimed once, and a token that
// claimed, or was revoked, opens nothing. The slot token is checked against its own slot's
// record only; it is never a dispatch's token, so no dispatch route accepts it.
//
// Like the sessions, the slots live in a directory the server and the holder share
// (AGORA_HOME/gateway/slots, 0700), one directory per slot:
//
//	slot.json  the slot id and its token's SHA-256 (never the token); gone = revoked
//	hold       flocked by the slot's holder for its whole life: the kernel drops the lock
//	           with a holder killed with -9, and a slot whose hold is free is stale: the
//	           gateway revokes it instead of waiting, and [Slots.Sweep] removes it
//	c          the binder's Unix socket, made under the slot's lock once a dispatch is
//	           bound: it says the grant once, to the gateway, and closes
//
// Every change of a slot is made under its lock (.locks/SLOT, as a dispatch's).
type Slots struct {
	// Dir is the slots directory; it is made 0700 when missing.
	Dir string
}

// Slot files.
const (
	slotFile = "slot.json"
	slotHold = "hold"
	// slotStaging prefixes a slot's directory while Create makes it: never a slot id, so
	// Sweep and the gateway pass it by.
	slotStaging = ".new-"
	slotSocket  = "c"
)

// ErrNoSlot: the slot does not stand: never made, claimed already, revoked, or its holder
// is gone.
var ErrNoSlot = errors.New("no such warm slot: it was claimed, revoked or never made")

// errNotBound: the slot stands and no dispatch is bound to it yet.
var errNotBound = errors.New("no dispatch bound to the slot yet")

// slotRecord is slot.json.
type slotRecord struct {
	Version     int    `json:"version"`
	Slot        string `json:"slot"`
	TokenSHA256 string `json:"token_sha256"`
}

// Slot is one warm slot as its holder has it: its id, its token (for the container or pod,
// once) and the hold lock. Close it when the slot is no longer wanted.
type Slot struct {
	// ID names the slot in routes, in the container's or pod's name and labels.
	ID string
	// Token is the slot's bearer token. Hand it to the worker as a dispatch's token is
	// handed (a Secret, a file): never in argv, a log, a name, a label or an audit entry.
	Token string

	s    *Slots
	mu   sync.Mutex
	hold *os.File     // guarded by mu; nil once closed
	ln   net.Listener // guarded by mu: Bind's, while it waits; Close ends the wait
}

// Create makes a slot: its directory, its hold (held by this process until Close) and its
// token, whose record is written last, so the token works only once the slot is whole.
func (s *Slots) Create(ctx context.Context) (*Slot, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("make a warm slot: %w", err)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("make a warm slot: %w", err)
	}
	id := "s" + hex.EncodeToString(b[:])
	// The slot is made under a staging name no sweep reads (not a slot id) and renamed into
	// place once its hold is locked and its record written: a holder sweeping meanwhile (serve
	// before each standby start) saw a directory without a locked hold, counted its holder
	// gone and removed it under its maker.
	sd := filepath.Join(s.Dir, slotStaging+id)
	if err := os.Mkdir(sd, 0o700); err != nil {
		return nil, fmt.Errorf("make warm slot %s: %w", id, err)
	}
	hold, err := os.OpenFile(filepath.Join(sd, slotHold), os.O_RDWR|os.O_CREATE|os.O_EXCL|noFollow|syscall.O_CLOEXEC, 0o600)
	if err == nil {
		if err = syscall.Flock(int(hold.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			hold.Close()
		}
	}
	if err != nil {
		os.RemoveAll(sd)
		return nil, fmt.Errorf("make warm slot %s: hold: %w", id, err)
	}
	token, sum, err := newToken()
	if err == nil {
		err = writeJSON(sd, slotFile, slotRecord{Version: 1, Slot: id, TokenSHA256: sum})
	}
	if err == nil {
		err = os.Rename(sd, filepath.Join(s.Dir, id))
	}
	if err != nil {
		hold.Close()
		os.RemoveAll(sd)
		return nil, fmt.Errorf("make warm slot %s: %w", id, err)
	}
	return &Slot{ID: id, Token: token, s: s, hold: hold}, nil
}

// Bind binds dispatch (whose session token is token, from [Registry.Export]) to the slot
// and waits, while ctx lasts, until the slot's worker claims it. Only the slot's own token can
// take the grant, and only once. When ctx ends first the slot is revoked (its worker will never
// run a dispatch) and the error says so: the caller then closes the dispatch's session, whose
// token was never handed out, and starts the dispatch cold. The slot is spent either way.
func (sl *Slot) Bind(ctx context.Context, dispatch, token string) error {
	if !wire.ValidDispatchID(dispatch) {
		return fmt.Errorf("bind warm slot %s: dispatch id %q is not valid", sl.ID, dispatch)
	}
	grant, err := json.Marshal(remote.SlotGrant{Dispatch: dispatch, Token: token})
	if err != nil || len(grant) > remote.MaxSlotGrant {
		return fmt.Errorf("bind warm slot %s: the grant does not fit", sl.ID)
	}
	defer clear(grant)
	sl.mu.Lock()
	held := sl.hold != nil
	sl.mu.Unlock()
	if !held {
		return fmt.Errorf("bind warm slot %s: %w", sl.ID, ErrNoSlot)
	}
	sd := filepath.Join(sl.s.Dir, sl.ID)
	unlock, err := lockName(ctx, sl.s.Dir, sl.ID)
	if err != nil {
		return fmt.Errorf("bind warm slot %s: %w", sl.ID, err)
	}
	if _, err := loadSlot(sl.s.Dir, sl.ID); err != nil {
		unlock(false)
		sl.Close()
		return fmt.Errorf("bind warm slot %s: %w", sl.ID, err)
	}
	if _, err := os.Lstat(filepath.Join(sd, slotSocket)); err == nil {
		unlock(false)
		return fmt.Errorf("bind warm slot %s: a dispatch is bound to it already", sl.ID)
	}
	ln, err := listenUnix(filepath.Join(sd, slotSocket))
	unlock(false)
	if err != nil {
		sl.Close()
		return fmt.Errorf("bind warm slot %s: %w", sl.ID, err)
	}
	sl.mu.Lock()
	if sl.hold == nil { // closed meanwhile
		sl.mu.Unlock()
		ln.Close()
		return fmt.Errorf("bind warm slot %s: %w", sl.ID, ErrNoSlot)
	}
	sl.ln = ln
	sl.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	c, aerr := ln.Accept()
	stop()
	ln.Close()
	if aerr == nil {
		_, aerr = c.Write(grant)
		c.Close()
	}
	if aerr == nil {
		// Claimed: the gateway revoked the slot and removed its directory under its lock;
		// only the hold is left to let go of.
		sl.mu.Lock()
		if sl.hold != nil {
			sl.hold.Close()
		}
		sl.hold, sl.ln = nil, nil
		sl.mu.Unlock()
		return nil
	}
	sl.Close()
	if ctx.Err() != nil {
		aerr = context.Cause(ctx)
	}
	return fmt.Errorf("warm slot %s was not claimed: %w", sl.ID, aerr)
}

// Close revokes the slot unless it was claimed (its record goes, so its token opens nothing
// from now on), removes its directory and lets go of its hold. Idempotent.
func (sl *Slot) Close() error {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.hold == nil {
		return nil
	}
	if sl.ln != nil {
		sl.ln.Close()
	}
	err := sl.s.revoke(context.Background(), sl.ID)
	sl.hold.Close()
	sl.hold = nil
	return err
}

// revoke removes slot id's record first, then its directory, under its lock.
func (s *Slots) revoke(ctx context.Context, id string) error {
	unlock, lerr := lockName(ctx, s.Dir, id)
	sd := filepath.Join(s.Dir, id)
	err := os.Remove(filepath.Join(sd, slotFile))
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err == nil {
		err = os.RemoveAll(sd)
	}
	if lerr == nil {
		unlock(err == nil)
	}
	if err != nil {
		return fmt.Errorf("revoke warm slot %s: %w", id, err)
	}
	return nil
}

// Sweep revokes and removes every slot whose holder is gone (a serve or supervisor killed
// with -9 leaves them): a restarted holder calls it before it makes slots, and the providers
// delete the containers and pods of the slots it returns. A slot whose holder lives is left.
func (s *Slots) Sweep(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep warm slots: %w", err)
	}
	var gone []string
	var errs []error
	for _, e := range ents {
		if !remote.ValidSlotID(e.Name()) || !holderGone(filepath.Join(s.Dir, e.Name())) {
			continue
		}
		if err := s.revoke(ctx, e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		gone = append(gone, e.Name())
	}
	return gone, errors.Join(errs...)
}

// holderGone reports whether slot directory sd's hold is free: its holder closed it or died.
// A hold that cannot be opened counts as gone (fail closed: the slot is revoked).
func holderGone(sd string) bool {
	f, err := os.OpenFile(filepath.Join(sd, slotHold), os.O_RDONLY|noFollow|syscall.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
}

// loadSlot reads slot id's record; [ErrNoSlot] when there is none.
func loadSlot(dir, id string) (*slotRecord, error) {
	if !remote.ValidSlotID(id) {
		return nil, ErrNoSlot
	}
	b, err := readCapped(filepath.Join(dir, id, slotFile), maxSessionFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoSlot
	}
	if err != nil {
		return nil, fmt.Errorf("read warm slot %s: %w", id, err)
	}
	r, err := parseSlotRecord(b)
	if err != nil {
		return nil, fmt.Errorf("read warm slot %s: %w", id, err)
	}
	if r.Slot != id {
		return nil, fmt.Errorf("read warm slot %s: it names slot %q", id, r.Slot)
	}
	return r, nil
}

// parseSlotRecord decodes slot.json strictly.
func parseSlotRecord(b []byte) (*slotRecord, error) {
	var r slotRecord
	if err := strictjson.Decode("slot.json", b, maxSessionFile, &r); err != nil {
		return nil, err
	}
	if r.Version != 1 || !remote.ValidSlotID(r.Slot) || len(r.TokenSHA256) != 64 {
		return nil, errors.New("slot.json: want version 1, a slot id and a token hash")
	}
	return &r, nil
}

// parseSlotGrant decodes a binder's grant strictly and checks its shape.
func parseSlotGrant(b []byte) (remote.SlotGrant, error) {
	var g remote.SlotGrant
	if err := strictjson.Decode("slot grant", b, remote.MaxSlotGrant, &g); err != nil {
		return remote.SlotGrant{}, err
	}
	if !wire.ValidDispatchID(g.Dispatch) || len(g.Token) > 128 || len(g.Token) <= len(TokenPrefix) || g.Token[:len(TokenPrefix)] != TokenPrefix {
		return remote.SlotGrant{}, errors.New("slot grant: want a valid dispatch id and a gateway token")
	}
	return g, nil
}

// readCapped reads path (no symlink followed), refusing more than limit bytes.
func readCapped(path string, limit int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return b, nil
}

// writeJSON writes v as dir/name atomically, 0600.
func writeJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, name), b, 0o600)
}
