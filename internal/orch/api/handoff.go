package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/strictjson"
	"github.com/agora-dev/agora/internal/verdict"
)

// HandoffPath is where `agora dispatch run` hands its dispatch to a running `agora orch
// serve` of the same home (#28): serve accepts and supervises it on its resident path and
// streams back exactly what the CLI would have written. A serve without the route (an older
// one) answers 404 and the CLI supervises the dispatch itself.
const HandoffPath = "/v1/handoff/dispatch"

// HandoffProofPath is where the CLI asks, before its hand-off, for the challenge that shows
// the taker it may do what the taker may do (callerctx.Prover): POST with no body; the answer
// is a [HandoffChallenge]. The CLI reads the secret at /proc/<the taker's pid, from the
// socket's peer credentials>/fd/<FD> and puts it in its request's Proof.
const HandoffProofPath = "/v1/handoff/proof"

// HandoffChallenge is the answer to a POST of [HandoffProofPath].
type HandoffChallenge struct {
	FD int `json:"fd"`
}

// HandoffCancelPath is where the CLI asks serve to cancel a handed-off dispatch (Ctrl-C):
// POST with the handle of its hand-off in place of {handle}.
const HandoffCancelPath = "/v1/handoff/{handle}/cancel"

// MaxHandoffRequest caps a hand-off request: the CLI's --input is at most 1 MiB as read
// (@FILE), and the rest is flags.
const MaxHandoffRequest = 2 << 20

// HandoffRequest is what `agora dispatch run` hands to serve: its flags as parsed, and what
// serve must agree with to run it as the CLI would have (the home, the agora binary, the
// worker binary it names). The actor is not in it: serve takes it from the connection's
// peer credentials, never from the client.
type HandoffRequest struct {
	// Home is AGORA_HOME as the CLI resolved it: a serve of another home refuses.
	Home string `json:"home"`
	// Exe is the CLI's own executable: a serve of another binary refuses (the detached
	// supervisors and the worker beside it would be another build's).
	Exe string `json:"exe"`
	// Env is [EnvDigest] of the CLI's environment: what of it a dispatch reads (the agent
	// CLIs on PATH, DOCKER_HOST, AGORA_WORKER_BINARY, tracing's OTEL_*) must be serve's.
	Env string `json:"env"`
	// EnvAll is [ResidentEnvDigest] of the CLI's whole environment. A resident dispatcher
	// (`agora dispatch resident`, started by an earlier `agora dispatch run`) runs only a
	// dispatch whose CLI's environment is the one it was started with, all of it: it stands
	// in for that CLI, not for a service an operator configured. serve ignores it.
	EnvAll string `json:"env_all,omitempty"`
	// StartBy (Unix nanoseconds, 0 for none) is when the CLI stops waiting for serve's answer
	// and runs the dispatch itself: serve declines a request it reads later, so a serve that
	// was stopped and resumes never runs a second copy of a dispatch the CLI ran.
	StartBy int64 `json:"start_by,omitempty"`
	// ProofFD and Proof answer the challenge of [HandoffProofPath]: its descriptor and the
	// secret the CLI read there. A taker declines a request without a valid one.
	ProofFD int    `json:"proof_fd,omitempty"`
	Proof   string `json:"proof,omitempty"`

	Subagent  string          `json:"subagent"`
	Envs      []string        `json:"envs,omitempty"`
	Target    string          `json:"target,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Repo      string          `json:"repo,omitempty"` // absolute, or "" (a relative one is never handed off)
	Workspace string          `json:"workspace,omitempty"`
	Revision  string          `json:"revision,omitempty"`
	// TimeoutNS is --timeout in nanoseconds, 0 for the target's.
	TimeoutNS int64  `json:"timeout_ns,omitempty"`
	Callback  string `json:"callback,omitempty"`
	// Grants is the narrowing of --tools, --commands and --egress (a grant.Set), absent when
	// none of them was given.
	Grants   json.RawMessage `json:"grants,omitempty"`
	Budget   budget.Budget   `json:"budget"`
	Verify   *verdict.Spec   `json:"verify,omitempty"`
	Learn    bool            `json:"learn,omitempty"`
	Detach   bool            `json:"detach,omitempty"`
	Output   string          `json:"output,omitempty"`   // -o: "json" or "" for text
	Progress bool            `json:"progress,omitempty"` // show phases and the last line (--progress, or stderr a terminal)
}

// EnvDigest digests what of environ (KEY=VALUE lines, os.Environ) a dispatch reads: PATH
// (where the agent CLIs not configured in agora.yaml are found), DOCKER_HOST,
// AGORA_WORKER_BINARY, every OTEL_* (tracing), the proxies Go's HTTP clients use for a
// docker engine over TCP and a Kubernetes API server (HTTP_PROXY, HTTPS_PROXY, NO_PROXY,
// either case), the CAs every TLS connection trusts (SSL_CERT_FILE, SSL_CERT_DIR: the egress
// proxy's upstreams, callbacks) and the in-cluster API server (KUBERNETES_SERVICE_HOST and
// _PORT). Two processes with the same digest run a dispatch alike (red team 33 added the
// proxies, the CAs and the in-cluster variables).
func EnvDigest(environ []string) string { return envDigest(environ, digested) }

// envDigest is the sha256 of the sorted variables of environ whose names keep says.
func envDigest(environ []string, keep func(string) bool) string {
	var kept []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if keep(k) {
			kept = append(kept, kv)
		}
	}
	slices.Sort(kept)
	h := sha256.New()
	for _, kv := range kept {
		h.Write([]byte(kv))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ResidentEnvDigest digests all of environ but what a shell changes between two commands
// of one session (PWD, OLDPWD, SHLVL, _) and what agora's own processes add to tell each
// other how a command was handed on (AGORA_NO_HANDOFF, AGORA_HANDOFF_LOST): two commands
// with the same digest ran in the same environment.
func ResidentEnvDigest(environ []string) string {
	return envDigest(environ, func(k string) bool {
		switch k {
		case "PWD", "OLDPWD", "SHLVL", "_", "AGORA_NO_HANDOFF", "AGORA_HANDOFF_LOST":
			return false
		}
		return true
	})
}

// digested reports whether EnvDigest keeps the variable k.
func digested(k string) bool {
	switch k {
	case "PATH", "DOCKER_HOST", "AGORA_WORKER_BINARY",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT":
		return true
	}
	return strings.HasPrefix(k, "OTEL_")
}

// Timeout is TimeoutNS as a duration.
func (r *HandoffRequest) Timeout() time.Duration { return time.Duration(r.TimeoutNS) }

// DecodeHandoffRequest reads a hand-off request exactly (strictjson: no unknown or case-folded
// key, no duplicate) and checks what needs no catalog: the rest is the dispatcher's to judge,
// as for a dispatch the CLI accepts itself.
func DecodeHandoffRequest(b []byte) (*HandoffRequest, error) {
	var r HandoffRequest
	if err := strictjson.Decode("hand-off request", b, MaxHandoffRequest, &r); err != nil {
		return nil, err
	}
	switch {
	case r.Home == "" || r.Exe == "" || r.Env == "":
		return nil, errors.New("hand-off request: home, exe and env are required")
	case r.Subagent == "":
		return nil, errors.New("hand-off request: subagent is required")
	case r.TimeoutNS < 0:
		return nil, errors.New("hand-off request: timeout_ns is negative")
	case r.ProofFD < 0 || len(r.Proof) > 64:
		return nil, errors.New("hand-off request: proof_fd is negative or proof longer than 64 bytes")
	case r.Output != "" && r.Output != "json":
		return nil, fmt.Errorf("hand-off request: output %q: want json or none", r.Output)
	}
	if r.Repo != "" && r.Repo[0] != '/' {
		return nil, fmt.Errorf("hand-off request: repo %q is not absolute", r.Repo)
	}
	if len(r.Input) > 0 {
		if err := strictjson.Check(r.Input); err != nil {
			return nil, fmt.Errorf("hand-off request: input: %w", err)
		}
	}
	if len(r.Grants) > 0 {
		if err := strictjson.CheckObject(r.Grants); err != nil {
			return nil, fmt.Errorf("hand-off request: grants: %w", err)
		}
	}
	return &r, nil
}

// Hand-off refusals: serve will not take this dispatch, and the CLI supervises it itself
// with no visible difference (the error code of the refusal's [Error]).
const (
	// HandoffDeclined: serve is of another home or binary, its agora.yaml changed since it
	// started, or the peer is not a person's `agora dispatch run`.
	HandoffDeclined = "handoff_declined"
)

// HandoffFrame is one line of serve's answer to a hand-off (newline-delimited JSON): exactly
// one of its fields is set. Handle comes first; then Out and Err carry the bytes the CLI
// writes to its stdout and stderr, in order; ID names the dispatch once it is accepted; End
// is the last frame.
type HandoffFrame struct {
	Handle string      `json:"handle,omitempty"`
	ID     string      `json:"id,omitempty"`
	Out    string      `json:"out,omitempty"`
	Err    string      `json:"err,omitempty"`
	End    *HandoffEnd `json:"end,omitempty"`
}

// HandoffEnd is how the command ended: the exit code, and the error the CLI prints (and how)
// when there is one.
type HandoffEnd struct {
	Exit int `json:"exit"`
	// Error is the error's message, "" when the command already said everything.
	Error string `json:"error,omitempty"`
	Hint  string `json:"hint,omitempty"`
	// Usage marks a usage error (the CLI adds its "run --help" hint); Interrupted one that
	// says what a Ctrl-C did to the work.
	Usage       bool `json:"usage,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
}

// MaxHandoffFrame caps one frame the CLI reads: a record as -o json prints it, or a line.
const MaxHandoffFrame = 4 << 20

// DecodeHandoffFrame reads one frame exactly: one field set.
func DecodeHandoffFrame(b []byte) (*HandoffFrame, error) {
	var f HandoffFrame
	if err := strictjson.Decode("hand-off frame", b, MaxHandoffFrame, &f); err != nil {
		return nil, err
	}
	n := 0
	for _, set := range []bool{f.Handle != "", f.ID != "", f.Out != "", f.Err != "", f.End != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, fmt.Errorf("hand-off frame: %d fields set, want one", n)
	}
	if f.End != nil && (f.End.Exit < 0 || f.End.Exit > 255) {
		return nil, fmt.Errorf("hand-off frame: exit code %d out of range", f.End.Exit)
	}
	return &f, nil
}
