package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute"
	"github.com/agora-dev/agora/internal/compute/kubernetes"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/k8stest"
	"github.com/agora-dev/agora/internal/netgw"
	workerremote "github.com/agora-dev/agora/internal/worker/remote"
)

// podNode is a real node (k8stest.Options.RealNode) holding agora's worker image and the
// toolchain image, and a network gateway the node's pods reach.
type podNode struct {
	c                    *k8stest.Cluster
	workerRef, toolchain string // digest-pinned, as containerd holds them
	gatewayURL           string
	ca                   []byte
	reg                  *netgw.Registry
	slotsDir             string // the gateway's warm slots: a warm home links its gateway/slots here
	gwLog                *agoratest.SyncBuffer
	peers                peerSet // the addresses the gateway was reached from
	pods                 podVerifier
}

// podVerifier is the node gateway's netgw.PodVerifier, set by a test whose target keeps an
// agent-sandbox pool: until then every enrolment is refused.
type podVerifier struct {
	mu sync.Mutex
	v  netgw.PodVerifier
}

func (p *podVerifier) set(v netgw.PodVerifier) {
	p.mu.Lock()
	p.v = v
	p.mu.Unlock()
}

func (p *podVerifier) VerifyPod(ctx context.Context, token string) (remote.PodIdentity, error) {
	p.mu.Lock()
	v := p.v
	p.mu.Unlock()
	if v == nil {
		return remote.PodIdentity{}, errors.New("no pool verifier on this node's gateway")
	}
	return v.VerifyPod(ctx, token)
}

// peerSet records the hosts of the connections a listener accepted.
type peerSet struct {
	mu    sync.Mutex
	hosts map[string]int
}

func (p *peerSet) add(addr net.Addr) {
	host, _, _ := net.SplitHostPort(addr.String())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hosts == nil {
		p.hosts = map[string]int{}
	}
	p.hosts[host]++
}

func (p *peerSet) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for h, n := range p.hosts {
		out[h] = n
	}
	return out
}

type peerListener struct {
	net.Listener
	peers *peerSet
}

func (l *peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.peers.add(c.RemoteAddr())
	}
	return c, err
}

// startPodNode brings the node up, or skips saying which part is missing. The worker image is
// made here from the worker program built beside the test's agora (FROM scratch, at /agora/bin/agora-worker,
// as images/agora-worker.Containerfile builds it), so the pod runs the code under test; the
// toolchain image is the container tests' (podman), saved and imported into containerd.
func startPodNode(t testing.TB) *podNode {
	t.Helper()
	return startPodNodeWith(t, k8stest.Options{RealNode: true})
}

// startPodNodeWith is startPodNode with the cluster's options (opts.RealNode must be set).
func startPodNodeWith(t testing.TB, opts k8stest.Options) *podNode {
	t.Helper()
	toolchain := requireContainer(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("SKIP: podman is missing (it saves the toolchain image for containerd): run scripts/podman.sh")
	}
	c := k8stest.Start(t, opts)
	n := &podNode{c: c}
	var err error
	if n.workerRef, err = c.ImportAgoraWorker(t.Context(), agoratest.Worker(agoraBin)); err != nil {
		t.Fatal(err)
	}
	if n.toolchain, err = c.ImportPodmanImage(t.Context(), toolchain); err != nil {
		t.Fatal(err)
	}
	t.Logf("images in containerd: worker %s, toolchain %s", n.workerRef, n.toolchain)

	n.startGateway(t)
	return n
}

// startGateway serves the network gateway on the node's IP, which the pods reach through the
// bridge's default route, certified for that IP. It says it runs the version the worker
// binary was built as, as `agora orch serve --gateway` does from the same binary.
func (n *podNode) startGateway(t testing.TB) {
	t.Helper()
	// The worker image holds agoratest.Worker(agoraBin): its identity, bytes and all when it has
	// no version, is what `agora orch serve --gateway` reports from the same install.
	version := workerremote.VersionOf(agoratest.Worker(agoraBin))
	dir := t.TempDir()
	certs, err := netgw.LoadOrCreateCA(filepath.Join(dir, "keys"), []string{k8stest.RealNodeIP})
	if err != nil {
		t.Fatal(err)
	}
	n.ca = certs.CAPEM
	n.reg = &netgw.Registry{Dir: filepath.Join(dir, "sessions")}
	n.gwLog = &agoratest.SyncBuffer{}
	n.slotsDir = filepath.Join(dir, "slots")
	srv := &netgw.Server{Registry: n.reg, Slots: &netgw.Slots{Dir: n.slotsDir}, Pods: &n.pods, Version: version, Log: slog.New(slog.NewJSONHandler(n.gwLog, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ln, err := net.Listen("tcp", net.JoinHostPort(k8stest.RealNodeIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	n.gatewayURL = "https://" + ln.Addr().String()
	ln = &peerListener{Listener: ln, peers: &n.peers}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln, certs.Server) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && err != http.ErrServerClosed {
			t.Errorf("gateway: %v", err)
		}
	})
}

// addPodTarget adds target "pod": the default target's settings on provider kubernetes, on
// the node.
func (e *env) addPodTarget(n *podNode) {
	tg := e.home.Config.Targets[config.DefaultTarget]
	tg.Provider = config.ProviderKubernetes
	tg.Image, tg.WorkerImage = n.toolchain, n.workerRef
	tg.Kubeconfig, tg.Namespace, tg.Gateway = n.c.Kubeconfig, n.c.Namespace, n.gatewayURL
	e.home.Config.Targets["pod"] = tg
	var p compute.Provider
	e.d.RemoteProviders = func(ctx context.Context, name string, tg config.Target) (compute.Provider, error) {
		if p != nil {
			return p, nil
		}
		kp, err := kubernetes.New(kubernetes.Options{
			Kubeconfig: tg.Kubeconfig, Namespace: tg.Namespace, Image: tg.Image, WorkerImage: tg.WorkerImage,
			GatewayURL: tg.Gateway, GatewayCA: n.ca, Exporter: n.reg, Target: name,
			BindPod: (&netgw.Slots{Dir: n.slotsDir}).BindPod,
		})
		p = kp
		return kp, err
	}
}

// grepTree lists the regular files under root that hold needle (each read whole, up to 1 GiB),
// and how many it read: everything the node keeps (etcd's data, containerd's content and
// snapshots, the kubelet's pod volumes, the logs).
func grepTree(t *testing.T, root string, needle []byte) (hits []string, files int) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file gone while walking (a log rotated, a pod's volume torn down)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if fi, err := d.Info(); err != nil || fi.Size() > 1<<30 {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		files++
		if bytes.Contains(b, needle) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits, files
}

// objectsJSON is a GET of each object kind in the node's namespace, raw, for a search. It
// returns an error rather than fail the test: the model API's handler calls it.
func (n *podNode) objectsJSON(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	for kind, path := range map[string]string{
		"jobs":            "/apis/batch/v1/namespaces/" + n.c.Namespace + "/jobs",
		"pods":            "/api/v1/namespaces/" + n.c.Namespace + "/pods",
		"secrets":         "/api/v1/namespaces/" + n.c.Namespace + "/secrets",
		"networkpolicies": "/apis/networking.k8s.io/v1/namespaces/" + n.c.Namespace + "/networkpolicies",
		"events":          "/api/v1/namespaces/" + n.c.Namespace + "/events",
	} {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var raw []byte
		err := n.c.Do(ctx, http.MethodGet, path, nil, &raw)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", path, err)
		}
		out[kind] = raw
	}
	return out, nil
}

// podLogs is every container's log of every pod in the namespace, for a failure message.
func (n *podNode) podLogs(t *testing.T) string {
	t.Helper()
	var pods struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	ctx := t.Context()
	if err := n.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+n.c.Namespace+"/pods", nil, &pods); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		for _, ctr := range []string{"fetch", "worker"} {
			var log []byte
			err := n.c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+n.c.Namespace+"/pods/"+p.Metadata.Name+"/log?container="+ctr, nil, &log)
			fmt.Fprintf(&b, "--- %s/%s (%v)\n%s\n", p.Metadata.Name, ctr, err, log)
		}
	}
	return b.String()
}

// logPodTimeline logs where a finished pod's time went, from its status (the apiserver keeps
// whole seconds): created, scheduled, the init container's run, the worker's run, and the
// Job's conditions, which the provider waits on.
func (n *podNode) logPodTimeline(t testing.TB) {
	t.Helper()
	type term struct {
		Terminated *struct{ StartedAt, FinishedAt time.Time }
	}
	var pods struct {
		Items []struct {
			Metadata struct {
				Name              string
				CreationTimestamp time.Time
			}
			Status struct {
				Conditions []struct {
					Type               string
					LastTransitionTime time.Time
				}
				InitContainerStatuses []struct{ State term }
				ContainerStatuses     []struct{ State term }
			}
		}
	}
	if err := n.c.Do(t.Context(), http.MethodGet, "/api/v1/namespaces/"+n.c.Namespace+"/pods", nil, &pods); err != nil {
		t.Logf("pod timeline: %v", err)
		return
	}
	for _, p := range pods.Items {
		t0 := p.Metadata.CreationTimestamp
		var b strings.Builder
		fmt.Fprintf(&b, "pod %s from creation:", p.Metadata.Name)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s +%s;", c.Type, c.LastTransitionTime.Sub(t0))
		}
		for name, sts := range map[string][]struct{ State term }{"fetch": p.Status.InitContainerStatuses, "worker": p.Status.ContainerStatuses} {
			for _, st := range sts {
				if st.State.Terminated != nil {
					fmt.Fprintf(&b, " %s ran +%s..+%s;", name, st.State.Terminated.StartedAt.Sub(t0), st.State.Terminated.FinishedAt.Sub(t0))
				}
			}
		}
		var jobs struct {
			Items []struct {
				Status struct {
					Conditions []struct {
						Type               string
						LastTransitionTime time.Time
					}
				}
			}
		}
		if err := n.c.Do(t.Context(), http.MethodGet, "/apis/batch/v1/namespaces/"+n.c.Namespace+"/jobs", nil, &jobs); err == nil {
			for _, j := range jobs.Items {
				for _, c := range j.Status.Conditions {
					fmt.Fprintf(&b, " job %s +%s;", c.Type, c.LastTransitionTime.Sub(t0))
				}
			}
		}
		t.Log(b.String())
	}
}

// readCmdline is a host process's command line, its arguments joined by spaces.
func readCmdline(pid string) (string, error) {
	b, err := os.ReadFile("/proc/" + pid + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")), err
}

func toJSON(t testing.TB, v any) string {
	t.Helper()
	return mustJSON(t, v)
}
