package config

import (
	"cmp"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agora-dev/agora/internal/strictyaml"
)

// The compute providers a target may name.
const (
	ProviderLocal      = "local"
	ProviderDocker     = "docker"
	ProviderKubernetes = "kubernetes"
)

// The backends of a kubernetes target.
const (
	BackendJobs         = "jobs"
	BackendAgentSandbox = "agent-sandbox"
)

// Remote holds the settings of the providers that run a worker away from bubblewrap: a
// container (docker) or a Kubernetes Job (kubernetes). A local target sets none of them.
type Remote struct {
	// Image is the team's agent toolchain image (git, compilers, agent CLIs), pinned by
	// digest: "REF@sha256:<64 hex>". A tag alone is refused: what runs must be what was
	// reviewed. agora adds its own worker binary; the image needs nothing from agora.
	Image string `yaml:"image"`
	// Runtime is the container runtime of a docker target: "" (the engine's default) or
	// "runsc" (gVisor), which the engine must know.
	Runtime string `yaml:"runtime"`
	// DockerHost is the Docker Engine API endpoint of a docker target (unix:///PATH or
	// tcp://HOST:PORT); empty means the DOCKER_HOST variable of the agora process.
	DockerHost string `yaml:"docker_host"`
	// WorkerImage is the small agora image (`make image`) a kubernetes target's init
	// container copies agora's worker binary from, pinned by digest like Image.
	WorkerImage string `yaml:"worker_image"`
	// Kubeconfig is the kubeconfig file (absolute path) of a kubernetes target; empty means
	// agora runs in the cluster and uses its service account. Context picks a context in it.
	Kubeconfig string `yaml:"kubeconfig"`
	Context    string `yaml:"context"`
	// Namespace is where a kubernetes target's Jobs, Secrets and NetworkPolicies go.
	Namespace string `yaml:"namespace"`
	// RuntimeClass is the pods' runtimeClassName (gvisor, kata, ...); empty: the cluster's
	// default.
	RuntimeClass string `yaml:"runtime_class"`
	// Backend is what a kubernetes target makes per dispatch: "jobs" (the default, a
	// batch/v1 Job) or "agent-sandbox" (a kubernetes-sigs/agent-sandbox Sandbox holding the
	// same pod spec; its CRDs must be installed in the cluster).
	Backend string `yaml:"backend"`
	// Resources are each worker's CPU and memory, as requests equal to limits.
	Resources Resources `yaml:"resources"`
	// NodeSelector constrains the nodes a kubernetes target's pods run on.
	NodeSelector map[string]string `yaml:"node_selector"`
	// TTLAfterFinished is how long Kubernetes keeps a finished Job (default 10m); agora
	// also deletes the Jobs of ended dispatches itself.
	TTLAfterFinished time.Duration `yaml:"ttl_after_finished"`
	// Gateway is the URL pods reach agora's network gateway at (https://HOST:PORT); empty
	// means the top-level gateway.advertise.
	Gateway string `yaml:"gateway"`
	// ImagePullSecrets names docker-registry Secrets of a kubernetes target's namespace (made
	// by the cluster's operator; agora never reads them) that every pod of the target carries
	// as imagePullSecrets.
	ImagePullSecrets []string `yaml:"image_pull_secrets"`
	// ImagePullPolicy is every container's imagePullPolicy on a kubernetes target:
	// IfNotPresent (the default), Always or Never.
	ImagePullPolicy string `yaml:"image_pull_policy"`
	// GatewayPeer, on a kubernetes target, is where the gateway's serve pods are: each Job's
	// NetworkPolicy admits them (the pods of Namespace matching all of Pods, both at once)
	// on the gateway's port besides the gateway URL's pinned addresses. It is what lets a Job
	// reach serve at a Service's ClusterIP (a policy matches after the Service's DNAT, on the
	// pod it reaches) and so reach a new serve pod after a restart.
	GatewayPeer *GatewayPeer `yaml:"gateway_peer"`
	// WarmPool says a kubernetes target's `warm: N` pods are kept in agent-sandbox's own
	// SandboxWarmPool and claimed with a SandboxClaim (docs/providers-k8s.md "Pool slots"):
	// the holder (orch serve, agora mcp, a resident Dispatcher) makes the pool and keeps it
	// fresh, any supervisor of the home claims from it, and the gateway enrols its pods with
	// their projected ServiceAccount tokens (TokenReview: the TokenReview ClusterRole is
	// needed). It is the only warm mechanism on Kubernetes and needs `backend: agent-sandbox`:
	// `warm: N` implies it, and a `warm: N` on the Job backend is refused. nil when not given;
	// an explicit false with `warm: N` is refused ([Target.KeepsPool] reads it).
	WarmPool *bool `yaml:"warm_pool"`
}

// KeepsPool says whether the target's warm pods are kept in agent-sandbox's SandboxWarmPool:
// warm_pool given true, or implied by `warm: N` on a kubernetes target once validated.
func (t Target) KeepsPool() bool { return t.WarmPool != nil && *t.WarmPool }

// GatewayPeer names agora's serve pods for a kubernetes target's NetworkPolicies: the pods of
// namespace Namespace whose labels include all of Pods. Both are required: never a whole
// namespace, never a label in any namespace.
type GatewayPeer struct {
	Namespace string            `yaml:"namespace"`
	Pods      map[string]string `yaml:"pods"`
}

// Resources are a worker's CPU and memory in Kubernetes quantity notation (cpu: 2, 500m;
// memory: 4Gi). A docker target reads cpu as a number of CPUs.
type Resources struct {
	CPU    Quantity `yaml:"cpu"`
	Memory Quantity `yaml:"memory"`
}

// Quantity is a Kubernetes resource quantity: a decimal number with an optional suffix (m,
// k, M, G, T, Ki, Mi, Gi, Ti).
type Quantity string

var quantityRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$`) })

// UnmarshalText accepts "2", "500m", "4Gi".
func (q *Quantity) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) > 32 || !quantityRE().MatchString(s) {
		return fmt.Errorf("want a quantity such as 2, 500m or 4Gi, got %q", string(b))
	}
	*q = Quantity(s)
	return nil
}

// DefaultTTLAfterFinished is how long a finished Job stays when a target does not say.
const DefaultTTLAfterFinished = 10 * time.Minute

// pinnedImageRE is an image reference pinned by digest: a name, an optional tag, and
// "@sha256:" with 64 lowercase hex digits.
var pinnedImageRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}$`)
})

// PinnedImage reports whether ref names an image by its digest.
func PinnedImage(ref string) bool { return len(ref) <= 512 && pinnedImageRE().MatchString(ref) }

var labelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)$`) })

// validateProvider checks the provider and the settings that belong to it.
func (t *Target) validateProvider(pos *strictyaml.Positions, p string) strictyaml.Errors {
	var errs strictyaml.Errors
	bad := func(field, format string, args ...any) {
		errs = append(errs, pos.Errorf(p+"."+field, format, args...))
	}
	image := func(field, ref string) {
		switch {
		case ref == "":
			bad(field, "required for provider %s: the image pinned by digest, REF@sha256:<64 hex>", t.Provider)
		case !PinnedImage(ref):
			bad(field, "%q is not pinned by digest; want REF@sha256:<64 hex> (a tag can be moved to other content)", ref)
		}
	}
	// Settings a provider does not read are refused, so a typo'd target fails loudly.
	unused := func(allowed ...string) {
		set := map[string]bool{
			"image": t.Image != "", "runtime": t.Runtime != "", "docker_host": t.DockerHost != "",
			"worker_image": t.WorkerImage != "", "kubeconfig": t.Kubeconfig != "", "context": t.Context != "",
			"namespace": t.Namespace != "", "runtime_class": t.RuntimeClass != "",
			"resources": t.Resources != Resources{}, "node_selector": len(t.NodeSelector) > 0,
			"ttl_after_finished": t.TTLAfterFinished != 0, "gateway": t.Gateway != "",
			"backend": t.Backend != "", "image_pull_secrets": len(t.ImagePullSecrets) > 0,
			"image_pull_policy": t.ImagePullPolicy != "", "gateway_peer": t.GatewayPeer != nil,
			"warm_pool": t.WarmPool != nil,
		}
		for _, a := range allowed {
			delete(set, a)
		}
		var names []string
		for k, v := range set {
			if v {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		for _, k := range names {
			bad(k, "not a setting of provider %s", t.Provider)
		}
	}
	remoteOnly := func() {
		if t.Sandbox != "bwrap" {
			bad("sandbox", "sandbox: none is only for provider local; a %s target is always isolated", t.Provider)
		}
		if t.Network == "host" {
			bad("network", "network: host is only for provider local; a %s worker reaches nothing but agora's gateway and egress proxy", t.Provider)
		}
	}
	switch t.Provider {
	case ProviderLocal:
		unused()
	case ProviderDocker:
		unused("image", "runtime", "docker_host", "resources")
		image("image", t.Image)
		remoteOnly()
		if t.Runtime != "" && t.Runtime != "runsc" {
			bad("runtime", `want "runsc" (gVisor) or nothing, got %q`, t.Runtime)
		}
		if t.DockerHost != "" && !strings.HasPrefix(t.DockerHost, "unix://") && !strings.HasPrefix(t.DockerHost, "tcp://") {
			bad("docker_host", "want unix:///PATH or tcp://HOST:PORT, got %q", t.DockerHost)
		}
	case ProviderKubernetes:
		unused("image", "worker_image", "kubeconfig", "context", "namespace", "runtime_class", "resources",
			"node_selector", "ttl_after_finished", "gateway", "backend", "image_pull_secrets", "image_pull_policy", "gateway_peer", "warm_pool")
		image("image", t.Image)
		image("worker_image", t.WorkerImage)
		remoteOnly()
		errs = append(errs, t.validatePull(pos, p)...)
		// Absolute, as leader.kubeconfig: the process that runs a dispatch (the CLI, or a
		// resident or serve it hands it to, each in its own directory) reads the file.
		if t.Kubeconfig != "" && !filepath.IsAbs(t.Kubeconfig) {
			bad("kubeconfig", "%q: want an absolute path (or empty for in-cluster)", t.Kubeconfig)
		}
		if t.Namespace == "" {
			bad("namespace", "required for provider kubernetes: the namespace agora's Jobs run in")
		} else if len(t.Namespace) > 63 || !labelRE().MatchString(t.Namespace) {
			bad("namespace", "want a Kubernetes namespace name (lowercase letters, digits and -), got %q", t.Namespace)
		}
		if t.RuntimeClass != "" && (len(t.RuntimeClass) > 253 || !labelRE().MatchString(t.RuntimeClass)) {
			bad("runtime_class", "want a RuntimeClass name, got %q", t.RuntimeClass)
		}
		switch t.Backend {
		case "", BackendJobs, BackendAgentSandbox:
		default:
			bad("backend", "want %q (the default) or %q, got %q", BackendJobs, BackendAgentSandbox, t.Backend)
		}
		// A kubernetes target's warm pods are agent-sandbox's SandboxWarmPool, which any
		// supervisor of the home claims from and which outlives its holder; the Job backend
		// keeps none (docs/adr/0022-warm-start-behind-the-provider-seam.md).
		// An explicit warm_pool: false with warm: N is refused, not read as unset: the pool is
		// the only warm mechanism here, so the two say opposite things (warm pods, and none).
		off := t.WarmPool != nil && !*t.WarmPool
		switch {
		case t.Warm > 0 && off:
			bad("warm_pool", "false, with warm: %d: a kubernetes target's warm pods are kept in agent-sandbox's SandboxWarmPool alone, so the two contradict each other: set warm: 0 to start every dispatch cold, or remove warm_pool: false to keep %d warm pods", t.Warm, t.Warm)
		case t.Warm > 0 && t.Backend != BackendAgentSandbox:
			bad("warm", "%d warm pods are kept in agent-sandbox's SandboxWarmPool, which the Job backend has not: set backend: %s (with agent-sandbox's controller and CRDs on the cluster), or warm: 0", t.Warm, BackendAgentSandbox)
		case t.KeepsPool() && t.Backend != BackendAgentSandbox:
			bad("warm_pool", "a SandboxWarmPool is agent-sandbox's: set backend: %s too", BackendAgentSandbox)
		}
		if t.KeepsPool() && t.Warm <= 0 {
			bad("warm_pool", "says how warm: N pods are kept, and warm is %d: set warm: 1 to %d", t.Warm, MaxWarm)
		}
		if t.Warm > 0 && !off {
			t.WarmPool = new(true) // implied: warm: N on a kubernetes target is a pool
		}
		t.TTLAfterFinished = cmp.Or(t.TTLAfterFinished, DefaultTTLAfterFinished)
		if t.TTLAfterFinished < 0 {
			bad("ttl_after_finished", "must not be negative")
		}
		if gp := t.GatewayPeer; gp != nil {
			switch {
			case gp.Namespace == "" || len(gp.Namespace) > 63 || !labelRE().MatchString(gp.Namespace):
				bad("gateway_peer", "namespace: want the namespace serve's pods run in (a Kubernetes namespace name), got %q", gp.Namespace)
			case len(gp.Pods) == 0:
				bad("gateway_peer", "pods: want the labels of serve's pods (e.g. {app: agora}); none would admit every pod of namespace %s", gp.Namespace)
			case len(gp.Pods) > 16:
				bad("gateway_peer", "pods: %d labels; at most 16", len(gp.Pods))
			}
		}
		if t.Gateway != "" {
			if err := checkGatewayURL(t.Gateway); err != nil {
				bad("gateway", "%v", err)
			}
		}
	default:
		bad("provider", `unknown provider %q; want local, docker or kubernetes`, t.Provider)
	}
	return errs
}

// checkGatewayURL accepts https://HOST:PORT and nothing else: pods send their token there.
func checkGatewayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("want https://HOST:PORT (pods send their dispatch token there, so only TLS), got %q", s)
	}
	return nil
}
