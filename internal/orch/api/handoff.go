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
// serve` of the same home: serve accepts and supervises it on its resident path and
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
	// Env is [EnvDigest] of the CLI's environment: what of it can change a dispatch (the
	// agent CLIs on PATH, DOCKER_HOST, AGORA_*, a proxy, ...: [DispatchEnv]) must be the
	// taker's, which runs the dispatch with its own.
	Env string `json:"env"`
	// EnvAll is [ResidentEnvDigest] of the CLI's whole environment. A resident dispatcher
	// of a home where a program that reads any variable runs for a dispatch (a kubernetes
	// target's kubeconfig, whose credential plugins inherit the environment) runs only a
	// dispatch whose CLI's environment is the one it was started with, all of it. serve
	// ignores it.
	EnvAll string `json:"env_all,omitempty"`
	// EnvSums are [EnvSums] of the CLI's environment: a taker that declines for the
	// environment names the variables that differ, never their values.
	EnvSums []string `json:"env_sums,omitempty"`
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

// EnvDigest digests the variables of environ (KEY=VALUE lines, os.Environ) that can change
// what a dispatch does in the process that runs it ([DispatchEnv]). Two processes with the
// same digest run a dispatch alike; the other variables of a script, a cron job or an editor
// do not matter to it.
func EnvDigest(environ []string) string { return envDigest(environ, DispatchEnv) }

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
// of one session (PWD, OLDPWD, SHLVL, _) and what only steers the CLI's own hand-off
// ([cliOnly]): two commands with the same digest ran in the same environment. A resident
// dispatcher asks for it only where a program that reads any variable runs for a dispatch
// (a kubeconfig's credential plugin, [HandoffRequest.EnvAll]).
func ResidentEnvDigest(environ []string) string { return envDigest(environ, sessionEnv) }

// sessionEnv reports whether k is a variable of the caller's session rather than of the
// command it runs: false for what a shell sets anew for each command and the CLI's own
// hand-off switches.
func sessionEnv(k string) bool {
	switch k {
	case "PWD", "OLDPWD", "SHLVL", "_":
		return false
	}
	return !cliOnly(k)
}

// cliOnly reports whether k steers only the `agora dispatch run` that reads it, never the
// dispatch a taker runs for it: not to hand off (AGORA_NO_HANDOFF), to follow a hand-off
// that broke (AGORA_HANDOFF_LOST, set by the front), not to start a resident
// (AGORA_NO_RESIDENT).
func cliOnly(k string) bool {
	switch k {
	case "AGORA_NO_HANDOFF", "AGORA_HANDOFF_LOST", "AGORA_NO_RESIDENT":
		return true
	}
	return false
}

// DispatchEnv reports whether the variable k can change what a dispatch does in the process
// that supervises it, which reads its own environment, never the CLI's: where PATH finds the
// agent CLIs, bwrap and prlimit; the Docker engine and its client (DOCKER_*, podman's
// CONTAINER_HOST, CONTAINER_SSHKEY and CONTAINERS_*); Kubernetes (KUBECONFIG,
// KUBERNETES_*, and client-go's own switches: its feature gates, backoff and detectors,
// KUBE_*, and HTTP/2 on the apiserver connection, DISABLE_HTTP2 and HTTP2_*_SECONDS); the proxies Go's HTTP clients use (HTTP_PROXY, HTTPS_PROXY, NO_PROXY in
// either case, and REQUEST_METHOD, which turns HTTP_PROXY off); the CAs every TLS
// connection trusts (SSL_CERT_FILE, SSL_CERT_DIR); tracing (OTEL_*); where the gateway's
// sockets and a stack's scratch go (TMPDIR); the Go runtime's behaviour switches (GODEBUG,
// GOFIPS140); the time zone (TZ, ZONEINFO); what the dynamic linker loads into the agora
// processes it starts (LD_*); the credentials blobs.s3 writes a dispatch's patch, output and
// transcript with when it names no credentials_file (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN: home.S3Client); and every AGORA_* variable, known or not, but those that do
// not reach a dispatch: AGORA_HOME (the home it names is compared, resolved:
// [HandoffRequest.Home]), the CLI's own switches ([cliOnly]) and serve's listener
// credentials (AGORA_HTTP_*, AGORA_OIDC_CLIENT_SECRET). Nothing else is read on the way:
// git runs with an environment of agora's own (gitexec.Env), a sandbox with --clearenv, an
// agent CLI's --version with a fixed one, and HOME and XDG_DATA_HOME only locate the home.
// LANG, TERM, EDITOR, SSH_*, VSCODE_* and a script's own variables do not matter.
func DispatchEnv(k string) bool {
	switch k {
	case "AGORA_HOME", "AGORA_HTTP_TOKEN", "AGORA_HTTP_TOKENS_FILE", "AGORA_HTTP_ALLOW_ANY", "AGORA_OIDC_CLIENT_SECRET":
		return false
	case "PATH", "TMPDIR", "TZ", "ZONEINFO", "GODEBUG", "GOFIPS140", "KUBECONFIG",
		"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "REQUEST_METHOD",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "CONTAINER_HOST", "CONTAINER_SSHKEY",
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"DISABLE_HTTP2", "HTTP2_READ_IDLE_TIMEOUT_SECONDS", "HTTP2_PING_TIMEOUT_SECONDS":
		return true
	}
	if cliOnly(k) {
		return false
	}
	for _, p := range []string{"AGORA_", "DOCKER_", "OTEL_", "KUBERNETES_", "KUBE_", "CONTAINERS_", "LD_"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// MaxEnvSums caps the entries of [HandoffRequest.EnvSums].
const MaxEnvSums = 4096

// maxEnvSumsBytes caps the bytes of the sums a CLI sends, as JSON: with a 1 MiB --input they
// stay within MaxHandoffRequest, whose excess the taker refuses (and the CLI then runs cold)
// though the digests agree. A name may be 128 KiB long, so a few long ones would reach it.
const maxEnvSumsBytes = 256 << 10

// EnvSums is NAME=SUM for each variable of environ [ResidentEnvDigest] digests, sorted by
// name: SUM is the first 8 bytes of the sha256 of its value, in hex. A taker compares them
// with its own only to name the variables that differ when it declines ([EnvDiff]); the
// digests decide. They go only to a process of this user (the CLI checks the socket's peer
// credentials), which could read this process's environment in /proc anyway, and no taker
// writes them anywhere.
func EnvSums(environ []string) []string {
	if len(environ) > MaxEnvSums {
		return nil // past what a taker reads: its decline then names nothing
	}
	sums := make([]string, 0, len(environ))
	size := 0
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || !sessionEnv(k) {
			continue
		}
		s := sha256.Sum256([]byte(v))
		// The name as the request's JSON carries it (invalid UTF-8 as U+FFFD), so the list is
		// sorted and free of repeats as the taker reads it: two names that differ only in
		// invalid bytes must not get a hand-off the digest allows refused as malformed.
		sums = append(sums, strings.ToValidUTF8(k, "\uFFFD")+"="+hex.EncodeToString(s[:8]))
		size += len(sums[len(sums)-1]) + 3
	}
	// Past what a request has room for, the decline names nothing. JSON escapes a byte in at
	// most 6, so only a list that may be over is measured as it is sent.
	if size > maxEnvSumsBytes/6 {
		if b, err := json.Marshal(sums); err != nil || len(b) > maxEnvSumsBytes {
			return nil
		}
	}
	// By name, as checkEnvSums wants them ("A-B" before "A=", but after "A"); a name twice
	// (an environment built by hand) keeps its first, as Go's getenv reads it.
	slices.SortStableFunc(sums, func(a, b string) int { return strings.Compare(envName(a), envName(b)) })
	return slices.CompactFunc(sums, func(a, b string) bool { return envName(a) == envName(b) })
}

func envName(kv string) string { k, _, _ := strings.Cut(kv, "="); return k }

// EnvDiff names, sorted, the variables that keep keeps whose sums differ between a and b
// (two [EnvSums]), or that only one of them has.
func EnvDiff(a, b []string, keep func(string) bool) []string {
	m := make(map[string]string, len(a))
	for _, kv := range a {
		if k, v, _ := strings.Cut(kv, "="); keep(k) {
			m[k] = v
		}
	}
	var names []string
	for _, kv := range b {
		k, v, _ := strings.Cut(kv, "=")
		if !keep(k) {
			continue
		}
		if w, ok := m[k]; !ok || w != v {
			names = append(names, k)
		}
		delete(m, k)
	}
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// checkEnvSums checks that sums have the form [EnvSums] gives them: at most MaxEnvSums
// entries NAME=SUM, names not empty and strictly sorted, each SUM 16 lowercase hex digits.
func checkEnvSums(sums []string) error {
	if len(sums) > MaxEnvSums {
		return fmt.Errorf("%d entries, over %d", len(sums), MaxEnvSums)
	}
	prev := ""
	for i, kv := range sums {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || len(v) != 16 || strings.Trim(v, "0123456789abcdef") != "" {
			return fmt.Errorf("entry %d is not NAME=SUM", i)
		}
		if i > 0 && k <= prev {
			return fmt.Errorf("entry %d is out of order or repeated", i)
		}
		prev = k
	}
	return nil
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
	if err := checkEnvSums(r.EnvSums); err != nil {
		return nil, fmt.Errorf("hand-off request: env_sums: %w", err)
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
	// started, the CLI's environment differs in what a dispatch reads (the reason names the
	// variables, never their values), or the peer is not a person's `agora dispatch run`.
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
