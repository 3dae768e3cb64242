package config

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net/netip"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/budget"
	"github.com/agora-dev/agora/internal/capped"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// DefaultTarget is the target a dispatch uses when it names none. It exists even when
// agora.yaml does not mention it.
const DefaultTarget = "local"

// MaxDispatchTimeout caps any dispatch, whatever a target says.
const MaxDispatchTimeout = 24 * time.Hour

// Target is where workers run: a compute provider and its settings. Targets are configured by
// people in agora.yaml; a dispatch may only pick one by name.
type Target struct {
	// Provider is the compute provider: "local" (bubblewrap on this machine, the default),
	// "docker" (a hardened container through the Docker Engine API; podman's compatible
	// socket works too) or "kubernetes" (a batch/v1 Job per dispatch). See docs/providers.md.
	Provider string `yaml:"provider"`
	// The container and Kubernetes providers' settings (provider.go): refused on a local
	// target, where they would mean nothing.
	Remote `yaml:",inline"`
	// Sandbox is "bwrap" (default) or "none". "none" runs workers WITHOUT isolation: it is
	// printed on every dispatch and stored in the record.
	Sandbox string `yaml:"sandbox"`
	// Network is what a sandbox can reach. "proxy" (the default): its own loopback, and
	// through the dispatch's egress proxy the hosts its grant allows; a dispatch whose grant
	// allows no host gets "none". "none": only loopback, whatever the grant. "host": the
	// host's network, unrestricted and unaudited: an explicit unsafe escape, warned about
	// on every dispatch and recorded on it.
	Network string `yaml:"network"`
	// Timeout is the default and maximum wall-clock time of a dispatch (default 30m).
	Timeout time.Duration `yaml:"timeout"`
	// ApprovalTimeout is how long a call a capability marks for approval waits for a person
	// (`agora dispatch approve`/`deny`) before it is denied as expired (default 10m, at
	// most the dispatch's timeout bound, 24h).
	ApprovalTimeout time.Duration `yaml:"approval_timeout"`
	// MaxProcs caps processes in the sandbox (default 256).
	MaxProcs int `yaml:"max_procs"`
	// FileSize caps any file the worker writes (default 1GiB).
	FileSize ByteSize `yaml:"file_size"`
	// Memory caps the worker's memory (default 4GiB).
	Memory ByteSize `yaml:"memory"`
	// Disk caps what the workspace (the clone included) and the out directory may hold
	// together (default 2GiB, at least 1MiB). When agora runs as root they live on a tmpfs
	// of this size, mounted for the dispatch and unmounted after it, and a dispatch that
	// fills it ends failed/limit-exceeded. tmpfs pages are memory (RAM, or swap), not disk:
	// size it with the host's memory in mind. Without root nothing can mount the tmpfs; the
	// quota is then not enforced and the record's isolation says disk-unenforced.
	Disk ByteSize `yaml:"disk"`
	// SandboxUID is the first of the [SandboxUIDs] host uids (and gids) this target's
	// sandboxes run as when agora runs as root, one per dispatch chosen by its id (default
	// 1879048192, 0x70000000). The range MUST belong to no account and no other service:
	// every file the sandbox may touch is handed to its uid for the dispatch. Root
	// itself (0) and 2^31 and above are refused. Without root it is unused: sandboxes run as
	// the invoking user, whom the kernel's process limit already binds.
	SandboxUID UID `yaml:"sandbox_uid"`
	// CallbackURL, when set, receives every lifecycle event of dispatches on this target as
	// an HMAC-signed POST.
	CallbackURL string `yaml:"callback_url"`
	// Budget is the most any dispatch on this target may spend: tokens, usd (at the
	// prices of models:) and model_calls; a dispatch may narrow it, never raise it. Zero
	// fields set no limit.
	Budget budget.Budget `yaml:"budget"`
	// VerifyPath are directories put before the default PATH (/usr/local/bin:/usr/bin:/bin)
	// of this target's verify gate sandboxes, so a verify command such as [go, test, ./...]
	// finds a toolchain the default PATH lacks (/usr/local/go/bin). Absolute, clean, at most
	// 16. The local sandbox binds /usr read-only: a directory outside it is not visible
	// there. Default none.
	VerifyPath []string `yaml:"verify_path"`
	// VerifyCache is a host directory bound read-only at /agora/cache in this target's
	// verify gate sandboxes, with XDG_CACHE_HOME=/agora/cache, so a toolchain finds a build
	// cache the operator filled there: Go's GOCACHE is $XDG_CACHE_HOME/go-build, so a `go
	// test` gate compiles the patch's packages and not the standard library every run. The
	// command can read it and never change it; what it holds is trusted by the toolchain
	// that reads it, so fill it from code you trust (docs/operations.md "A warm build cache
	// for verify gates"). Absolute and clean, never agora's home, inside it or above it; a
	// local or docker target's. Default none.
	VerifyCache string `yaml:"verify_cache"`
	// Warm is how many sandboxes are kept started ahead for this target: a dispatch
	// whose sandbox shape matches claims one instead of starting a sandbox, and each slot is
	// used once and never again. 0 (the default) keeps none; at most [MaxWarm]. `agora orch
	// serve` and `agora mcp` hold them, each slot a standby supervisor (docs/providers.md "Who
	// holds them"; bubblewrap and docker slots only as root), and so does a resident
	// Dispatcher (StartWarm); the one-shot `agora dispatch run` holds none. A kubernetes
	// target's are agent-sandbox's SandboxWarmPool ([Target.WarmPool], `backend:
	// agent-sandbox` only: docs/providers-k8s.md), which any supervisor of the home claims from.
	Warm int `yaml:"warm"`
	// Mode is "" (the default: every grant enforced) or "learn": every dispatch on this target
	// is a learn dispatch (docs/learn.md), what its grant would refuse recorded as
	// *.would_deny instead, inside the same sandbox and limits. A person chose it for the
	// target, not for an AI: an MCP dispatch to such a target is refused.
	Mode string `yaml:"mode"`
}

// ModeLearn is [Target.Mode]'s one value besides "".
const ModeLearn = "learn"

// MaxWarm caps a target's warm slots: each is a started sandbox (a process, its mounts,
// its uid) held while nothing runs in it.
const MaxWarm = 16

// maxVerifyPath caps a target's verify_path.
const maxVerifyPath = 16

// Egress configures outbound requests.
type Egress struct {
	// AllowPrivate lists private prefixes (CIDR or single addresses) that outbound requests
	// may reach. Empty by default: only public addresses.
	AllowPrivate []string `yaml:"allow_private"`
	// CACerts are PEM files of extra root certificates (an internal CA): the egress proxy
	// trusts them besides the system's when it verifies a host it terminates TLS for, and
	// every sandbox with the proxy finds them in its trust store.
	CACerts []string `yaml:"ca_certs"`
	// LearnHosts are the hosts a learn dispatch may reach beyond its grant ("host",
	// "host:port", "*.domain"), each recorded as net.would_deny; empty by default, so a learn
	// dispatch reaches no host its grant does not already allow (docs/learn.md). Parsed by
	// package dispatch (grant.ParseEgressRule) when a learn dispatch is accepted: a bad entry
	// refuses the dispatch, naming it.
	LearnHosts []string `yaml:"learn_hosts"`
}

// maxCACerts caps what egress.ca_certs may read, all files together.
const maxCACerts = 4 << 20

// LoadCACerts reads egress.ca_certs: every file must hold only PEM certificates, at least
// one. Nothing is read when the list is empty.
func (e Egress) LoadCACerts() ([]byte, error) {
	var out []byte
	for _, path := range e.CACerts {
		b, err := capped.ReadFile(path, maxCACerts-int64(len(out)))
		if err != nil {
			return nil, fmt.Errorf("egress.ca_certs: %w", err)
		}
		rest, found := b, false
		for {
			var blk *pem.Block
			blk, rest = pem.Decode(rest)
			if blk == nil {
				break
			}
			if blk.Type != "CERTIFICATE" {
				return nil, fmt.Errorf("egress.ca_certs: %s holds a %s block; want only certificates", path, blk.Type)
			}
			if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
				return nil, fmt.Errorf("egress.ca_certs: %s: %w", path, err)
			}
			found = true
		}
		if !found {
			return nil, fmt.Errorf("egress.ca_certs: %s holds no PEM certificate", path)
		}
		out = append(append(out, b...), '\n')
	}
	return out, nil
}

// Prefixes parses AllowPrivate.
func (e Egress) Prefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range e.AllowPrivate {
		p, err := parsePrefix(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("want an address or CIDR prefix, got %q", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("want an address or CIDR prefix, got %q", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// DefaultSandboxUID is the host uid and gid a root agora runs sandboxes as when a target
// names none. 0x70000000 is the first of systemd's unused range 1879048192..2147483647
// (docs/UIDS-GIDS.md in systemd): above the container ranges systemd-nspawn allocates
// (524288..1879048191), far above the subordinate ids useradd hands out (from 100000, 65536
// per user), and below 2^31, which some kernel interfaces mishandle. No distribution
// creates accounts there, so no process but a sandbox runs as it.
const DefaultSandboxUID = 0x70000000

// DefaultApprovalTimeout is how long a held call waits for a person when a target does not
// say (its approval_timeout).
const DefaultApprovalTimeout = 10 * time.Minute

// DefaultDisk is a target's default disk quota; MinDisk the smallest accepted.
const (
	DefaultDisk = 2 << 30
	MinDisk     = 1 << 20
)

func defaultTarget() Target {
	return Target{
		Provider: "local", Sandbox: "bwrap", Network: "proxy", Timeout: 30 * time.Minute,
		ApprovalTimeout: DefaultApprovalTimeout, MaxProcs: 256, FileSize: 1 << 30, Memory: 4 << 30, Disk: DefaultDisk, SandboxUID: DefaultSandboxUID,
	}
}

// Target returns the named target with defaults filled in, or an error naming the known ones.
func (c *Config) Target(name string) (Target, error) {
	name = cmp.Or(name, DefaultTarget)
	t, ok := c.Targets[name]
	if !ok {
		names := slices.Sorted(maps.Keys(c.Targets))
		return Target{}, &errclass.NotFoundError{Kind: "target", ID: name, Known: names, Note: "targets are set in agora.yaml"}
	}
	return t, nil
}

// validateTargets fills defaults into every target and checks them.
func (c *Config) validateTargets(pos *strictyaml.Positions) strictyaml.Errors {
	var errs strictyaml.Errors
	if c.Targets == nil {
		c.Targets = map[string]Target{}
	}
	if _, ok := c.Targets[DefaultTarget]; !ok {
		c.Targets[DefaultTarget] = defaultTarget()
	}
	for name, t := range c.Targets {
		p := "targets." + name
		d := defaultTarget()
		t.Provider = cmp.Or(t.Provider, d.Provider)
		t.Sandbox = cmp.Or(t.Sandbox, d.Sandbox)
		t.Network = cmp.Or(t.Network, d.Network)
		t.Timeout = cmp.Or(t.Timeout, d.Timeout)
		t.ApprovalTimeout = cmp.Or(t.ApprovalTimeout, d.ApprovalTimeout)
		t.MaxProcs = cmp.Or(t.MaxProcs, d.MaxProcs)
		t.FileSize = cmp.Or(t.FileSize, d.FileSize)
		t.Memory = cmp.Or(t.Memory, d.Memory)
		t.Disk = cmp.Or(t.Disk, d.Disk)
		t.SandboxUID = cmp.Or(t.SandboxUID, d.SandboxUID)
		if err := t.Budget.Validate(); err != nil {
			errs = append(errs, pos.Errorf(p+".budget", "%v", err))
		}
		errs = append(errs, t.validateProvider(pos, p)...)
		if t.Sandbox != "bwrap" && t.Sandbox != "none" {
			errs = append(errs, pos.Errorf(p+".sandbox", `want "bwrap" or "none", got %q`, t.Sandbox))
		}
		if t.Mode != "" && t.Mode != ModeLearn {
			errs = append(errs, pos.Errorf(p+".mode", `want "learn" or nothing, got %q`, t.Mode))
		}
		if t.Network != "proxy" && t.Network != "none" && t.Network != "host" {
			errs = append(errs, pos.Errorf(p+".network", `want "proxy", "none" or "host", got %q`, t.Network))
		}
		if t.Timeout > MaxDispatchTimeout {
			errs = append(errs, pos.Errorf(p+".timeout", "at most %s", MaxDispatchTimeout))
		}
		if t.ApprovalTimeout < time.Second || t.ApprovalTimeout > MaxDispatchTimeout {
			errs = append(errs, pos.Errorf(p+".approval_timeout", "want 1s to %s, got %s", MaxDispatchTimeout, t.ApprovalTimeout))
		}
		if t.MaxProcs < 0 {
			errs = append(errs, pos.Errorf(p+".max_procs", "must be positive"))
		}
		if t.Disk < MinDisk {
			errs = append(errs, pos.Errorf(p+".disk", "at least %s", ByteSize(MinDisk)))
		}
		if t.Warm < 0 || t.Warm > MaxWarm {
			errs = append(errs, pos.Errorf(p+".warm", "want 0 to %d started sandboxes, got %d", MaxWarm, t.Warm))
		}
		if len(t.VerifyPath) > maxVerifyPath {
			errs = append(errs, pos.Errorf(p+".verify_path", "%d directories; at most %d", len(t.VerifyPath), maxVerifyPath))
		}
		for i, dir := range t.VerifyPath {
			if !path.IsAbs(dir) || path.Clean(dir) != dir || strings.ContainsAny(dir, ":\x00") {
				errs = append(errs, pos.Errorf(fmt.Sprintf("%s.verify_path[%d]", p, i), "want an absolute, clean directory without ':', got %q", dir))
			}
		}
		if dir := t.VerifyCache; dir != "" {
			switch {
			case !path.IsAbs(dir) || path.Clean(dir) != dir || strings.ContainsAny(dir, ":\x00"):
				errs = append(errs, pos.Errorf(p+".verify_cache", "want an absolute, clean directory without ':', got %q", dir))
			case dir == "/":
				errs = append(errs, pos.Errorf(p+".verify_cache", "not / (the whole host, agora's home with it, read by the patch's code): name the cache directory itself"))
			case t.Provider == ProviderKubernetes:
				errs = append(errs, pos.Errorf(p+".verify_cache", "a kubernetes target runs no verify gate (its pods run only agora's worker); verify_cache is for local and docker targets"))
			}
		}
		c.Targets[name] = t
	}
	if c.Gateway.Advertise != "" {
		if err := checkGatewayURL(c.Gateway.Advertise); err != nil {
			errs = append(errs, pos.Errorf("gateway.advertise", "%v", err))
		}
	}
	for name, t := range c.Targets {
		if t.Provider == ProviderKubernetes && t.Gateway == "" {
			if c.Gateway.Advertise == "" {
				errs = append(errs, pos.Errorf("targets."+name+".gateway", "a kubernetes target needs the URL its pods reach agora's gateway at: set gateway.advertise (or targets.%s.gateway) to https://HOST:PORT", name))
				continue
			}
			t.Gateway = c.Gateway.Advertise
			c.Targets[name] = t
		}
	}
	for i, s := range c.Egress.AllowPrivate {
		if _, err := parsePrefix(s); err != nil {
			errs = append(errs, pos.Errorf(fmt.Sprintf("egress.allow_private[%d]", i), "%v", err))
		}
	}
	return errs
}
