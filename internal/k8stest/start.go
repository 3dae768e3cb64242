package k8stest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Timeouts for a machine shared by several builds at once; an idle one needs a tenth.
const (
	apiserverReady = 90 * time.Second
	clusterReady   = 90 * time.Second
)

func start(t testing.TB, opts Options) (*Cluster, error) {
	if opts.Namespace == "" {
		opts.Namespace = "agents"
	}
	if opts.GVisor && !opts.RealNode {
		return nil, errors.New("k8stest: Options.GVisor needs Options.RealNode (kwok runs no containers)")
	}
	if opts.NetworkPolicy && !opts.RealNode {
		return nil, errors.New("k8stest: Options.NetworkPolicy needs Options.RealNode (kwok runs no network)")
	}
	bins, err := findBinaries(opts)
	if err != nil {
		return nil, err
	}
	if opts.RealNode {
		if err := realNodeReady(t); err != nil {
			return nil, err
		}
	}
	// A port taken between freePorts and the component binding it fails that attempt only.
	for attempt := 1; ; attempt++ {
		c, err := startOnce(t.Name(), opts, bins)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			return c, err
		}
	}
}

func startOnce(test string, opts Options, bins *binaries) (_ *Cluster, err error) {
	begin := time.Now()
	root := scratchRoot()
	removeStale(root)
	dir, err := os.MkdirTemp(root, fmt.Sprintf("agora-k8stest-%d-", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("make the cluster directory: %w", err)
	}
	c := &Cluster{Dir: dir, Namespace: opts.Namespace, opts: opts, test: test}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdPort, peerPort, apiPort := ports[0], ports[1], ports[2]
	c.Server = "https://" + hostPort(apiPort)
	apiBind, apiIPs := "127.0.0.1", []net.IP{net.IPv4(10, 0, 0, 1)}
	if opts.RealNode && opts.InClusterAPI {
		// Pods reach the apiserver as in a cluster: at the "kubernetes" Service's address,
		// which serviceProxy forwards to the node IP (inClusterAPI); so it listens there.
		if err := ensureNodeIP(); err != nil {
			return nil, err
		}
		apiBind, apiIPs = RealNodeIP, append(apiIPs, net.ParseIP(RealNodeIP))
		c.Server = "https://" + net.JoinHostPort(RealNodeIP, fmt.Sprint(apiPort))
	}

	p, err := newPKI(dir)
	if err != nil {
		return nil, err
	}
	c.CAFile = p.caFile()
	ids := map[string]*identity{}
	for _, want := range []struct{ name, cn, group string }{
		{"admin", "k8stest-admin", "system:masters"},
		{"kube-controller-manager", "system:kube-controller-manager", ""},
		{"kube-scheduler", "system:kube-scheduler", ""},
		// kwok writes the status of nodes and pods, which in a real cluster only each node's
		// kubelet may; one fake node, so it acts as admin.
		{"kwok", "kwok", "system:masters"},
		{"etcd-client", "kube-apiserver-etcd-client", ""},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters"},
	} {
		var groups []string
		if want.group != "" {
			groups = []string{want.group}
		}
		if ids[want.name], err = p.client(want.name, want.cn, groups...); err != nil {
			return nil, err
		}
	}
	// 10.0.0.1 is the "kubernetes" Service's address in --service-cluster-ip-range.
	if ids["apiserver"], err = p.serving("apiserver", apiIPs,
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"); err != nil {
		return nil, err
	}
	if ids["etcd"], err = p.serving("etcd", nil); err != nil {
		return nil, err
	}
	saKey, saPub, err := p.serviceAccountKeys()
	if err != nil {
		return nil, err
	}
	kubeconfigs := map[string]string{}
	for _, name := range []string{"admin", "kube-controller-manager", "kube-scheduler", "kwok"} {
		ns := ""
		if name == "admin" {
			ns = opts.Namespace
		}
		if kubeconfigs[name], err = writeKubeconfig(dir, name, c.Server, p.caPEM, ids[name], ns); err != nil {
			return nil, err
		}
	}
	c.Kubeconfig = kubeconfigs["admin"]
	if c.client, err = newHTTPClient(p.caPEM, ids["admin"]); err != nil {
		return nil, err
	}

	etcdURL := "https://" + hostPort(etcdPort)
	peerURL := "http://" + hostPort(peerPort) // one member: nothing ever connects to it
	c.etcd = newProc(dir, "etcd", []string{bins.etcd,
		"--name=k8stest", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=k8stest=" + peerURL,
		"--cert-file=" + ids["etcd"].certFile, "--key-file=" + ids["etcd"].keyFile,
		"--client-cert-auth", "--trusted-ca-file=" + p.caFile(),
		"--logger=zap", "--log-level=warn",
	})
	c.apiserver = newProc(dir, "kube-apiserver", []string{bins.apiserver,
		"--etcd-servers=" + etcdURL, "--etcd-cafile=" + p.caFile(),
		"--etcd-certfile=" + ids["etcd-client"].certFile, "--etcd-keyfile=" + ids["etcd-client"].keyFile,
		"--bind-address=" + apiBind, "--secure-port=" + fmt.Sprint(apiPort),
		"--cert-dir=" + dir,
		"--tls-cert-file=" + ids["apiserver"].certFile, "--tls-private-key-file=" + ids["apiserver"].keyFile,
		"--client-ca-file=" + p.caFile(),
		"--anonymous-auth=false",
		"--authorization-mode=Node,RBAC",
		// PodSecurity is on by default; named so that a default changing cannot drop it.
		"--enable-admission-plugins=NodeRestriction,PodSecurity",
		// Privileged pods are allowed by the apiserver so that Pod Security is what refuses
		// them in a restricted namespace, as on a real cluster.
		"--allow-privileged=true",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		// The "kubernetes" Service's endpoints would be 127.0.0.1, which endpoint validation
		// refuses; nothing in the tests resolves that Service.
		"--endpoint-reconciler-type=none",
		"--kubelet-client-certificate=" + ids["apiserver-kubelet-client"].certFile,
		"--kubelet-client-key=" + ids["apiserver-kubelet-client"].keyFile,
		"--kubelet-certificate-authority=" + p.caFile(),
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
		// A watch from resourceVersion 0 (every kwok informer's, and client-go's first) is
		// turned by the WatchList feature into a streaming watch, which needs etcd's progress
		// requests; Debian's etcd 3.4 has none, so the apiserver ended each such watch at once
		// and kwok saw a pod only at its next relist, seconds later or never.
		"--feature-gates=WatchList=false",
	})
	for _, pr := range []*proc{c.etcd, c.apiserver} {
		if err := pr.start(); err != nil {
			return nil, err
		}
		c.procs = append(c.procs, pr)
	}
	if err := c.waitAPIServer(apiserverReady); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReady)
	defer cancel()
	if opts.AgentSandbox {
		// Before the controller-manager starts: its garbage collector learns the resources it
		// may collect at start and then only at its discovery resync (30 s), so a foreground
		// deletion of a Sandbox made before that waited up to 30 s for its pod to be collected
		// (the agent-sandbox tests took 77 s).
		if err := c.installAgentSandboxCRDs(ctx, bins.agentSandboxCRDs); err != nil {
			return nil, err
		}
	}

	qps := []string{"--kube-api-qps=200", "--kube-api-burst=400"} // defaults (20, 30) throttle 200 Jobs
	kcm := newProc(dir, "kube-controller-manager", append([]string{bins.controllerManager,
		"--kubeconfig=" + kubeconfigs["kube-controller-manager"],
		"--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + saKey,
		"--root-ca-file=" + p.caFile(),
		"--controllers=" + strings.Join(controllers, ","),
		"--concurrent-job-syncs=20",
		"--profiling=false",
	}, qps...), noWatchList)
	sched := newProc(dir, "kube-scheduler", append([]string{bins.scheduler,
		"--kubeconfig=" + kubeconfigs["kube-scheduler"],
		"--authentication-kubeconfig=" + kubeconfigs["kube-scheduler"],
		"--authorization-kubeconfig=" + kubeconfigs["kube-scheduler"],
		"--secure-port=0", "--leader-elect=false",
		"--profiling=false",
	}, qps...), noWatchList)
	comps := []*proc{kcm, sched}
	if opts.RealNode {
		rn, err := c.realNodeProcs(dir, bins, p)
		if err != nil {
			return nil, err
		}
		comps = append(comps, rn...)
	} else {
		stage, err := writeSlotStage(dir)
		if err != nil {
			return nil, err
		}
		comps = append(comps, c.kwokProc(dir, bins, kubeconfigs["kwok"], stage))
	}
	for _, pr := range comps {
		if err := pr.start(); err != nil {
			return nil, err
		}
		c.procs = append(c.procs, pr)
	}
	if opts.RealNode {
		// realNodeProcs waits for the machine's one real node (lockRealNode) as long as another
		// package's cluster holds it, minutes at times: the readiness bound is this cluster's
		// own, so it starts once the node is.
		var cancelNode context.CancelFunc
		ctx, cancelNode = context.WithTimeout(context.Background(), clusterReady)
		defer cancelNode()
	}

	if err := c.createNamespace(ctx); err != nil {
		return nil, err
	}
	if !opts.RealNode {
		if err := c.createKwokNode(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	if opts.GVisor && c.GVisor {
		if err := c.createGVisorRuntimeClass(ctx); err != nil {
			return nil, err
		}
	}
	if c.netpol != nil {
		deadline, _ := ctx.Deadline()
		if err := c.waitNetpol(time.Until(deadline)); err != nil {
			return nil, err
		}
	}
	if opts.AgentSandbox {
		pr := c.agentSandboxProc(dir, bins)
		if err := pr.start(); err != nil {
			return nil, err
		}
		c.procs = append(c.procs, pr)
	}
	c.StartTime = time.Since(begin)
	return c, nil
}

// noWatchList turns off client-go's streaming list for a component: it needs etcd's progress
// notifications, which Debian's etcd 3.4 lacks, and a client that asks anyway gets its watch
// ended over and over and never syncs.
const noWatchList = "KUBE_FEATURE_WatchListClient=false"

// controllers are the controller-manager's controllers the tests rely on: Jobs and their pods,
// foreground deletion (the garbage collector), the default service account a pod needs, and
// namespace deletion, RBAC's aggregated roles. Starting the other thirty costs CPU on a shared
// machine for nothing.
var controllers = []string{
	"job-controller",
	"garbage-collector-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"namespace-controller",
	"pod-garbage-collector-controller",
	"ttl-after-finished-controller",
	"root-ca-certificate-publisher-controller",
	"clusterrole-aggregation-controller", // the admin/edit roles a least-privilege test binds
	// The apiserver taints every new node not-ready; this controller lifts the taint once the
	// node reports Ready (and marks a node whose kubelet or kwok went silent).
	"node-lifecycle-controller",
	// agora's own manifests (deploy/kubernetes): a Deployment's ReplicaSet and pods, a
	// StatefulSet's, and the claims of both bound to the test's PersistentVolumes.
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"persistentvolume-binder-controller",
}

// waitAPIServer polls /readyz until the apiserver says every check passed.
func (c *Cluster) waitAPIServer(timeout time.Duration) error {
	err := waitFor(timeout, 50*time.Millisecond, "kube-apiserver /readyz", c.checkAlive, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := c.Do(ctx, http.MethodGet, "/readyz", nil, nil)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("%w; its log ends:\n%s", err, c.apiserver.tail())
	}
	return nil
}

// checkAlive fails as soon as a component has exited, quoting its log.
func (c *Cluster) checkAlive() error {
	for _, p := range c.procs {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v); its log ends:\n%s", p.name, err, p.tail())
		}
	}
	return nil
}

func (c *Cluster) createNamespace(ctx context.Context) error {
	ns := map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{
			"name": c.Namespace,
			"labels": map[string]string{
				"pod-security.kubernetes.io/enforce":         "restricted",
				"pod-security.kubernetes.io/enforce-version": "latest",
			},
		},
	}
	if err := c.Do(ctx, http.MethodPost, "/api/v1/namespaces", ns, nil); err != nil {
		return fmt.Errorf("create namespace %s: %w", c.Namespace, err)
	}
	return nil
}

// waitReady waits until a Job could run: the node is Ready and untainted (kwok or the kubelet
// is up, and the node-lifecycle controller saw it) and
// the namespace's default service account exists (the controller-manager is up; without it
// the ServiceAccount admission refuses every pod).
func (c *Cluster) waitReady(ctx context.Context) error {
	deadline, _ := ctx.Deadline()
	timeout := time.Until(deadline)
	var nodeName string
	err := waitFor(timeout, 50*time.Millisecond, "a Ready node", c.checkAlive, func() (bool, error) {
		var nodes struct {
			Items []struct {
				Metadata struct{ Name string }
				Spec     struct{ Taints []struct{ Key string } }
				Status   struct {
					Conditions []struct{ Type, Status string }
				}
			}
		}
		if err := c.Do(ctx, http.MethodGet, "/api/v1/nodes", nil, &nodes); err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" && len(n.Spec.Taints) == 0 {
					nodeName = n.Metadata.Name
					return true, nil
				}
			}
		}
		return false, errors.New("no node is Ready and untainted")
	})
	if err != nil {
		return err
	}
	c.Node = nodeName
	return waitFor(time.Until(deadline), 50*time.Millisecond, "service account "+c.Namespace+"/default", c.checkAlive, func() (bool, error) {
		err := c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+c.Namespace+"/serviceaccounts/default", nil, nil)
		return err == nil, err
	})
}

// KillAPIServer kills the apiserver (SIGKILL), leaving etcd and the other components running,
// as a crash or an unreachable control plane would. RestartAPIServer brings it back.
func (c *Cluster) KillAPIServer() { c.apiserver.kill() }

// RestartAPIServer starts the apiserver again with the same flags, port and data, and waits
// until it is ready.
func (c *Cluster) RestartAPIServer() error {
	if done, _ := c.apiserver.exited(); !done {
		return errors.New("kube-apiserver is still running: call KillAPIServer first")
	}
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return c.waitAPIServer(apiserverReady)
}
