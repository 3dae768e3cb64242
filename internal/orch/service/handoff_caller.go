package service

import (
	"net/http"
	"time"

	"github.com/agora-dev/agora/internal/callerctx"
	"github.com/agora-dev/agora/internal/orch/api"
)

// A hand-off must never widen what its caller may do: serve and the resident run the
// dispatch with their own privileges, so they take it only from a CLI the kernel shows to
// hold exactly those. Checked here, for every [api.Handoff], before its Prepare:
//
//   - the CLI's capabilities, no_new_privs, seccomp and LSM labels are this process's
//     (callerctx.Read: /proc/<pid>/status and attr);
//   - the CLI answered this process's challenge (callerctx.Prover), which only a process
//     the kernel lets inspect this one can: that covers a Landlock domain, which /proc does
//     not show, and every LSM's own ptrace rule.
//
// Anything unproven declines: the CLI runs its dispatch itself, with what it may do.

// handoffDecliner is a [api.Handoff] told of the hand-offs the server declines before its
// Prepare (the resident dispatcher logs them with its own).
type handoffDecliner interface {
	Declined(peer api.Peer, d *api.Declined)
}

// ownSecurity is this process's security context, read once (agora never changes its own).
// Without an exec a process's permitted capabilities, seccomp filters, no_new_privs and
// Landlock domain only ever narrow, so a context read earlier is never narrower than the one
// it runs with now: a caller found equal to it is never widened.
func (s *Server) ownSecurity() (callerctx.Security, error) {
	s.ownOnce.Do(func() { s.own, s.ownErr = callerctx.Read(0) })
	return s.own, s.ownErr
}

// handoffProof answers POST api.HandoffProofPath: a challenge for the peer.
func (s *Server) handoffProof(w http.ResponseWriter, r *http.Request) {
	if s.Handoff == nil {
		writeErr(w, http.StatusNotFound, "not_found", "this orchestrator takes no hand-offs")
		return
	}
	peer, _ := r.Context().Value(peerKey{}).(peerInfo)
	if peer.pid <= 0 {
		writeErr(w, http.StatusConflict, api.HandoffDeclined, "the CLI's process is not visible from this dispatcher's PID namespace")
		return
	}
	fd, err := s.prover.Issue(peer.pid, time.Now())
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, api.HandoffChallenge{FD: fd})
}

// callerWidens says why the CLI at peer, sending req, would do more through this process
// than by itself, or "" when the kernel shows it would not. The proof is used up either way.
func (s *Server) callerWidens(peer peerInfo, req *api.HandoffRequest) string {
	if peer.pid <= 0 {
		return "the CLI's process is not visible from this dispatcher's PID namespace"
	}
	proofErr := s.prover.Check(peer.pid, req.ProofFD, req.Proof, time.Now())
	caller, err := callerctx.Read(int(peer.pid))
	if err != nil {
		return "the CLI's security context cannot be read: " + err.Error()
	}
	own, err := s.ownSecurity()
	if err != nil {
		return "this dispatcher's security context cannot be read: " + err.Error()
	}
	if d := caller.Differs(own); d != "" {
		return d
	}
	if req.ProofFD == 0 && req.Proof == "" {
		return "the CLI sent no proof that it may inspect this dispatcher's process (an older agora, or it could not read the challenge: a Landlock domain, an LSM's ptrace rule, or fewer capabilities than this dispatcher's)"
	}
	if proofErr != nil {
		return "the CLI's proof that it may inspect this dispatcher's process failed: " + proofErr.Error()
	}
	return ""
}
