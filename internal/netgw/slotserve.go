package netgw

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
)

// Waiting for a slot's dispatch.
const (
	// ClaimWait is how long one claim request waits for a dispatch to be bound before it is
	// answered 204 (the worker asks again): below every proxy's idle cut.
	ClaimWait = 20 * time.Second
	// claimPoll is how often a waiting claim looks for its binder's socket: the bound-to-
	// claimed latency is at most this.
	claimPoll = 5 * time.Millisecond
	// holderPoll is how often a waiting claim checks that the slot's holder lives.
	holderPoll = 250 * time.Millisecond
	// grantTimeout bounds reading the grant from the binder.
	grantTimeout = 5 * time.Second
	// MaxClaimWaiters caps the claims of one slot waiting at once: a worker has one (and one
	// more across a reconnect); each waiter costs a stat every claimPoll.
	MaxClaimWaiters = 2
)

// claimWaiters counts the claims waiting per slot.
type claimWaiters struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

// enter counts a waiter of slot id, or reports false when the slot has MaxClaimWaiters.
func (c *claimWaiters) enter(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[id] >= MaxClaimWaiters {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
	return true
}

func (c *claimWaiters) leave(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[id]--; c.n[id] <= 0 {
		delete(c.n, id)
	}
}

func (c *claimWaiters) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// ClaimsWaiting is how many claims of slot id wait for its dispatch now (at most
// [MaxClaimWaiters]): a slot whose worker already asks is ready for its dispatch at once.
func (s *Server) ClaimsWaiting(id string) int { return s.waiters.count(id) }

// slotConnKey is what a claim's connection is charged to in the connection table: never a
// dispatch id (those have no slash).
func slotConnKey(id string) string { return "slot/" + id }

// serveClaim answers POST /v1/slots/SLOT/claim: the slot's token is checked against the
// slot's record alone; the request then waits up to ClaimWait for a dispatch to be bound.
func (s *Server) serveClaim(w http.ResponseWriter, r *http.Request, gc *gateConn, pending bool) {
	id, ok := parseSlotRoute(r.URL.EscapedPath())
	if s.Slots == nil || !ok || r.URL.RawQuery != "" {
		httpError(w, http.StatusNotFound, "no such route")
		return
	}
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	token, ok := bearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "a bearer token is required")
		return
	}
	rec, err := loadSlot(s.Slots.Dir, id)
	if errors.Is(err, ErrNoSlot) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "no such warm slot: it was claimed, revoked or never made")
		return
	}
	if err != nil {
		s.logger().Error("warm slot unreadable", "slot", id, "err", err)
		httpError(w, http.StatusInternalServerError, "slot unreadable")
		return
	}
	if !tokenMatches(rec.TokenSHA256, token) {
		s.logger().Warn("gateway slot token refused", "slot", id, "remote_addr", r.RemoteAddr)
		httpError(w, http.StatusForbidden, "the token does not authorise this slot")
		return
	}
	if pending {
		if ok, reason := s.conns.claim(gc, slotConnKey(id), false); !ok {
			s.logger().Warn("gateway connection refused", "slot", id, "source", gc.source, "reason", reason)
			httpError(w, http.StatusTooManyRequests, reason)
			return
		}
		w.Header().Del("Connection")
	}
	if !s.waiters.enter(id) {
		httpError(w, http.StatusTooManyRequests, "too many claims of this slot wait already")
		return
	}
	defer s.waiters.leave(id)
	s.pool.touch(id)
	s.waitClaim(w, r, id, token)
}

// waitClaim polls for the slot's binder until ClaimWait, the slot's end or the request's.
func (s *Server) waitClaim(w http.ResponseWriter, r *http.Request, id, token string) {
	wait := ClaimWait
	if s.ClaimWait > 0 {
		wait = s.ClaimWait
	}
	deadline := time.Now().Add(wait)
	nextHolder := time.Now()
	for {
		checkHolder := !time.Now().Before(nextHolder)
		if checkHolder {
			nextHolder = time.Now().Add(holderPoll)
		}
		g, err := s.claimSlot(r.Context(), id, token, checkHolder)
		switch {
		case err == nil:
			b, _ := json.Marshal(g)
			s.logger().Info("warm slot claimed", "slot", id, "dispatch_id", g.Dispatch)
			s.pool.release(id) // a pool pod's: claimed, its hold is let go
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.Write(b)
			clear(b)
			return
		case errors.Is(err, ErrNoSlot):
			s.pool.release(id)
			w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
			httpError(w, http.StatusUnauthorized, "no such warm slot: it was claimed, revoked or never made")
			return
		case !errors.Is(err, errNotBound):
			s.pool.release(id)
			s.logger().Error("warm slot claim failed", "slot", id, "err", err)
			httpError(w, http.StatusBadGateway, "the slot's dispatch could not be handed over; the slot is spent")
			return
		}
		if !time.Now().Before(deadline) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(claimPoll):
		}
	}
}

// claimSlot takes slot id's grant under its lock: the slot's record goes first (its token is
// revoked whatever follows), then the binder says the grant, which must name a dispatch whose
// standing session the grant's token opens. [errNotBound] while no dispatch is bound;
// [ErrNoSlot] when the slot is gone (or its holder, when checkHolder asks).
func (s *Server) claimSlot(ctx context.Context, id, token string, checkHolder bool) (remote.SlotGrant, error) {
	dir := s.Slots.Dir
	sd := filepath.Join(dir, id)
	if _, err := os.Lstat(filepath.Join(sd, slotSocket)); err != nil && !checkHolder {
		return remote.SlotGrant{}, errNotBound // the common wait: no lock, one stat
	}
	unlock, err := lockName(ctx, dir, id)
	if err != nil {
		return remote.SlotGrant{}, err
	}
	drop := false
	defer func() { unlock(drop) }()
	rec, err := loadSlot(dir, id)
	if err != nil {
		return remote.SlotGrant{}, err
	}
	if !tokenMatches(rec.TokenSHA256, token) { // a slot made afresh under the same id
		return remote.SlotGrant{}, ErrNoSlot
	}
	fi, err := os.Lstat(filepath.Join(sd, slotSocket))
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		if checkHolder && holderGone(sd) {
			drop = true
			os.Remove(filepath.Join(sd, slotFile))
			os.RemoveAll(sd)
			return remote.SlotGrant{}, ErrNoSlot
		}
		return remote.SlotGrant{}, errNotBound
	}
	// The slot is spent from here on, whatever the binder says.
	drop = true
	if err := os.Remove(filepath.Join(sd, slotFile)); err != nil {
		return remote.SlotGrant{}, err
	}
	defer os.RemoveAll(sd)
	dctx, cancel := context.WithTimeout(ctx, grantTimeout)
	defer cancel()
	c, err := dialUnix(dctx, filepath.Join(sd, slotSocket))
	if err != nil {
		return remote.SlotGrant{}, errors.Join(ErrNoSlot, errors.New("its binder is gone"))
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(grantTimeout))
	b, err := io.ReadAll(io.LimitReader(c, remote.MaxSlotGrant+1))
	defer clear(b)
	if err != nil {
		return remote.SlotGrant{}, err
	}
	g, err := parseSlotGrant(b)
	if err != nil {
		return remote.SlotGrant{}, err
	}
	// The grant must open a standing session: a binder cannot hand out anything else.
	srec, err := loadRecord(s.Registry.Dir, g.Dispatch)
	if err != nil || !srec.checkToken(g.Token) {
		return remote.SlotGrant{}, errors.New("the bound dispatch has no session its token opens")
	}
	// A dispatch's session goes to one slot only, however often a host binds it (one dispatch
	// bound to two slots would be handed to both): the first grant marks the session.
	sess, err := sessionDir(s.Registry.Dir, g.Dispatch)
	if err != nil {
		return remote.SlotGrant{}, err
	}
	f, err := os.OpenFile(filepath.Join(sess, slotGranted), os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return remote.SlotGrant{}, errors.New("the bound dispatch's session was handed to a slot already")
	}
	f.Close()
	return g, nil
}

// slotGranted, in a dispatch's session directory, marks the session handed to a slot.
const slotGranted = "slot-granted"

// parseSlotRoute parses "/v1/slots/SLOT/claim".
func parseSlotRoute(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, remote.SlotRoutePrefix)
	if !ok {
		return "", false
	}
	id, tail, ok := strings.Cut(rest, "/")
	if !ok || tail != remote.ClaimRoute || !remote.ValidSlotID(id) {
		return "", false
	}
	return id, true
}
