package netgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/strictjson"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Pool slots (remote/pool.go): a pod of an agent-sandbox SandboxWarmPool enrols once with
// its projected ServiceAccount token and is given a slot of its own, which this server holds
// (its hold lock is this process's: a gateway killed with -9 leaves slots nobody may claim).
// The host that claimed the pod through a SandboxClaim binds its dispatch by the pod's uid
// ([Slots.BindPod]); from there it is the warm slots' protocol (slot.go).
//
// One enrolment per pod uid, ever (while the gateway's state lasts): the first enrolment makes
// slots/.pods/UID with O_EXCL before the slot exists, so a replayed token (by another pod, or
// by the same pod's agent after its claim) finds it and is refused, whatever became of the
// slot. Which pod a token is for is the [PodVerifier]'s word (the apiserver's TokenReview).

// PodVerifier verifies a pool pod's projected token ([remote.PodVerifier]).
type PodVerifier = remote.PodVerifier

// Enrolment limits.
const (
	// MaxEnrolling caps the enrolments verified at once: each costs the apiserver a
	// TokenReview and a few reads, and anyone who reaches the gateway may ask.
	MaxEnrolling = 4
	// enrollTimeout bounds one verification.
	enrollTimeout = 10 * time.Second
	// poolSlotIdle is how long an enrolled slot's worker may go without a claim request
	// before the slot is revoked: a waiting worker asks again every [ClaimWait], so a slot
	// nobody asks for is a pod that is gone (the pool scaled down, the pod deleted).
	poolSlotIdle = 3 * ClaimWait
	// podMarkerAge is how long a pod's enrolment marker is kept: longer than any pool pod
	// waits unclaimed in practice; past it a pod that enrolled then would be verified again
	// from scratch (the pod must still be an unclaimed, live pod of agora's pool).
	podMarkerAge = 7 * 24 * time.Hour
)

// poolPodDir holds the enrolment markers, below the slots directory (not a slot id: Sweep and
// the claim route pass it by).
const poolPodDir = ".pods"

// podMarker is slots/.pods/UID: the slot the pod was given (empty while it is made).
type podMarker struct {
	Version   int    `json:"version"`
	Slot      string `json:"slot"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
}

// ErrEnrolled: the pod enrolled already; its token is never taken again.
var ErrEnrolled = errors.New("the pod enrolled already")

// errNotEnrolled: the pod has not enrolled (yet).
var errNotEnrolled = errors.New("the pod has not enrolled")

// poolSlots are the slots this server holds for enrolled pods, with when their worker last
// asked for its dispatch.
type poolSlots struct {
	mu   sync.Mutex
	held map[string]*poolSlot // guarded by mu, by slot id
	n    int                  // guarded by mu: enrolments being verified
}

type poolSlot struct {
	sl   *Slot
	seen time.Time
}

// enter counts an enrolment being verified, or reports false at MaxEnrolling.
func (p *poolSlots) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n >= MaxEnrolling {
		return false
	}
	p.n++
	return true
}

func (p *poolSlots) leave() {
	p.mu.Lock()
	p.n--
	p.mu.Unlock()
}

func (p *poolSlots) add(sl *Slot) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = map[string]*poolSlot{}
	}
	p.held[sl.ID] = &poolSlot{sl: sl, seen: time.Now()}
}

// touch marks slot id asked for; it reports whether this server holds it.
func (p *poolSlots) touch(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.held[id]
	if ok {
		ps.seen = time.Now()
	}
	return ok
}

// release lets go of slot id's hold (claimed: the gateway removed it) or revokes it.
func (p *poolSlots) release(id string) {
	p.mu.Lock()
	ps, ok := p.held[id]
	delete(p.held, id)
	p.mu.Unlock()
	if ok {
		ps.sl.Close()
	}
}

// expire revokes the held slots no worker asked for in poolSlotIdle.
func (p *poolSlots) expire() {
	p.mu.Lock()
	var old []*Slot
	for id, ps := range p.held {
		if time.Since(ps.seen) > poolSlotIdle {
			old = append(old, ps.sl)
			delete(p.held, id)
		}
	}
	p.mu.Unlock()
	for _, sl := range old {
		sl.Close()
	}
}

// closeAll revokes every held slot (the server stops).
func (p *poolSlots) closeAll() {
	p.mu.Lock()
	held := p.held
	p.held = nil
	p.mu.Unlock()
	for _, ps := range held {
		ps.sl.Close()
	}
}

// enrollBearer returns the request's bearer as a projected token by its shape: a JWT's three
// base64url parts, at most [remote.MaxEnrollToken] bytes. A gateway token is not one.
func enrollBearer(r *http.Request) (string, bool) {
	h := r.Header.Values("Authorization")
	if len(h) != 1 {
		return "", false
	}
	token, ok := strings.CutPrefix(h[0], "Bearer ")
	if !ok || len(token) > remote.MaxEnrollToken || strings.Count(token, ".") != 2 {
		return "", false
	}
	for _, c := range []byte(token) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return "", false
		}
	}
	return token, true
}

// serveEnroll answers POST /v1/pool/enroll (remote/pool.go).
func (s *Server) serveEnroll(w http.ResponseWriter, r *http.Request) {
	if s.Pods == nil || s.Slots == nil || r.URL.RawQuery != "" {
		httpError(w, http.StatusNotFound, "no such route")
		return
	}
	if r.Method != http.MethodPost {
		httpError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	token, ok := enrollBearer(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "a pool pod's projected token is required")
		return
	}
	s.pool.expire()
	if !s.pool.enter() {
		httpError(w, http.StatusTooManyRequests, "too many enrolments are being verified")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), enrollTimeout)
	id, err := s.Pods.VerifyPod(ctx, token)
	cancel()
	s.pool.leave()
	if err == nil && !remote.ValidPodUID(id.UID) {
		err = fmt.Errorf("pod uid %q is not a uid", id.UID)
	}
	if err != nil {
		s.logger().Warn("gateway enrolment refused", "err", err, "remote_addr", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "the token names no live, unclaimed pod of agora's pool")
		return
	}
	sl, err := s.Slots.enroll(r.Context(), id)
	if errors.Is(err, ErrEnrolled) {
		s.logger().Warn("gateway enrolment refused: the pod enrolled already", "namespace", id.Namespace, "pod", id.Name, "remote_addr", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="agora"`)
		httpError(w, http.StatusUnauthorized, "the pod enrolled already; a pod's token is taken once")
		return
	}
	if err != nil {
		s.logger().Error("gateway enrolment failed", "namespace", id.Namespace, "pod", id.Name, "err", err)
		httpError(w, http.StatusInternalServerError, "the enrolment failed; the pod cannot enrol again")
		return
	}
	s.pool.add(sl)
	b, _ := json.Marshal(remote.EnrollAnswer{Slot: sl.ID, Token: sl.Token})
	s.logger().Info("pool pod enrolled", "namespace", id.Namespace, "pod", id.Name, "slot", sl.ID)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
	clear(b)
}

// enroll makes pod id's marker (O_EXCL: [ErrEnrolled] when it exists), then its slot, held by
// this process, then names the slot in the marker. A failure after the marker leaves it: the
// pod never enrols (fail closed), and its SandboxClaim's dispatch starts cold.
func (s *Slots) enroll(ctx context.Context, id remote.PodIdentity) (*Slot, error) {
	if !remote.ValidPodUID(id.UID) {
		return nil, fmt.Errorf("enrol pod %s/%s: uid %q is not a uid", id.Namespace, id.Name, id.UID)
	}
	dir := filepath.Join(s.Dir, poolPodDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("enrol pod %s/%s: %w", id.Namespace, id.Name, err)
	}
	s.sweepMarkers(dir)
	f, err := os.OpenFile(filepath.Join(dir, id.UID), os.O_CREATE|os.O_EXCL|os.O_WRONLY|noFollow|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, ErrEnrolled
	}
	if err != nil {
		return nil, fmt.Errorf("enrol pod %s/%s: %w", id.Namespace, id.Name, err)
	}
	f.Close()
	sl, err := s.Create(ctx)
	if err != nil {
		return nil, fmt.Errorf("enrol pod %s/%s: %w", id.Namespace, id.Name, err)
	}
	if err := writeJSON(dir, id.UID, podMarker{Version: 1, Slot: sl.ID, Namespace: id.Namespace, Pod: id.Name}); err != nil {
		sl.Close()
		return nil, fmt.Errorf("enrol pod %s/%s: %w", id.Namespace, id.Name, err)
	}
	return sl, nil
}

// sweepMarkers removes markers older than podMarkerAge whose slot no longer stands. A marker
// whose slot stands is kept however old: its pod waits unclaimed, its worker
// holds the slot, and a marker swept then would let a second token minted for the same pod
// enrol it again, and the next dispatch bound to the pod would go to that claim.
func (s *Slots) sweepMarkers(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !remote.ValidPodUID(e.Name()) || time.Since(fi.ModTime()) <= podMarkerAge {
			continue
		}
		if slot, err := s.podSlot(e.Name()); err == nil && s.stands(slot) {
			continue
		}
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

// stands reports whether slot id is there and its holder lives.
func (s *Slots) stands(id string) bool {
	if _, err := loadSlot(s.Dir, id); err != nil {
		return false
	}
	return !holderGone(filepath.Join(s.Dir, id))
}

// podSlot returns the slot pod uid enrolled for; errNotEnrolled while it has not (or while
// its enrolment is being made).
func (s *Slots) podSlot(uid string) (string, error) {
	if !remote.ValidPodUID(uid) {
		return "", fmt.Errorf("pod uid %q is not a uid", uid)
	}
	b, err := readCapped(filepath.Join(s.Dir, poolPodDir, uid), maxSessionFile)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(b) == 0) {
		return "", errNotEnrolled
	}
	if err != nil {
		return "", err
	}
	var m podMarker
	if err := strictjson.Decode("pod marker", b, maxSessionFile, &m); err != nil {
		return "", err
	}
	if m.Version != 1 || !remote.ValidSlotID(m.Slot) {
		return "", errors.New("pod marker: want version 1 and a slot id")
	}
	return m.Slot, nil
}

// podPoll is how often BindPod looks for the pod's enrolment.
const podPoll = 5 * time.Millisecond

// BindPod binds dispatch (whose session token is token) to the slot pod uid enrolled for,
// waiting while ctx lasts for the pod to enrol, then for its worker to claim, as [Slot.Bind]
// does. The slot is held by the gateway that enrolled the pod, not by the caller: a slot whose
// holder is gone is refused. When ctx ends first the slot is revoked (the pod never runs a
// dispatch) and the caller closes the dispatch's session. The slot is spent either way.
func (s *Slots) BindPod(ctx context.Context, uid, dispatch, token string) error {
	if !wire.ValidDispatchID(dispatch) {
		return fmt.Errorf("bind pool pod %s: dispatch id %q is not valid", uid, dispatch)
	}
	grant, err := json.Marshal(remote.SlotGrant{Dispatch: dispatch, Token: token})
	if err != nil || len(grant) > remote.MaxSlotGrant {
		return fmt.Errorf("bind pool pod %s: the grant does not fit", uid)
	}
	defer clear(grant)
	var id string
	for {
		if id, err = s.podSlot(uid); !errors.Is(err, errNotEnrolled) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bind pool pod %s: it never enrolled: %w", uid, context.Cause(ctx))
		case <-time.After(podPoll):
		}
	}
	if err != nil {
		return fmt.Errorf("bind pool pod %s: %w", uid, err)
	}
	sd := filepath.Join(s.Dir, id)
	unlock, err := lockName(ctx, s.Dir, id)
	if err != nil {
		return fmt.Errorf("bind pool pod %s: %w", uid, err)
	}
	if _, err := loadSlot(s.Dir, id); err != nil {
		unlock(false)
		return fmt.Errorf("bind pool pod %s: %w", uid, err)
	}
	if holderGone(sd) {
		// The gateway that enrolled the pod is gone: its worker's claims are refused.
		unlock(false)
		s.revoke(context.Background(), id)
		return fmt.Errorf("bind pool pod %s: %w (the gateway that enrolled it is gone)", uid, ErrNoSlot)
	}
	if _, err := os.Lstat(filepath.Join(sd, slotSocket)); err == nil {
		unlock(false)
		return fmt.Errorf("bind pool pod %s: a dispatch is bound to it already", uid)
	}
	ln, err := listenUnix(filepath.Join(sd, slotSocket))
	unlock(false)
	if err != nil {
		s.revoke(context.Background(), id)
		return fmt.Errorf("bind pool pod %s: %w", uid, err)
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	c, aerr := ln.Accept()
	stop()
	ln.Close()
	if aerr == nil {
		_, aerr = c.Write(grant)
		c.Close()
	}
	if aerr == nil {
		return nil
	}
	s.revoke(context.Background(), id)
	if ctx.Err() != nil {
		aerr = context.Cause(ctx)
	}
	return fmt.Errorf("pool pod %s was not claimed: %w", uid, aerr)
}
