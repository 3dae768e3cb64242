package kubernetes

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/remote"
)

// DefaultTTL is how long a finished Job stays for `agora dispatch describe` before the
// cluster deletes it (ttlSecondsAfterFinished).
const DefaultTTL = 10 * time.Minute

// DefaultSandboxUID is the first uid of the pods' range when [Options.SandboxUID] is 0: the
// same as agora.yaml's default sandbox_uid (systemd's unused range, below 2^31).
const DefaultSandboxUID = 0x70000000

// Client-side rate limits: client-go's defaults (5 requests a second) would throttle a few
// dozen concurrent dispatches; the apiserver's own priority and fairness still applies.
const (
	clientQPS   = 100
	clientBurst = 200
)

// Options configure a [Provider].
type Options struct {
	// Kubeconfig is the path of a kubeconfig file; empty means the in-cluster configuration
	// (the pod's service account).
	Kubeconfig string
	// Context selects a context of Kubeconfig; empty means its current context.
	Context string
	// Namespace is where every object is made. Required.
	Namespace string
	// Image is the main container's image, REF@sha256:<64 hex> (a tag is refused). Required.
	Image string
	// WorkerImage is agora's own image (`make image`), REF@sha256:<64 hex>: the init
	// container runs `agora-worker worker fetch` from it. Required.
	WorkerImage string
	// RuntimeClass names a RuntimeClass (gVisor, Kata) for the pod; empty means the node's
	// default runtime.
	RuntimeClass string
	// CPU and Memory are resource quantities ("2", "500m", "4Gi"), set as both requests and
	// limits. Empty CPU sets none; empty Memory takes the spec's Limits.Memory, if any.
	CPU, Memory string
	// NodeSelector restricts the nodes the pod may run on.
	NodeSelector map[string]string
	// TTL is ttlSecondsAfterFinished; 0 means [DefaultTTL].
	TTL time.Duration
	// GatewayURL is the network gateway as pods reach it, "https://HOST:PORT", HOST an IP
	// address or a DNS name. The NetworkPolicy admits exactly that address and port; a name
	// is resolved on agora's host when each Job is made, and its addresses are pinned in the
	// policy and the pod's /etc/hosts (pods get no DNS). Required.
	GatewayURL string
	// GatewayPeer, when set, is where serve's pods are: each policy also admits, on the
	// gateway's port, exactly the pods of that namespace with all of those labels (one peer
	// holding both selectors: never the whole namespace). A gateway behind a Service's
	// ClusterIP needs it, since a policy matches the pod a connection reaches after the
	// Service's DNAT.
	GatewayPeer *GatewayPeer
	// Resolve resolves the gateway's name when GatewayURL holds one; nil means the host's
	// resolver. Whoever answers it chooses the addresses a pod may reach.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// GatewayCA is the PEM certificate(s) pods trust for the gateway's TLS. Required.
	GatewayCA []byte
	// Exporter registers each spec's session with the gateway. Required.
	Exporter remote.Exporter
	// BindPod binds a dispatch to the gateway slot a pool pod enrolled for (netgw.Slots.BindPod
	// of the home's gateway/slots, which the gateway the pods reach serves). nil: no dispatch
	// claims a pool pod ([Warmer.Claim] refuses; it starts cold).
	BindPod PodBind
	// Target is the target's name in agora.yaml, for messages.
	Target string
	// Backend is what each dispatch's pod is made through: [BackendJobs] ("" too), a
	// batch/v1 Job, or [BackendAgentSandbox], a kubernetes-sigs/agent-sandbox Sandbox holding
	// the same pod spec (agentsandbox.go). The token, NetworkPolicy, gateway and exit
	// semantics are the same.
	Backend string
	// SandboxUID is the first of the [compute.SandboxUIDs] uids (and gids) the target's pods
	// run as: each dispatch's pod as its own, [compute.SandboxUIDFor] its id, unless the
	// spec names RunAs. RLIMIT_NPROC counts per uid on a node, across pods. 0 means
	// [DefaultSandboxUID]; 2^31 and above are refused.
	SandboxUID uint32
	// PullSecrets names docker-registry Secrets of Namespace (made by the cluster's operator)
	// that every pod of the target carries as imagePullSecrets ([CheckPullSecrets]).
	PullSecrets []string
	// PullPolicy is every container's imagePullPolicy: IfNotPresent ("" too), Always or Never.
	PullPolicy string
}

// Provider runs specs as Kubernetes Jobs. It is safe for concurrent use.
type Provider struct {
	client   clusterAPI
	ns       string
	opts     Options
	cpu, mem *resource.Quantity
	gateway  gatewayAddr

	// testOnlyPodMeta, set by tests, edits the pod template's metadata (kwok's stages are
	// chosen by labels and annotations).
	testOnlyPodMeta func(*metav1.ObjectMeta)
	// testOnlyPoolSwept, set by tests, runs between SweepPools' delete of a pool's policy and
	// its look again (pool_sweep.go): a holder making the pool at that moment.
	testOnlyPoolSwept func(name string)
	// testOnlyPoolLapsing, set by tests, runs between deleteHomePools' read of a pool's
	// template and its delete (pool_sweep.go): a renewal or another sweep at that moment.
	testOnlyPoolLapsing func(name string)
	// testOnlyPoolLease, set by tests, is the lease of this provider's keeps of a pool, and how
	// long its sweeps watch a lease unchanged (pool_lease.go), instead of poolLease: a holder
	// whose lease lapses in seconds.
	testOnlyPoolLease time.Duration

	mu        sync.Mutex
	cancelled map[string]bool       // guarded by mu: Jobs this process is deleting on purpose
	starting  map[string]*startLock // guarded by mu: this process's Starts, by Job name
	sessions  map[string]int        // guarded by mu: handles holding a Job's gateway session
	made      map[string]string     // guarded by mu: pools EnsurePool made or found, name -> pod spec digest
	leases    map[string]leaseSeen  // guarded by mu: the leases DeleteLapsedPools watches, by pool
}

var _ compute.Provider = (*Provider)(nil)

// New checks opts and builds a provider with a client for its cluster. It does not contact
// the cluster.
func New(opts Options) (*Provider, error) {
	cfg, err := restConfig(opts.Kubeconfig, opts.Context)
	if err != nil {
		return nil, fmt.Errorf("kubernetes target %q: %w", opts.Target, err)
	}
	cs, err := newRESTCluster(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes target %q: client: %w", opts.Target, err)
	}
	return newProvider(opts, cs)
}

// restConfig loads a kubeconfig file, or the in-cluster configuration when path is empty.
func restConfig(path, context string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if path == "" {
		if context != "" {
			return nil, errors.New("context is set but kubeconfig is empty; name the kubeconfig file")
		}
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (set kubeconfig to run outside a cluster): %w", err)
		}
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %q: %w", path, err)
		}
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.UserAgent = "agora"
	return cfg, nil
}

// newProvider checks opts and builds a provider over client.
func newProvider(opts Options, client clusterAPI) (*Provider, error) {
	p := &Provider{client: client, ns: opts.Namespace, opts: opts, cancelled: make(map[string]bool),
		starting: make(map[string]*startLock), sessions: make(map[string]int)}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("kubernetes target %q: %w", opts.Target, err)
	}
	p.opts.TTL = cmp.Or(p.opts.TTL, DefaultTTL)
	return p, nil
}

// check validates the options and fills the parsed fields.
func (p *Provider) check() error {
	o := p.opts
	if !isDNSLabel(o.Namespace) {
		return fmt.Errorf("namespace %q: want a DNS label ([a-z0-9-], at most 63)", o.Namespace)
	}
	if err := checkImage("image", o.Image); err != nil {
		return err
	}
	if err := checkImage("worker_image", o.WorkerImage); err != nil {
		return err
	}
	if o.RuntimeClass != "" && !isDNSSubdomain(o.RuntimeClass) {
		return fmt.Errorf("runtime_class %q: not a valid RuntimeClass name", o.RuntimeClass)
	}
	for field, s := range map[string]string{"resources.cpu": o.CPU, "resources.memory": o.Memory} {
		if s == "" {
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() <= 0 {
			return fmt.Errorf("%s %q: want a positive quantity such as \"2\", \"500m\" or \"4Gi\"", field, s)
		}
		if field == "resources.cpu" {
			p.cpu = &q
		} else {
			p.mem = &q
		}
	}
	if err := CheckPullSecrets(o.PullSecrets); err != nil {
		return fmt.Errorf("image_pull_secrets: %w", err)
	}
	if err := CheckPullPolicy(o.PullPolicy); err != nil {
		return fmt.Errorf("image_pull_policy %w", err)
	}
	if o.SandboxUID > 1<<31-1 {
		return fmt.Errorf("sandbox_uid %d: want a uid below 2147483648", o.SandboxUID)
	}
	switch o.Backend {
	case "", BackendJobs, BackendAgentSandbox:
	default:
		return fmt.Errorf("backend %q: want %q (the default) or %q", o.Backend, BackendJobs, BackendAgentSandbox)
	}
	if o.TTL < 0 {
		return fmt.Errorf("ttl %v: must not be negative", o.TTL)
	}
	gw, err := parseGatewayURL(o.GatewayURL)
	if err != nil {
		return err
	}
	if gw.peer, err = checkPeer(o.GatewayPeer); err != nil {
		return err
	}
	p.gateway = gw
	if p.opts.Resolve == nil {
		p.opts.Resolve = lookupNetIP
	}
	if err := checkCA(o.GatewayCA); err != nil {
		return err
	}
	if o.Exporter == nil {
		return errors.New("no network gateway to export dispatches through (gateway in agora.yaml)")
	}
	return nil
}

// checkCA wants at least one PEM certificate and nothing else.
func checkCA(b []byte) error {
	n := 0
	for rest := b; ; n++ {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return fmt.Errorf("gateway CA: PEM block %q, want only CERTIFICATE", blk.Type)
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return fmt.Errorf("gateway CA: certificate %d: %w", n+1, err)
		}
	}
	if n == 0 {
		return errors.New("gateway CA: no PEM certificate")
	}
	return nil
}

// agentSandbox reports whether the target's dispatches run as agent-sandbox Sandboxes.
func (p *Provider) agentSandbox() bool { return p.opts.Backend == BackendAgentSandbox }
