package kubernetes

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/k8stest"
)

// The NetworkPolicy attack tests: agora's own Start makes a dispatch's NetworkPolicy,
// Secret and Job on the real kubelet, with kube-network-policies enforcing the cluster's
// policies on the node (k8stest's netpol.go), and the Job's pod, where the agent's code would
// run, tries to reach everything it must not. A pod no policy selects tries the same targets
// first: each is reachable, so what the dispatch's pod cannot reach, its policy keeps it from.

// egressTargets are what a dispatch's pod tries: the gateway, which its policy admits, and
// what it must not reach.
type egressTargets struct {
	gateway, nodeOther, bridgeOther, pod, apiService, apiDirect, outside, dns string
}

func (e egressTargets) list() [][2]string {
	return [][2]string{
		{"gateway", "tcp:" + e.gateway},
		{"node-other-port", "tcp:" + e.nodeOther},
		{"bridge-other-port", "tcp:" + e.bridgeOther},
		{"other-pod", "tcp:" + e.pod},
		{"apiserver-service", "tcp:" + e.apiService},
		{"apiserver", "tcp:" + e.apiDirect},
		{"outside-cluster", "tcp:" + e.outside},
		{"node-dns", "dns:" + e.dns},
	}
}

// TestRealNodeNetpol_DispatchReachesOnlyTheGateway: the pod of a dispatch agora started
// reaches its gateway and nothing else: not the node on another port (its IP or the bridge's),
// not another pod, not the apiserver (through the kubernetes Service or directly), not an
// address beyond the node, not the node's DNS. The host's listeners record who connected, so
// a connection is seen where it lands, not only reported by the pod.
func TestRealNodeNetpol_DispatchReachesOnlyTheGateway(t *testing.T) {
	c := realNodeNetpolCluster(t)
	image, hostBin := netprobeImage(t, c)

	gw := listenHost(t, net.JoinHostPort(k8stest.RealNodeIP, "0"), gateAnswer(t, c))
	other := listenHost(t, ":0", nil) // the node's every address: its IP and the bridge's
	p, exp := netpolProvider(t, c, image, fmt.Sprintf("https://%s:%d", k8stest.RealNodeIP, gw.port()), nil)
	nodeSchedulableReal(t, p)

	// Another pod, no policy selects it: it accepts from anyone.
	victimIP, _ := runPod(t, p, probePod("netpol-victim", c.Namespace, image, map[string]string{"app": "victim"},
		[]string{"serve", ":8080"}, nil), false)
	api, err := url.Parse(c.Server)
	if err != nil {
		t.Fatal(err)
	}
	tg := egressTargets{
		gateway:     net.JoinHostPort(k8stest.RealNodeIP, fmt.Sprint(gw.port())),
		nodeOther:   net.JoinHostPort(k8stest.RealNodeIP, fmt.Sprint(other.port())),
		bridgeOther: net.JoinHostPort(bridgeIP(k8stest.RealNodePodSubnet), fmt.Sprint(other.port())),
		pod:         net.JoinHostPort(victimIP, "8080"),
		apiService:  "10.0.0.1:443",
		apiDirect:   api.Host,
		outside:     outsideListener(t, hostBin),
		dns:         net.JoinHostPort(k8stest.RealNodeIP, "53"),
	}

	// The control: a pod no policy selects reaches every target.
	controlIP, controlLog := runPod(t, p, probePod("netpol-control", c.Namespace, image, nil,
		[]string{"worker"}, map[string]string{"NETPROBE": netprobeTargets(tg.list())}), true)
	t.Logf("the control pod (%s), no policy:\n%s", controlIP, controlLog)
	res := probeResults(controlLog)
	for _, target := range tg.list() {
		if res[target[0]] != "OK" {
			t.Errorf("without a policy the control pod did not reach %s (%s): %q; the test's network is broken", target[0], target[1], res[target[0]])
		}
	}
	if !other.reachedFrom(controlIP) {
		t.Errorf("the node's other port recorded no connection from the control pod %s", controlIP)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The attack: agora's dispatch, its pod trying every target from where the agent runs.
	id := clusterID("NETPOL")
	spec := testSpec(id)
	spec.Env = append(spec.Env, "NETPROBE="+netprobeTargets(tg.list()), "NETPROBE_GATE="+tg.gateway)
	h, err := p.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	exit := waitTimeout(t, h, 4*time.Minute)
	pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of the dispatch: %d, %v", len(pods.Items), err)
	}
	podIP := pods.Items[0].Status.PodIP
	log := podLog(t, p, p.ns, pods.Items[0].Name, workerContainer)
	t.Logf("the dispatch's pod (%s), exit %+v:\n%s", podIP, exit, log)
	if exit.Code != 0 {
		q, _ := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
		t.Fatalf("the dispatch's probe exited %+v\nnfnetlink_queue: %s\nthe engine's log ends:\n%s", exit, q, c.Log("kube-network-policies"))
	}
	res = probeResults(log)
	if res["gateway"] != "OK" || !gw.reachedFrom(podIP) {
		t.Errorf("the dispatch's pod did not reach its gateway: %q (the gateway saw it: %v)", res["gateway"], gw.reachedFrom(podIP))
	}
	for _, target := range tg.list()[1:] {
		got := res[target[0]]
		if !strings.HasPrefix(got, "BLOCKED") {
			t.Errorf("ATTACK: the dispatch's pod reached %s (%s): %q", target[0], target[1], got)
		} else if !strings.Contains(got, "timeout") {
			// A drop shows as a timeout; a refusal would mean the packet got through.
			t.Errorf("the dispatch's pod was refused at %s, not dropped: %q", target[0], got)
		}
	}
	if other.reachedFrom(podIP) {
		t.Errorf("ATTACK: the node's other port recorded a connection from the dispatch's pod %s", podIP)
	}
	if n := exp.openSessions(); n != 0 {
		t.Errorf("%d gateway sessions open after the dispatch", n)
	}
}

// bridgeIP is the first address of the pod subnet: the bridge's, the pods' default gateway.
func bridgeIP(subnet string) string {
	_, n, err := net.ParseCIDR(subnet)
	if err != nil {
		panic(err)
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
}

// nodeSchedulableReal waits until the real node has lost the not-ready taint.
func nodeSchedulableReal(t testing.TB, p *Provider) {
	t.Helper()
	agoratest.Eventually(t, 2*time.Minute, "node "+k8stest.RealNodeName+" untainted", func() error {
		n, err := p.client.CoreV1().Nodes().Get(t.Context(), k8stest.RealNodeName, metav1.GetOptions{})
		if err == nil && len(n.Spec.Taints) > 0 {
			err = fmt.Errorf("taints %v", n.Spec.Taints)
		}
		return err
	})
}

// TestRealNodeNetpol_ServePolicyAndGatewayPeer: deploy/kubernetes's policies as written
// (agents' default-deny, agora-serve on serve's pods) and agora's dispatch policy with the
// manifests' gateway_peer ({namespace: agora, pods: {app: agora}}), enforced. A dispatch's pod
// reaches serve's gateway port, directly and through the gateway's ClusterIP Service, and
// nothing else of serve's nor any pod that merely claims to be serve (agora's namespace
// without the label, the label in another namespace); a pod of another namespace carrying a
// dispatch's labels, a pod of agora's namespace, and a pod of agents without agora's labels
// cannot reach serve's gateway port. Serve's and the impostors' listeners record who
// connected. Each source that is refused reaches an impostor, so its network works.
//
// The dispatch's gateway URL is the host's listener (its "go" once the engine polices the pod:
// gateAnswer), on port 8443, the port agora-serve admits: the policy's ipBlock admits that
// address, so serve's pods are reached through gateway_peer's rule alone.
func TestRealNodeNetpol_ServePolicyAndGatewayPeer(t *testing.T) {
	c := realNodeNetpolCluster(t)
	if c.Namespace != "agents" {
		t.Fatalf("the cluster's namespace is %q; the manifests' policies name agents", c.Namespace)
	}
	image, _ := netprobeImage(t, c)
	gw := listenHost(t, net.JoinHostPort(k8stest.RealNodeIP, "8443"), gateAnswer(t, c))
	p, _ := netpolProvider(t, c, image, "https://"+k8stest.RealNodeIP+":8443",
		&GatewayPeer{Namespace: "agora", Pods: map[string]string{"app": "agora"}})
	nodeSchedulableReal(t, p)

	createNamespace(t, c, "agora")
	createNamespace(t, c, "netpol-other")
	for _, f := range []string{"namespaces.yaml", "deployment.yaml"} {
		for _, np := range manifestPolicies(t, f) {
			if err := c.Apply(t.Context(), np); err != nil {
				t.Fatal(err)
			}
			md := np["metadata"].(map[string]any)
			t.Cleanup(func() {
				_ = c.Do(t.Context(), http.MethodDelete, fmt.Sprintf("/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies/%s", md["namespace"], md["name"]), nil, nil)
			})
		}
	}
	serveIP, _ := runPod(t, p, probePod("serve", "agora", image, map[string]string{"app": "agora"},
		[]string{"serve", ":8443", ":9090"}, nil), false)
	impAgoraIP, _ := runPod(t, p, probePod("impostor", "agora", image, map[string]string{"app": "impostor"},
		[]string{"serve", ":8443"}, nil), false)
	impOtherIP, _ := runPod(t, p, probePod("impostor", "netpol-other", image, map[string]string{"app": "agora"},
		[]string{"serve", ":8443"}, nil), false)
	svc := gatewayService(t, c)
	waitPoliced(t, c, serveIP, "serve's pod, which agora-serve selects")

	serveGW := net.JoinHostPort(serveIP, "8443")
	sources := []struct {
		name, ns string
		labels   map[string]string
		control  string // an impostor it must reach: its network works
	}{
		{"other-ns-dispatch-labels", "netpol-other", labels("01ARZ3NDEKTSV4RRFFQ69G5FAV"), net.JoinHostPort(impOtherIP, "8443")},
		{"agora-ns-unlabelled", "agora", nil, net.JoinHostPort(impAgoraIP, "8443")},
		{"agents-unlabelled", "agents", map[string]string{"app": "x"}, ""},
	}
	var refused []string
	for _, s := range sources {
		targets := [][2]string{{"serve-gateway", "tcp:" + serveGW}}
		if s.control != "" {
			targets = append(targets, [2]string{"control", "tcp:" + s.control})
		}
		ip, log := runPod(t, p, probePod("src-"+s.name, s.ns, image, s.labels, []string{"worker"},
			map[string]string{"NETPROBE": netprobeTargets(targets)}), true)
		t.Logf("%s (%s):\n%s", s.name, ip, log)
		res := probeResults(log)
		if !strings.HasPrefix(res["serve-gateway"], "BLOCKED") {
			t.Errorf("ATTACK: %s reached serve's gateway port: %q", s.name, res["serve-gateway"])
		}
		if s.control != "" && res["control"] != "OK" {
			t.Errorf("%s did not reach the impostor it may reach (%s): %q; its network is broken", s.name, s.control, res["control"])
		}
		refused = append(refused, ip)
	}

	// agora's dispatch, with the manifests' gateway_peer.
	id := clusterID("PEER")
	tg := [][2]string{
		{"serve-gateway", "tcp:" + serveGW},
		{"serve-service", "tcp:" + net.JoinHostPort(svc, "8443")},
		{"serve-other-port", "tcp:" + net.JoinHostPort(serveIP, "9090")},
		{"impostor-agora-ns", "tcp:" + net.JoinHostPort(impAgoraIP, "8443")},
		{"impostor-other-ns", "tcp:" + net.JoinHostPort(impOtherIP, "8443")},
	}
	spec := testSpec(id)
	spec.Env = append(spec.Env, "NETPROBE="+netprobeTargets(tg), "NETPROBE_GATE="+net.JoinHostPort(k8stest.RealNodeIP, "8443"))
	h, err := p.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	exit := waitTimeout(t, h, 4*time.Minute)
	pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of the dispatch: %d, %v", len(pods.Items), err)
	}
	podIP := pods.Items[0].Status.PodIP
	log := podLog(t, p, p.ns, pods.Items[0].Name, workerContainer)
	t.Logf("the dispatch's pod (%s), exit %+v:\n%s", podIP, exit, log)
	if exit.Code != 0 || !gw.reachedFrom(podIP) {
		t.Fatalf("the dispatch's probe exited %+v (reached its gateway: %v)", exit, gw.reachedFrom(podIP))
	}
	res := probeResults(log)
	for name, want := range map[string]string{"serve-gateway": "OK", "serve-service": "OK",
		"serve-other-port": "BLOCKED", "impostor-agora-ns": "BLOCKED", "impostor-other-ns": "BLOCKED"} {
		if !strings.HasPrefix(res[name], want) {
			t.Errorf("the dispatch's pod at %s: %q, want %s", name, res[name], want)
		}
	}

	// What the listeners saw.
	serveLog := podLog(t, p, "agora", "serve", "")
	t.Logf("serve's listener:\n%s", serveLog)
	if !strings.Contains(serveLog, "ACCEPT "+serveGW+" from "+podIP+":") {
		t.Errorf("serve's listener recorded no direct connection from the dispatch's pod %s", podIP)
	}
	for _, ip := range refused {
		if strings.Contains(serveLog, " from "+ip+":") {
			t.Errorf("ATTACK: serve's listener recorded a connection from %s", ip)
		}
	}
	if strings.Contains(serveLog, ":9090 from") {
		t.Errorf("ATTACK: serve's other port recorded a connection")
	}
	for _, ns := range []string{"agora", "netpol-other"} {
		if l := podLog(t, p, ns, "impostor", ""); strings.Contains(l, " from "+podIP+":") {
			t.Errorf("ATTACK: the impostor in %s recorded a connection from the dispatch's pod:\n%s", ns, l)
		}
	}
}

// manifestPolicies are the NetworkPolicies of deploy/kubernetes/file, as written.
func manifestPolicies(t *testing.T, file string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "kubernetes", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if doc["kind"] == "NetworkPolicy" {
			out = append(out, doc)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s holds no NetworkPolicy", file)
	}
	return out
}

// gatewayService makes deploy/kubernetes's agora-gateway-vip (serve's pods, port 8443) and
// returns its ClusterIP, which the node's stand-in kube-proxy rewrites to serve's pod.
func gatewayService(t *testing.T, c *k8stest.Cluster) string {
	t.Helper()
	svc := map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "agora-gateway-vip", "namespace": "agora"},
		"spec": map[string]any{"type": "ClusterIP", "selector": map[string]string{"app": "agora"},
			"ports": []any{map[string]any{"name": "gateway", "port": 8443, "targetPort": 8443}}},
	}
	var got struct{ Spec struct{ ClusterIP string } }
	if err := c.Do(t.Context(), http.MethodPost, "/api/v1/namespaces/agora/services", svc, &got); err != nil {
		t.Fatal(err)
	}
	return got.Spec.ClusterIP
}

// waitPoliced waits until the engine polices ip (what says whose it is).
func waitPoliced(t *testing.T, c *k8stest.Cluster, ip, what string) {
	t.Helper()
	if err := agoratest.Await(time.Minute, func() error {
		if ok, err := c.NetpolPolices(t.Context(), ip); !ok {
			return fmt.Errorf("not policed: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatalf("the engine never policed %s, %s: %v\n%s", ip, what, err, c.Log("kube-network-policies"))
	}
}

// TestRealNodeNetpol_EngineKilled: what the NetworkPolicy engine's death does, as the docs say.
// A dispatch's pod the engine polices when it is killed (SIGKILL, mid-dispatch: the gateway
// kills it before its "go") can open no new connection at all, not even to its gateway: its
// packets wait in a queue nobody reads and are dropped (fail closed). A pod that starts while
// the engine is dead is not policed: the engine's table only knows the pods it saw, so such a
// pod's packets pass unjudged (fail open) until the engine is back. Restarted, the engine
// polices a new dispatch again.
func TestRealNodeNetpol_EngineKilled(t *testing.T) {
	c := realNodeNetpolCluster(t)
	t.Cleanup(func() {
		if err := c.RestartNetworkPolicyEngine(); err != nil && !strings.Contains(err.Error(), "still running") {
			t.Errorf("restart the engine: %v", err)
		}
	})
	image, _ := netprobeImage(t, c)
	var killed atomic.Bool // once: the first dispatch's gate kills the engine
	gate := gateAnswer(t, c)
	policedThenKill := func(ip string) string {
		if a := gate(ip); a != "go" {
			return a
		}
		if !killed.Swap(true) {
			if err := c.KillNetworkPolicyEngine(); err != nil {
				t.Error(err)
			}
		}
		return "go"
	}
	gw := listenHost(t, net.JoinHostPort(k8stest.RealNodeIP, "0"), policedThenKill)
	other := listenHost(t, ":0", nil)
	gwAddr := net.JoinHostPort(k8stest.RealNodeIP, fmt.Sprint(gw.port()))
	p, _ := netpolProvider(t, c, image, "https://"+gwAddr, nil)
	nodeSchedulableReal(t, p)
	targets := netprobeTargets([][2]string{
		{"gateway", "tcp:" + gwAddr},
		{"node-other-port", "tcp:" + net.JoinHostPort(k8stest.RealNodeIP, fmt.Sprint(other.port()))},
	})
	dispatch := func(prefix string, gated bool) (string, map[string]string) {
		t.Helper()
		id := clusterID(prefix)
		spec := testSpec(id)
		spec.Env = append(spec.Env, "NETPROBE="+targets)
		if gated {
			spec.Env = append(spec.Env, "NETPROBE_GATE="+gwAddr)
		}
		h, err := p.Start(t.Context(), spec)
		if err != nil {
			t.Fatal(err)
		}
		exit := waitTimeout(t, h, 4*time.Minute)
		pods, err := p.client.CoreV1().Pods(p.ns).List(t.Context(), metav1.ListOptions{LabelSelector: labelDispatch + "=" + id})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("pods of the dispatch: %d, %v", len(pods.Items), err)
		}
		log := podLog(t, p, p.ns, pods.Items[0].Name, workerContainer)
		t.Logf("%s (%s), exit %+v:\n%s", prefix, pods.Items[0].Status.PodIP, exit, log)
		if exit.Code != 0 {
			t.Fatalf("the probe exited %+v", exit)
		}
		return pods.Items[0].Status.PodIP, probeResults(log)
	}

	// Killed while the pod runs: fail closed.
	_, res := dispatch("KILLED", true)
	for _, name := range []string{"gateway", "node-other-port"} {
		if !strings.HasPrefix(res[name], "BLOCKED") || !strings.Contains(res[name], "timeout") {
			t.Errorf("with the engine killed, the policed pod's new connection to %s: %q, want dropped", name, res[name])
		}
	}

	// Started while the engine is dead: not policed (the documented gap).
	ip, res := dispatch("DEAD", false)
	if ok, _ := c.NetpolPolices(t.Context(), ip); ok {
		t.Errorf("the dead engine's table holds %s", ip)
	}
	if res["gateway"] != "OK" || res["node-other-port"] != "OK" || !other.reachedFrom(ip) {
		t.Errorf("a pod started while the engine was dead: %v (the node's other port saw it: %v); "+
			"docs/providers-k8s.md says it is not policed until the engine is back: update them", res, other.reachedFrom(ip))
	}

	// Back: policed again.
	if err := c.RestartNetworkPolicyEngine(); err != nil {
		t.Fatal(err)
	}
	_, res = dispatch("BACK", true)
	if res["gateway"] != "OK" || !strings.HasPrefix(res["node-other-port"], "BLOCKED") {
		t.Errorf("after the engine's restart: %v, want the gateway only", res)
	}
}
