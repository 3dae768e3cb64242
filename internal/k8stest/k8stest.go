// Package k8stest runs a real Kubernetes control plane for tests: etcd, kube-apiserver,
// kube-controller-manager (the Job controller and the garbage collector), kube-scheduler and
// kwok, which plays the kubelet of one fake node so a Job's pod goes Running and then
// Succeeded (or fails with a chosen exit code) without a container runtime. It is imported
// by tests only and uses the standard library only, so agora's go.mod never requires
// Kubernetes; the binaries come from scripts/k8s-tools.sh, built in a module of their own.
//
// Everything listens on loopback, speaks TLS with client certificates from a CA made in Go,
// and authorizes with Node,RBAC; the namespace the tests use enforces Pod Security
// "restricted". A package shares one cluster between its tests, since the apiserver costs
// seconds to start:
//
//	func TestMain(m *testing.M) { k8stest.Main(m) }
//
//	func TestJob(t *testing.T) {
//		c := k8stest.Shared(t, k8stest.Options{})
//		...
//	}
//
// A test that wants a namespace to itself on the package's cluster (every Job in it its
// own) takes Shared(...).InNewNamespace(t); a test that needs a cluster of its own (to kill
// its apiserver, say) calls Start. Either skips, saying so, when the binaries are absent.
package k8stest

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options chooses what kind of cluster to start. The zero value is the kwok cluster.
type Options struct {
	// Namespace is the namespace made for the tests, enforcing Pod Security "restricted".
	// Empty means "agents".
	Namespace string
	// RealNode runs a real kubelet over Debian's containerd and runc instead of kwok, so pods
	// run real processes. It needs root and the packages named in the skip message.
	RealNode bool
	// InClusterAPI (with RealNode) lets the node's pods reach the apiserver as in a cluster,
	// at the "kubernetes" Service (10.0.0.1:443, what client-go's in-cluster configuration
	// dials): the apiserver listens on RealNodeIP and one DNAT rule stands in for kube-proxy.
	// For agora's own manifests, whose serve pod dispatches with its service account.
	InClusterAPI bool
	// AgentSandbox installs kubernetes-sigs/agent-sandbox's CRDs (Sandbox, SandboxTemplate,
	// SandboxClaim, SandboxWarmPool) from the module scripts/k8s-tools.sh pins, and runs its
	// real controller against the cluster.
	AgentSandbox bool
	// GVisor (with RealNode) needs gVisor's runsc and containerd-shim-runsc-v1 from
	// scripts/gvisor-tools.sh (a skip without them) and makes RuntimeClass GVisorRuntimeClass,
	// whose handler is the node's runsc. A real node registers that handler whenever
	// the two are built; this makes them required.
	GVisor bool
	// NetworkPolicy (with RealNode) needs the NetworkPolicy engine from
	// scripts/netpol-tools.sh (a skip without it): kube-network-policies enforces the
	// cluster's NetworkPolicies on the node's pods (netpol.go). A real node runs it whenever it
	// is built (AGORA_K8S_NETPOL=0 turns that off); this makes it required.
	NetworkPolicy bool
}

// Cluster is a running control plane. Its fields are read-only.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig (JSON, credentials embedded, 0600) whose
	// context defaults to Namespace.
	Kubeconfig string
	// Namespace exists and enforces Pod Security "restricted".
	Namespace string
	// Server is the apiserver's URL, https://127.0.0.1:<port> (with InClusterAPI:
	// https://RealNodeIP:<port>, where the node's pods reach it too).
	Server string
	// CAFile is the PEM file of the CA that signed every certificate of the cluster.
	CAFile string
	// Node is the name of the one node Jobs are scheduled to.
	Node string
	// Dir holds the certificates, kubeconfigs, etcd's data and each component's log
	// (<component>.log); it is removed by Stop.
	Dir string
	// StartTime is how long Start took, from nothing to a namespace ready for a Job.
	StartTime time.Duration
	// GVisor says the real node's containerd has the runtime handler GVisorHandler (gVisor's
	// runsc through its shim), beside the default runc.
	GVisor bool
	// NetworkPolicies says the real node's NetworkPolicy engine runs: the pods' policies are
	// enforced, not only stored (netpol.go).
	NetworkPolicies bool

	opts           Options
	client         *http.Client
	etcd           *proc
	apiserver      *proc
	procs          []*proc // in start order; Stop kills them in reverse
	containerdSock string  // RealNode only
	stopServices   func()  // InClusterAPI only: ends the Services' stand-ins (services.go)
	netpol         *proc   // the NetworkPolicy engine, nil without one
	stopOnce       sync.Once
	test           string // the test that started it (the first of a shared cluster's)
}

// Start starts a cluster for t alone and stops it when t ends. It skips t when the binaries
// are absent and fails it when the cluster does not come up.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c, err := start(t, opts)
	if err != nil {
		var skip *skipError
		if errors.As(err, &skip) {
			t.Skip(skip.Error())
		}
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Logf("k8stest: cluster up in %s (%s)", c.StartTime.Round(time.Millisecond), c.Server)
	return c
}

// shared holds the package's clusters, one per Options, started by the first test that asks
// and stopped by Main.
var shared struct {
	sync.Mutex
	main     bool
	clusters map[Options]*sharedCluster
}

type sharedCluster struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Main runs the package's tests and then stops the clusters Shared started. Call it from
// TestMain; Shared fails a test when it was not, since its cluster would outlive the tests.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain that hands its tests to another runner
// (agoratest.RunWithBinary(k8stest.Runner(m), ...)): it runs them, stops the shared clusters
// and returns the exit code.
func Run(m interface{ Run() int }) int {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	for _, s := range shared.clusters {
		if s.c != nil {
			s.c.Stop()
		}
	}
	shared.Unlock()
	return code
}

// Runner is m run by [Run].
func Runner(m interface{ Run() int }) interface{ Run() int } { return runner{m} }

type runner struct{ m interface{ Run() int } }

func (r runner) Run() int { return Run(r.m) }

// Shared returns the package's cluster for opts, starting it on first use. Tests that share a
// cluster must not break it (kill its apiserver) and should name what they create uniquely.
// It skips t when the binaries are absent, and every later test asking for the same cluster
// skips with the same message; a cluster that failed to start fails each of them.
func Shared(t testing.TB, opts Options) *Cluster {
	t.Helper()
	shared.Lock()
	if !shared.main {
		shared.Unlock()
		t.Fatal("k8stest.Shared needs k8stest.Main(m) in the package's TestMain, which stops the cluster")
	}
	if shared.clusters == nil {
		shared.clusters = map[Options]*sharedCluster{}
	}
	s := shared.clusters[opts]
	if s == nil {
		s = &sharedCluster{}
		shared.clusters[opts] = s
	}
	shared.Unlock()
	if opts.RealNode {
		// A test outside the smoke set skips before the once: its skip must not become the
		// shared cluster's answer to a smoke test asking after it.
		if err := realNodeWanted(t); err != nil {
			t.Skip(err.Error())
		}
	}
	s.once.Do(func() {
		s.c, s.err = start(t, opts)
		if s.err == nil {
			t.Logf("k8stest: shared cluster up in %s (%s)", s.c.StartTime.Round(time.Millisecond), s.c.Server)
		}
	})
	if s.err != nil {
		var skip *skipError
		if errors.As(s.err, &skip) {
			t.Skip(skip.Error())
		}
		t.Fatal(s.err)
	}
	return s.c
}

// skipError says which part is missing and how to get it; Start and Shared turn it into a
// loud skip.
type skipError struct{ why string }

func (e *skipError) Error() string { return "SKIP: " + e.why }

// binDir is where the binaries are: $AGORA_K8S_BIN, or .cache/k8s/bin of the module the test
// runs in (found by walking up from the working directory to go.mod).
func binDir() (string, error) {
	if d := os.Getenv("AGORA_K8S_BIN"); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "k8s", "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find the module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// binaries are the paths of every program a cluster runs.
type binaries struct {
	etcd, apiserver, controllerManager, scheduler, kwok string
	stages                                              []string // kwok's stage files
	kubelet                                             string   // RealNode only
	agentSandbox                                        string   // AgentSandbox only
	agentSandboxCRDs                                    []string // AgentSandbox only
	gvisorBin                                           string   // RealNode: runsc and its shim, "" when not built
	netpol                                              string   // RealNode: the NetworkPolicy engine, "" when not built or turned off
}

const buildHint = "run scripts/k8s-tools.sh (or set AGORA_K8S_BIN)"

func findBinaries(opts Options) (*binaries, error) {
	dir, err := binDir()
	if err != nil {
		return nil, err
	}
	var missing []string
	need := func(name string) string {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, name)
		}
		return p
	}
	b := &binaries{
		apiserver:         need("kube-apiserver"),
		controllerManager: need("kube-controller-manager"),
		scheduler:         need("kube-scheduler"),
		kwok:              need("kwok"),
	}
	if opts.RealNode {
		b.kubelet = need("kubelet")
		var miss string
		b.gvisorBin, miss = gvisorBinDir()
		if opts.GVisor && miss != "" {
			return nil, &skipError{miss}
		}
		if os.Getenv("AGORA_K8S_NETPOL") == "0" {
			miss = "Options.NetworkPolicy is turned off by AGORA_K8S_NETPOL=0"
		} else {
			b.netpol, miss = netpolBinary()
		}
		if opts.NetworkPolicy && miss != "" {
			return nil, &skipError{miss}
		}
	}
	if opts.AgentSandbox {
		var miss []string
		b.agentSandbox, b.agentSandboxCRDs, miss = agentSandboxFiles(dir)
		missing = append(missing, miss...)
	}
	// etcd is Debian's etcd-server; one in the bin directory wins, for machines without apt.
	if p := filepath.Join(dir, "etcd"); fileExists(p) {
		b.etcd = p
	} else if p, err := exec.LookPath("etcd"); err == nil {
		b.etcd = p
	} else {
		missing = append(missing, "etcd (apt-get install etcd-server)")
	}
	b.stages, _ = filepath.Glob(filepath.Join(dir, "kwok-stages", "*.yaml"))
	if len(b.stages) == 0 && !opts.RealNode {
		missing = append(missing, "kwok-stages/*.yaml")
	}
	if len(missing) > 0 {
		return nil, &skipError{fmt.Sprintf("no %s in %s: %s", strings.Join(missing, ", "), dir, buildHint)}
	}
	return b, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// scratchRoot is where clusters keep their files: /dev/shm when there is one, since etcd
// fsyncs every write and a disk makes a 200-Job benchmark measure the disk.
func scratchRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

// removeStale deletes the directories of clusters whose test binary died without Stop (the
// children died with it, by Pdeathsig; their files did not). A directory's name carries the
// pid that made it.
func removeStale(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, "agora-k8stest-*"))
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "agora-k8stest-%d-", &pid); err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, fs.ErrNotExist) {
			_ = os.RemoveAll(d)
		}
	}
}

// Stop kills every component and removes Dir. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		if c.containerdSock != "" {
			// The controllers first, so no Job makes a pod while the node drains.
			for _, p := range c.procs {
				if p.name == "kube-controller-manager" || p.name == "kube-scheduler" || p.name == "agent-sandbox-controller" {
					p.kill()
				}
			}
			c.drainRealNode()
		}
		for i := len(c.procs) - 1; i >= 0; i-- {
			c.procs[i].kill()
		}
		if c.containerdSock != "" {
			c.releaseRealNode()
		}
		_ = os.RemoveAll(c.Dir)
	})
}

// Log returns the end of a component's log ("kube-apiserver", "etcd", "kwok", ...), for a
// failure message.
func (c *Cluster) Log(component string) string {
	for _, p := range c.procs {
		if p.name == component {
			return p.tail()
		}
	}
	return "(no component " + component + ")"
}
