package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/catalog"

	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/runtime/runtimes"
	"github.com/agora-dev/agora/internal/strictjson"
)

// ManifestVersion is the format version of manifest.json.
const ManifestVersion = 1

// Limits of manifest.json.
const (
	// MaxManifestSize caps manifest.json.
	MaxManifestSize = 1 << 20
	// MaxInputJSON caps Manifest.InputJSON. The input reaches the agent as one environment
	// string, and Linux refuses any single string over 128 KiB (MAX_ARG_STRLEN) at exec.
	MaxInputJSON = 120 << 10
	// MaxAgentTimeoutSeconds caps Manifest.AgentTimeoutSeconds (24 hours).
	MaxAgentTimeoutSeconds = 24 * 60 * 60
	// MaxSetupTimeoutSeconds caps Manifest.SetupTimeoutSeconds (1 hour).
	MaxSetupTimeoutSeconds = 60 * 60
	// maxCapabilities caps Manifest.Capabilities.
	maxCapabilities = 256
	// maxCommandArgs caps Manifest.Command.
	maxCommandArgs = 4096
	// maxListItems caps each list of Manifest.Grants and Manifest.SecretKeys.
	maxListItems = 1024
)

// CaptureMargin is the time [Manifest.WallClock] allows the worker beyond the setup and
// agent budgets: verification, overlay, baseline, capture and result.
const CaptureMargin = time.Minute

// Manifest is bundle/manifest.json: what the host tells the worker to run. The host writes it
// with [Manifest.Marshal]; the worker reads it with [ParseManifest].
type Manifest struct {
	Version    int    `json:"version"`
	DispatchID string `json:"dispatch_id"`
	// Subagent is the subagent document; Path is always "subagent.json".
	Subagent Bundle `json:"subagent"`
	// Capabilities are the subagent's capability archives, in the subagent's order; each
	// Path is [CapabilityPath] of its digest.
	Capabilities []Bundle `json:"capabilities"`
	// Runtime is the subagent's runtime: "exec", "claude-code", "openai" or "codex".
	Runtime string `json:"runtime"`
	// Command is the exec runtime's argv, copied from the subagent document.
	Command []string `json:"command"`
	// Grants is the union of the capabilities' grants, possibly narrowed by the dispatch.
	Grants Grants `json:"grants"`
	// InputJSON is the dispatch input as raw JSON text; "" means {}.
	InputJSON string `json:"input_json"`
	// Env holds plain values, already merged by the host. Keys never start with AGORA_.
	Env map[string]string `json:"env"`
	// SecretKeys are the keys of the secrets object the host passes on fd 3. When empty,
	// fd 3 is not passed and the worker MUST NOT touch it.
	SecretKeys []string `json:"secret_keys"`
	// AgentTimeoutSeconds is the agent's wall-clock budget, from its start.
	AgentTimeoutSeconds int `json:"agent_timeout_seconds"`
	// SetupTimeoutSeconds is the budget of all setup scripts together.
	SetupTimeoutSeconds int `json:"setup_timeout_seconds"`
	// PIDNamespace says the sandbox has a PID namespace of its own, so after the agent the
	// worker kills every other process in it before capture (the worker's stop.go). The host
	// sets it for every isolated sandbox; never for `sandbox: none`.
	PIDNamespace bool `json:"pid_namespace,omitempty"`
	// Network is "proxy" when the host runs an egress proxy for the dispatch on
	// GatewayDir/ProxySocket: the worker relays a loopback port to it and points the agent's
	// proxy variables at that port. "" means no network (or the host's, for network: host).
	Network string `json:"network,omitempty"`
	// RuntimeBinary is the host-installed CLI the runtime runs (claude-code), bound
	// read-only; nil runs the runtime's program found on the sandbox's PATH.
	RuntimeBinary *RuntimeBinary `json:"runtime_binary,omitempty"`
	// ApprovalTimeoutSeconds is how long a call held for approval waits for a person before
	// it is denied (the target's approval_timeout); 0 when the grant holds no call. The
	// gateway enforces it; the worker sizes the hooks that wait on it (Claude Code's).
	ApprovalTimeoutSeconds int `json:"approval_timeout_seconds,omitempty"`
	// BasePatch, when set, is an input's patch ("KEY/patch.diff" under InputsDir) the worker
	// applies to the workspace right after recording the baseline: the agent starts from
	// that work (a fix loop's rejected patch) and the patch it leaves holds both.
	BasePatch string `json:"base_patch,omitempty"`
	// Learn marks a learn dispatch (docs/learn.md): the worker's tool view and the runtimes'
	// gates let through what the grant would refuse, reporting each to the gateway as a
	// would_deny first (the gateway accepts such reports only from a learn dispatch's
	// sandbox: the host, not this flag, decides). Absent otherwise: a manifest's bytes are as
	// before.
	Learn bool `json:"learn,omitempty"`
}

// NetworkProxy is [Manifest.Network]'s one value.
const NetworkProxy = "proxy"

// Bundle names one read-only file of bundle/ and the digest it must have.
type Bundle struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
	// Path is relative to the bundle directory.
	Path string `json:"path"`
}

// Grants is manifest.json's form of the [grant.Set] the subagent's capabilities grant. It
// stays a struct of its own because manifest.json has always written commands first, where
// grant.Set (capability.yaml, the catalog, dispatch records) writes tools first; the bytes
// of the format do not change.
type Grants struct {
	Commands []string           `json:"commands"`
	Tools    []string           `json:"tools"`
	Egress   []grant.EgressRule `json:"egress"`
	// Approve marks the granted calls a person must approve before they run: every rule
	// the capabilities declare, and those the dispatch added. Absent when there are none,
	// so a manifest without approvals has the bytes it always had.
	Approve []grant.ApproveRule `json:"approve,omitempty"`
}

// Set returns g as a [grant.Set].
func (g Grants) Set() grant.Set {
	return grant.Set{Tools: g.Tools, Commands: g.Commands, Egress: g.Egress, Approve: g.Approve}
}

// CapabilityPath is where the host puts the archive with digest d, relative to bundle/.
func CapabilityPath(d digest.Digest) string { return CapabilitiesDir + "/" + d.Hex() + ".tar" }

// WallClock is the least hard wall clock the host should give the whole worker: every setup
// script, the agent, and [CaptureMargin]. The worker kills the agent at its own budget, so
// a host deadline no shorter than this never cuts off capture.
func (m Manifest) WallClock() time.Duration {
	return time.Duration(m.SetupTimeoutSeconds+m.AgentTimeoutSeconds)*time.Second + CaptureMargin
}

// ParseManifest reads manifest.json strictly: size-capped, unknown fields and duplicate keys
// refused, then every field checked by [Manifest.Validate].
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	if err := strictjson.Decode("manifest", b, MaxManifestSize, &m); err != nil {
		return Manifest{}, err
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// Marshal checks m and returns its JSON.
func (m Manifest) Marshal() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	m.Capabilities = nonNil(m.Capabilities)
	m.Command = nonNil(m.Command)
	m.Grants.Commands = nonNil(m.Grants.Commands)
	m.Grants.Tools = nonNil(m.Grants.Tools)
	if m.Grants.Egress == nil {
		m.Grants.Egress = []grant.EgressRule{}
	}
	m.SecretKeys = nonNil(m.SecretKeys)
	if m.Env == nil {
		m.Env = map[string]string{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("manifest: %d bytes, over the %d byte limit", len(b), MaxManifestSize)
	}
	return b, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Validate checks every field of m. Errors name the field; they never quote env or input
// values.
func (m Manifest) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if m.Version != ManifestVersion {
		bad("version: unsupported version %d", m.Version)
	}
	if !ValidDispatchID(m.DispatchID) {
		bad("dispatch_id: want 1-128 letters, digits, '_' or '-', got %q", m.DispatchID)
	}
	if err := checkBundle(m.Subagent, catalog.KindSubagent, SubagentFile); err != nil {
		bad("subagent: %v", err)
	}
	if len(m.Capabilities) > maxCapabilities {
		bad("capabilities: more than %d", maxCapabilities)
	}
	for i, c := range m.Capabilities {
		if err := checkBundle(c, catalog.KindCapability, CapabilityPath(c.Digest)); err != nil {
			bad("capabilities[%d]: %v", i, err)
		}
	}
	// Whether this build can run the runtime is checked later, by the worker (runtimeFor).
	rt, known := runtimes.Lookup(m.Runtime)
	if !known {
		bad("runtime: want one of %s, got %q", strings.Join(runtimes.Names(), ", "), m.Runtime)
	}
	if rt.Needs.Command && len(m.Command) == 0 {
		bad("command: the %s runtime needs a command", rt.Name)
	}
	if m.RuntimeBinary != nil {
		if err := m.RuntimeBinary.Validate(); err != nil {
			bad("%v", err)
		}
	}
	if m.Network != "" && m.Network != NetworkProxy {
		bad("network: want %q or nothing, got %q", NetworkProxy, m.Network)
	}
	if len(m.Command) > maxCommandArgs {
		bad("command: more than %d arguments", maxCommandArgs)
	}
	for i, a := range m.Command {
		if strings.ContainsRune(a, 0) {
			bad("command[%d]: contains a NUL byte", i)
		}
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"commands", m.Grants.Commands}, {"tools", m.Grants.Tools}} {
		if len(l.list) > maxListItems {
			bad("grants.%s: more than %d items", l.name, maxListItems)
		}
	}
	if len(m.Grants.Egress) > maxListItems {
		bad("grants.egress: more than %d items", maxListItems)
	}
	for i, r := range m.Grants.Egress {
		if err := r.Validate(); err != nil {
			bad("grants.egress[%d]: %v", i, err)
		}
	}
	if err := grant.ValidateApprove(m.Grants.Approve); err != nil {
		bad("grants.%v", err)
	}
	if m.ApprovalTimeoutSeconds < 0 || m.ApprovalTimeoutSeconds > MaxAgentTimeoutSeconds {
		bad("approval_timeout_seconds: want 0 to %d", MaxAgentTimeoutSeconds)
	}
	for i, c := range m.Grants.Commands {
		if _, err := grant.ParseCommandPattern(c); err != nil {
			bad("grants.commands[%d]: %v", i, err)
		}
	}
	if len(m.InputJSON) > MaxInputJSON {
		bad("input_json: %d bytes, over the %d byte limit", len(m.InputJSON), MaxInputJSON)
	} else if m.InputJSON != "" && !json.Valid([]byte(m.InputJSON)) {
		bad("input_json: not valid JSON")
	}
	for _, k := range slices.Sorted(maps.Keys(m.Env)) {
		if err := checkEnvKey(k); err != nil {
			bad("env: %v", err)
		}
		if strings.ContainsRune(m.Env[k], 0) {
			bad("env: the value of %s contains a NUL byte", k)
		}
	}
	if len(m.SecretKeys) > maxListItems {
		bad("secret_keys: more than %d keys", maxListItems)
	}
	seen := map[string]bool{}
	for _, k := range m.SecretKeys {
		if err := checkEnvKey(k); err != nil {
			bad("secret_keys: %v", err)
		}
		if seen[k] {
			bad("secret_keys: %s listed twice", k)
		}
		seen[k] = true
	}
	if b := m.BasePatch; b != "" {
		if key, file, ok := strings.Cut(b, "/"); !ok || file != BasePatchFile || !inputKey(key) {
			bad("base_patch: want KEY/%s, got %q", BasePatchFile, b)
		}
	}
	if m.AgentTimeoutSeconds < 1 || m.AgentTimeoutSeconds > MaxAgentTimeoutSeconds {
		bad("agent_timeout_seconds: want 1-%d, got %d", MaxAgentTimeoutSeconds, m.AgentTimeoutSeconds)
	}
	if m.SetupTimeoutSeconds < 1 || m.SetupTimeoutSeconds > MaxSetupTimeoutSeconds {
		bad("setup_timeout_seconds: want 1-%d, got %d", MaxSetupTimeoutSeconds, m.SetupTimeoutSeconds)
	}
	if len(errs) > 0 {
		return fmt.Errorf("manifest: %w", errors.Join(errs...))
	}
	return nil
}

func checkBundle(b Bundle, kind catalog.Kind, wantPath string) error {
	if err := catalog.CheckName(kind, b.Name); err != nil {
		return err
	}
	if _, err := digest.Parse(string(b.Digest)); err != nil {
		return err
	}
	if b.Path != wantPath {
		return fmt.Errorf("path: want %q, got %q", wantPath, b.Path)
	}
	return nil
}

// checkEnvKey refuses keys that are not plain environment names, and agora's own.
func checkEnvKey(k string) error {
	if !ValidEnvKey(k) {
		return fmt.Errorf("invalid key %q", k)
	}
	if strings.HasPrefix(strings.ToUpper(k), "AGORA_") {
		return fmt.Errorf("key %s: AGORA_ keys are reserved", k)
	}
	return nil
}

// BasePatchFile is the file name of an input's patch ([Manifest.BasePatch]).
const BasePatchFile = "patch.diff"

// inputKey reports whether k is an input key as the host writes them: 1-63 of a-z 0-9 _ -,
// starting with a letter.
func inputKey(k string) bool {
	if len(k) == 0 || len(k) > 63 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
