package kubernetes

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/compute/remote"
	"github.com/agora-dev/agora/internal/k8stest"
)

// netprobeSource is the one program of the NetworkPolicy attack tests' image, a static binary
// at /agora/bin/agora-worker, so agora's own Job runs it where its worker would run:
//
//   - `agora-worker worker fetch` (the Job's init container): copies itself into the bin
//     volume, as agora's fetch copies the worker;
//   - `agora-worker worker` (the worker container, where a dispatch's agent runs): first, with
//     NETPROBE_GATE set, connects to the gateway, says "gate" and waits for its "go" (the test
//     says go once the NetworkPolicy engine polices the pod); then tries every target of NETPROBE
//     ("name=tcp:HOST:PORT" or "name=dns:HOST:PORT", space-separated) and prints
//     "PROBE name OK" or "PROBE name BLOCKED reason" for each;
//   - `agora-worker serve ADDR...`: accepts on each TCP address and prints
//     "ACCEPT local from remote" for every connection: what connected, recorded where it
//     landed.
const netprobeSource = `package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	args := os.Args[1:]
	switch {
	case len(args) >= 2 && args[0] == "worker" && args[1] == "fetch":
		fetch()
	case len(args) >= 1 && args[0] == "worker":
		probe()
	case len(args) >= 1 && args[0] == "serve":
		serve(args[1:])
	default:
		fmt.Println("usage: worker [fetch] | serve ADDR...")
		os.Exit(2)
	}
}

func fetch() {
	self, err := os.ReadFile("/proc/self/exe")
	if err == nil {
		dst := filepath.Join(os.Getenv("AGORA_STAGE"), "bin", "agora-worker")
		err = os.WriteFile(dst, self, 0o755)
	}
	if err != nil {
		fmt.Println("fetch:", err)
		os.Exit(1)
	}
}

func probe() {
	if gate := os.Getenv("NETPROBE_GATE"); gate != "" {
		start := time.Now()
		c, err := net.DialTimeout("tcp", gate, 10*time.Second)
		if err != nil {
			fmt.Println("GATE unreachable:", err)
			os.Exit(3)
		}
		c.SetDeadline(time.Now().Add(90 * time.Second))
		io.WriteString(c, "gate\n")
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if strings.TrimSpace(line) != "go" {
			fmt.Printf("GATE said %q: %v\n", line, err)
			os.Exit(3)
		}
		fmt.Printf("GATE go after %s\n", time.Since(start).Round(time.Millisecond))
	}
	for _, t := range strings.Fields(os.Getenv("NETPROBE")) {
		name, spec, _ := strings.Cut(t, "=")
		kind, addr, _ := strings.Cut(spec, ":")
		var err error
		switch kind {
		case "tcp":
			err = tryTCP(addr)
		case "dns":
			err = tryDNS(addr)
		default:
			err = fmt.Errorf("unknown kind %q", kind)
		}
		if err != nil {
			fmt.Printf("PROBE %s BLOCKED %v\n", name, err)
		} else {
			fmt.Printf("PROBE %s OK\n", name)
		}
	}
}

func tryTCP(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 4*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// tryDNS asks addr for kubernetes.default.svc.cluster.local's A record; any answer to the
// query's id is a reach.
func tryDNS(addr string) error {
	c, err := net.DialTimeout("udp", addr, 4*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	q := []byte{0x4a, 0x17, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	for _, l := range strings.Split("kubernetes.default.svc.cluster.local", ".") {
		q = append(append(q, byte(len(l))), l...)
	}
	q = append(q, 0, 0, 1, 0, 1)
	c.SetDeadline(time.Now().Add(4 * time.Second))
	if _, err := c.Write(q); err != nil {
		return err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n < 2 || buf[0] != 0x4a || buf[1] != 0x17 {
		return fmt.Errorf("an answer to another query")
	}
	return nil
}

func serve(addrs []string) {
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				fmt.Printf("ACCEPT %s from %s\n", c.LocalAddr(), c.RemoteAddr())
				io.WriteString(c, "hello\n")
				c.Close()
			}
		}()
	}
	fmt.Println("SERVING", strings.Join(addrs, " "))
	select {}
}
`

// netprobeImage builds the probe and imports its image into the real node's containerd: the
// image's digest-pinned reference, and the binary's path on the host (for a listener outside
// the cluster).
func netprobeImage(t *testing.T, c *k8stest.Cluster) (ref, hostBin string) {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "netprobe.go")
	if err := os.WriteFile(src, []byte(netprobeSource), 0o600); err != nil {
		t.Fatal(err)
	}
	hostBin = filepath.Join(dir, "netprobe")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", hostBin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GO111MODULE=off", "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(hostBin)
	if err != nil {
		t.Fatal(err)
	}
	tarball, _, err := k8stest.OCIImage("k8stest.invalid/netprobe:1", []string{workerBin},
		k8stest.ImageFile{Path: workerBin, Mode: 0o755, Data: bin})
	if err != nil {
		t.Fatal(err)
	}
	refs, err := c.ImportImage(t.Context(), tarball)
	if err != nil || len(refs) != 1 {
		t.Fatalf("import the probe's image: %v %v", refs, err)
	}
	return refs[0], hostBin
}

// realNodeNetpolCluster is the shared real node with its NetworkPolicy engine and the
// in-cluster apiserver (a pod reaches it at the kubernetes Service, as in a cluster).
func realNodeNetpolCluster(t *testing.T) *k8stest.Cluster {
	t.Helper()
	c := k8stest.Shared(t, k8stest.Options{RealNode: true, InClusterAPI: true, NetworkPolicy: true})
	if !c.NetworkPolicies {
		t.Fatal("the cluster was started with Options.NetworkPolicy but runs no engine")
	}
	return c
}

// hostListener accepts on addr until the test ends and records the remote address of every
// connection; to a connection that says "gate", answer (when set) says what to write back
// (the gateway's "go"). A probe's connection says nothing and gets nothing.
type hostListener struct {
	l    net.Listener
	mu   sync.Mutex
	from []string
}

func listenHost(t *testing.T, addr string, answer func(remote string) string) *hostListener {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostListener{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			ip, _, _ := net.SplitHostPort(conn.RemoteAddr().String())
			h.mu.Lock()
			h.from = append(h.from, ip)
			h.mu.Unlock()
			go func() {
				defer conn.Close()
				if answer == nil {
					return
				}
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				if line, _ := bufio.NewReader(conn).ReadString('\n'); line != "gate\n" {
					return
				}
				fmt.Fprintln(conn, answer(ip))
			}()
		}
	}()
	return h
}

func (h *hostListener) port() int { return h.l.Addr().(*net.TCPAddr).Port }

// reachedFrom reports whether ip connected.
func (h *hostListener) reachedFrom(ip string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, f := range h.from {
		if f == ip {
			return true
		}
	}
	return false
}

// gateAnswer is the gateway's answer to a dispatch pod: "go" once the NetworkPolicy engine
// polices the pod's address (its table's set holds it), so what the pod tries next is judged
// by its policies, not by how fast the engine learnt of the pod. Anything else (the engine
// never policed it in a minute, the test ended) makes the probe exit 3, which fails the test
// with the pod's log.
func gateAnswer(t *testing.T, c *k8stest.Cluster) func(string) string {
	testCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	return func(ip string) string {
		ctx, cancel := context.WithTimeout(testCtx, 60*time.Second)
		defer cancel()
		if err := agoratest.Await(time.Minute, func() error {
			if ok, err := c.NetpolPolices(ctx, ip); !ok {
				return fmt.Errorf("not policed: %v", err)
			}
			return nil
		}); err != nil {
			return "never " + err.Error()
		}
		return "go"
	}
}

// outsideListener runs the probe's listener in a network namespace of its own, joined to the
// node by a veth pair: an address beyond the cluster (198.51.100.1, TEST-NET-2) that the node
// routes to, as it would the internet or a cloud's metadata service.
func outsideListener(t *testing.T, hostBin string) string {
	t.Helper()
	ns := fmt.Sprintf("agora-out-%d", os.Getpid())
	run := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
	_ = exec.Command("ip", "link", "del", "agora-out0").Run()
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", "agora-out0", "type", "veth", "peer", "name", "agora-out1", "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", "agora-out0").Run() })
	run("addr", "add", "198.51.100.254/24", "dev", "agora-out0")
	run("link", "set", "agora-out0", "up")
	run("-n", ns, "addr", "add", "198.51.100.1/24", "dev", "agora-out1")
	run("-n", ns, "link", "set", "agora-out1", "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("-n", ns, "route", "add", "default", "via", "198.51.100.254")
	cmd := exec.Command("ip", "netns", "exec", ns, hostBin, "serve", "198.51.100.1:80")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "SERVING") {
		t.Fatalf("the outside listener: %q", line)
	}
	go func() { _, _ = bufio.NewReader(out).WriteTo(discard{}) }()
	return "198.51.100.1:80"
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// probePod is a hardened pod (Pod Security "restricted") running the probe image with args
// and env, labelled labels, in ns.
func probePod(name, ns, image string, labels map[string]string, args []string, env map[string]string) *corev1.Pod {
	var vars []corev1.EnvVar
	for k, v := range env {
		vars = append(vars, corev1.EnvVar{Name: k, Value: v})
	}
	no, yes := false, true
	uid := int64(65534)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &no,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &uid, RunAsGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{workerBin}, Args: args, Env: vars,
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
		},
	}
}

// runPod creates pod and waits for it to run (a listener: its IP) or to end (a prober: its
// log), whichever wait says.
func runPod(t *testing.T, p *Provider, pod *corev1.Pod, untilEnd bool) (ip, log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if _, err := p.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = p.client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	for {
		got, err := p.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil {
			switch {
			case !untilEnd && got.Status.Phase == corev1.PodRunning && got.Status.PodIP != "":
				return got.Status.PodIP, ""
			case got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed:
				if !untilEnd {
					t.Fatalf("pod %s/%s ended %s:\n%s", pod.Namespace, pod.Name, got.Status.Phase, podLog(t, p, pod.Namespace, pod.Name, ""))
				}
				return got.Status.PodIP, podLog(t, p, pod.Namespace, pod.Name, "")
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s/%s: %v (last: %v)", pod.Namespace, pod.Name, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// podLogWait bounds reading a pod's log: the read goes through the apiserver to the kubelet,
// and on a loaded machine the apiserver can end it at its request deadline.
const podLogWait = 3 * time.Minute

// podLog is the log of container (the pod's only one when "") of pod ns/name. A read that
// failed is made again until podLogWait; a log that could not be read fails the test, since
// the checks on it (no listener recorded the dispatch's pod) would pass on a log nobody read.
func podLog(t *testing.T, p *Provider, ns, name, container string) string {
	t.Helper()
	var b []byte
	err := agoratest.Await(podLogWait, func() error {
		var err error
		b, err = p.client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
		return err
	})
	if err != nil {
		t.Fatalf("read the log of pod %s/%s: %v", ns, name, err)
	}
	return string(b)
}

// probeResults reads a prober's "PROBE name OK|BLOCKED reason" lines.
func probeResults(log string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(log, "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) >= 3 && f[0] == "PROBE" {
			out[f[1]] = strings.Join(f[2:], " ")
		}
	}
	return out
}

// netprobeTargets is NETPROBE's value for targets, name=kind:addr.
func netprobeTargets(targets [][2]string) string {
	var b strings.Builder
	for _, t := range targets {
		fmt.Fprintf(&b, "%s=%s ", t[0], t[1])
	}
	return strings.TrimSpace(b.String())
}

// createNamespace makes ns (and deletes it when the test ends).
func createNamespace(t *testing.T, c *k8stest.Cluster, ns string) {
	t.Helper()
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}
	if err := c.Do(t.Context(), http.MethodPost, "/api/v1/namespaces", obj, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Do(context.Background(), http.MethodDelete, "/api/v1/namespaces/"+ns, nil, nil) })
}

// netpolProvider is a provider on the real node whose Jobs run the probe image, with the
// gateway at gateway (https://HOST:PORT) and exp's sessions (one result mount: the probe
// fetches nothing).
func netpolProvider(t *testing.T, c *k8stest.Cluster, image, gateway string, peer *GatewayPeer) (*Provider, *fakeExporter) {
	t.Helper()
	exp := &fakeExporter{mounts: []remote.Mount{{Name: "out", Dst: "/agora/out", Writable: true, Result: true}}}
	o := testOptions(t, exp)
	o.Kubeconfig, o.Namespace = c.Kubeconfig, c.Namespace
	o.Image, o.WorkerImage, o.GatewayURL, o.GatewayPeer = image, image, gateway, peer
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p, exp
}
