package k8stest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/k8stest/nodeparse"
)

// The real node: Debian's containerd and runc, the bridge CNI plugin, and a kubelet built by
// scripts/k8s-tools.sh, all with their state in the cluster's directory. The settings are the
// ones this machine kind needs (docs: /work/shared/research/kubernetes-here.md): cgroup v1
// with cgroupfs and no QoS hierarchy, no swap or memcg-notification checks, and a node IP that
// is not loopback, because the kubelet refuses one.
const (
	// RealNodeName is the node the kubelet registers.
	RealNodeName = "k8stest-node"
	// RealNodeIP is added to lo (a /32) when absent: the node's InternalIP, where the
	// apiserver reaches the kubelet for logs.
	RealNodeIP = "10.250.0.1"
	// RealNodePodSubnet is the bridge network pods get addresses from.
	RealNodePodSubnet = "10.251.0.0/24"
	podSubnet         = RealNodePodSubnet
	bridgeName        = "k8stest0"
	cniBinDir         = "/usr/lib/cni"
	// pauseImage is the sandbox image, made by OCIImage and imported at start: there is no
	// registry to pull registry.k8s.io/pause from.
	pauseImage = "k8stest.invalid/pause:1"
)

// realNodeReady reports the first part a real node needs that is missing, as a skip.
// AGORA_K8S_REAL_NODE (smoke.go) says which tests get one when the parts are there.
func realNodeReady(t testing.TB) error {
	if err := realNodeWanted(t); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return &skipError{"Options.RealNode needs root (the kubelet and containerd run as root)"}
	}
	var missing []string
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "ip", "iptables"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if !fileExists(filepath.Join(cniBinDir, plugin)) {
			missing = append(missing, filepath.Join(cniBinDir, plugin))
		}
	}
	if _, err := exec.LookPath("go"); err != nil {
		missing = append(missing, "go (builds the pause program)")
	}
	if len(missing) > 0 {
		return &skipError{"Options.RealNode needs " + strings.Join(missing, ", ") +
			": apt-get install containerd runc containernetworking-plugins iproute2 iptables"}
	}
	return nil
}

// realNodeProcs starts containerd (appended to c.procs, so Stop ends it), imports the pause
// image, and returns the kubelet for startOnce to start.
func (c *Cluster) realNodeProcs(dir string, bins *binaries, p *pki) ([]*proc, error) {
	if err := ensureNodeIP(); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	kubeletPort := ports[0]
	sock := filepath.Join(dir, "containerd.sock")
	// Set before anything can fail, so Stop drains and releases (and unlocks) the node.
	c.containerdSock = sock
	if err := lockRealNode(c); err != nil {
		return nil, err
	}
	if c.opts.InClusterAPI {
		if err := addInClusterAPI(c.Server); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.stopServices = cancel
		if err := c.startServices(ctx); err != nil {
			return nil, err
		}
	}

	netd := filepath.Join(dir, "cni", "net.d")
	if err := os.MkdirAll(netd, 0o700); err != nil {
		return nil, fmt.Errorf("make the CNI config directory: %w", err)
	}
	cni, _ := json.Marshal(map[string]any{
		"cniVersion": "0.4.0", "name": "k8stest", "type": "bridge", "bridge": bridgeName,
		"isGateway": true, "ipMasq": false, "hairpinMode": true,
		"ipam": map[string]any{
			"type": "host-local", "dataDir": filepath.Join(dir, "cni", "ipam"),
			"ranges": [][]map[string]string{{{"subnet": podSubnet}}},
			"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
		},
	})
	if err := os.WriteFile(filepath.Join(netd, "10-k8stest.conf"), cni, 0o600); err != nil {
		return nil, fmt.Errorf("write the CNI config: %w", err)
	}
	// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so lowering a score fails.
	// disable_apparmor: no AppArmor on this machine kind.
	// registry config_path: the hosts directory StartRegistry trusts its registry's CA in
	// (read at each pull, so a registry may start after containerd).
	// gVisor, when scripts/gvisor-tools.sh built it: one more runtime, runc stays the default.
	var gvisorCfg string
	var ctrdEnv []string
	if bins.gvisorBin != "" {
		if gvisorCfg, err = gvisorRuntime(dir, bins.gvisorBin); err != nil {
			return nil, err
		}
		if ctrdEnv, err = gvisorEnv(dir, bins.gvisorBin); err != nil {
			return nil, err
		}
		c.GVisor = true
	}
	toml := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
%s  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, filepath.Join(dir, "containerd", "root"), filepath.Join(dir, "containerd", "state"),
		sock, sock+".ttrpc", pauseImage, gvisorCfg, cniBinDir, netd, c.certsDir())
	cfg := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(toml), 0o600); err != nil {
		return nil, fmt.Errorf("write the containerd config: %w", err)
	}
	ctrd := newProc(dir, "containerd", []string{"containerd", "--config=" + cfg, "--log-level=warn"}, ctrdEnv...)
	if err := ctrd.start(); err != nil {
		return nil, err
	}
	c.procs = append(c.procs, ctrd)
	if err := waitFor(30*time.Second, 50*time.Millisecond, "containerd", c.checkAlive, func() (bool, error) {
		_, err := c.ctr(context.Background(), nil, "version")
		return err == nil, err
	}); err != nil {
		return nil, err
	}
	pause, err := buildPause(dir)
	if err != nil {
		return nil, err
	}
	tarball, _, err := OCIImage(pauseImage, []string{"/pause"}, ImageFile{Path: "/pause", Mode: 0o755, Data: pause})
	if err != nil {
		return nil, err
	}
	if _, err := c.ImportImage(context.Background(), tarball); err != nil {
		return nil, fmt.Errorf("import the pause image: %w", err)
	}

	nodeClient, err := p.client("kubelet-client", "system:node:"+RealNodeName, "system:nodes")
	if err != nil {
		return nil, err
	}
	serving, err := p.serving("kubelet", []net.IP{net.ParseIP(RealNodeIP)}, RealNodeName)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := writeKubeconfig(dir, "kubelet", c.Server, p.caPEM, nodeClient, "")
	if err != nil {
		return nil, err
	}
	kcfg, _ := json.Marshal(map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"address": RealNodeIP, "port": kubeletPort, "readOnlyPort": 0, "healthzPort": 0,
		"tlsCertFile": serving.certFile, "tlsPrivateKeyFile": serving.keyFile,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": p.caFile()},
		},
		"authorization":                 map[string]any{"mode": "Webhook"},
		"containerRuntimeEndpoint":      "unix://" + sock,
		"cgroupDriver":                  "cgroupfs",
		"failCgroupV1":                  false,
		"cgroupsPerQOS":                 false,
		"enforceNodeAllocatable":        []string{},
		"failSwapOn":                    false,
		"localStorageCapacityIsolation": false,
		"kernelMemcgNotification":       false,
		"resolvConf":                    "",
		// A pod with hostname and subdomain gets HOST.SUBDOMAIN.NAMESPACE.svc.cluster.local in
		// its /etc/hosts, the name a headless Service gives it in a cluster's DNS: agora's
		// manifests advertise their gateway by it (no DNS server runs here).
		"clusterDomain": "cluster.local",
		// With InClusterAPI, the DNS stand-in (services.go) on the node IP: pods resolve
		// Services' names to their ClusterIPs.
		"clusterDNS":                     clusterDNS(c.opts.InClusterAPI),
		"registerNode":                   true,
		"serializeImagePulls":            false,
		"evictionHard":                   map[string]string{"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		"imageGCHighThresholdPercent":    100,
		"imageGCLowThresholdPercent":     99,
		"nodeStatusReportFrequency":      "10s",
		"syncFrequency":                  "10s",
		"fileCheckFrequency":             "20s",
		"volumePluginDir":                filepath.Join(dir, "kubelet-plugins"),
		"staticPodPath":                  "",
		"shutdownGracePeriod":            "0s",
		"protectKernelDefaults":          false,
		"makeIPTablesUtilChains":         false,
		"containerLogMaxSize":            "10Mi",
		"podPidsLimit":                   1024,
		"maxPods":                        110,
		"streamingConnectionIdleTimeout": "5m",
	})
	kcfgFile := filepath.Join(dir, "kubelet.json")
	if err := os.WriteFile(kcfgFile, kcfg, 0o600); err != nil {
		return nil, fmt.Errorf("write the kubelet config: %w", err)
	}
	kubelet := newProc(dir, "kubelet", []string{bins.kubelet,
		"--config=" + kcfgFile, "--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(dir, "kubelet"), "--cert-dir=" + filepath.Join(dir, "kubelet-pki"),
		"--hostname-override=" + RealNodeName, "--node-ip=" + RealNodeIP,
	})
	procs := []*proc{kubelet}
	if bins.netpol != "" {
		if c.netpol, err = c.netpolProc(dir, bins.netpol, p); err != nil {
			return nil, err
		}
		c.NetworkPolicies = true
		procs = append(procs, c.netpol)
	}
	return procs, nil
}

// ensureNodeIP adds RealNodeIP/32 to lo when no interface has it (there is no dummy interface
// module here to give it a device of its own).
func ensureNodeIP() error {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == RealNodeIP {
			return nil
		}
	}
	if out, err := exec.Command("ip", "addr", "add", RealNodeIP+"/32", "dev", "lo").CombinedOutput(); err != nil &&
		!bytes.Contains(out, []byte("File exists")) {
		return fmt.Errorf("ip addr add %s/32 dev lo: %w: %s", RealNodeIP, err, out)
	}
	return nil
}

// pauseSource is the sandbox's one process: it sleeps until told to stop. Being pid 1, it
// gets no default signal handling, hence the explicit handler.
const pauseSource = `package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
`

func buildPause(dir string) ([]byte, error) {
	src := filepath.Join(dir, "pause.go")
	if err := os.WriteFile(src, []byte(pauseSource), 0o600); err != nil {
		return nil, fmt.Errorf("write pause.go: %w", err)
	}
	out := filepath.Join(dir, "pause")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GO111MODULE=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the pause program: %w: %s", err, b)
	}
	return os.ReadFile(out)
}

// ctr runs Debian's ctr against the node's containerd in the namespace the kubelet uses.
func (c *Cluster) ctr(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	if c.containerdSock == "" {
		return nil, fmt.Errorf("ctr %s: the cluster has no real node", strings.Join(args, " "))
	}
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.containerdSock, "--namespace", "k8s.io"}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// Ctr runs ctr against the real node's containerd in the kubelet's namespace (k8s.io), for a
// test that looks at what really runs: `tasks ls`, `containers info ID`.
func (c *Cluster) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	return c.ctr(ctx, nil, args...)
}

// ImportImage imports an image tar (OCI layout, or docker-archive as `podman save` writes it)
// into the real node's containerd, where pods with imagePullPolicy Never find it, and returns
// each imported image's digest-pinned reference, REPOSITORY@sha256:<manifest digest>, the
// form agora's targets require.
//
// ctr names an imported image only by its tag, and the kubelet asks the CRI for the pod's
// reference exactly: a pod pinned by digest gets ErrImageNeverPull although the content is
// there. So each image is also named REPOSITORY@DIGEST, with the digest containerd holds:
// for a docker-archive that is the manifest containerd wrote on import, not podman's own
// digest (`podman image inspect .Digest`), so a pod must use the reference returned here.
func (c *Cluster) ImportImage(ctx context.Context, tarball []byte) ([]string, error) {
	out, err := c.ctr(ctx, tarball, "images", "import", "-")
	if err != nil {
		return nil, err
	}
	imported := nodeparse.ImportedImages(out)
	if len(imported) == 0 {
		return nil, fmt.Errorf("ctr images import named no image: %s", bytes.TrimSpace(out))
	}
	var pinned []string
	for _, im := range imported {
		ref := im.Repo + "@" + im.Digest
		// A second import of the same image finds the name taken: that is the same content.
		if out, err := c.ctr(ctx, nil, "images", "tag", im.Name, ref); err != nil && !bytes.Contains(out, []byte("already exists")) {
			return nil, err
		}
		pinned = append(pinned, ref)
	}
	return pinned, nil
}

// drainRealNode ends every pod through the kubelet before the node goes away, so no container,
// network namespace or mount outlives the cluster: the controllers that would recreate pods
// are already dead. Best effort, bounded; Stop then kills whatever is left through ctr.
func (c *Cluster) drainRealNode() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods struct {
		Items []struct {
			Metadata struct{ Name, Namespace string }
		}
	}
	if done, _ := c.apiserver.exited(); done {
		// No apiserver, no kubelet sync: straight to ctr.
	} else if err := c.Do(ctx, http.MethodGet, "/api/v1/pods", nil, &pods); err == nil {
		for _, p := range pods.Items {
			// A grace period above zero keeps the object until the kubelet confirms the
			// containers are gone; zero would delete it at once and wait for nothing.
			_ = c.Do(ctx, http.MethodDelete, "/api/v1/namespaces/"+p.Metadata.Namespace+"/pods/"+p.Metadata.Name,
				map[string]any{"gracePeriodSeconds": 1}, nil)
		}
		_ = waitFor(25*time.Second, 100*time.Millisecond, "pods gone", nil, func() (bool, error) {
			err := c.Do(ctx, http.MethodGet, "/api/v1/pods", nil, &pods)
			return err == nil && len(pods.Items) == 0, err
		})
	}
	// Whatever the kubelet left: kill and delete each task, which ends its shim.
	if out, err := c.ctr(ctx, nil, "tasks", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = c.ctr(ctx, nil, "tasks", "kill", "-a", "-s", "SIGKILL", id)
		}
		for _, id := range strings.Fields(string(out)) {
			_, _ = c.ctr(ctx, nil, "tasks", "delete", "-f", id)
		}
	}
}

// releaseRealNode undoes what outlives containerd: mounts under the cluster directory (image
// snapshots, pod volumes) and the bridge.
func (c *Cluster) releaseRealNode() {
	unmountUnder(c.Dir)
	_ = exec.Command("ip", "link", "del", bridgeName).Run()
	if c.stopServices != nil {
		c.stopServices()
	}
	if _, held := realNodeLocks.Load(c); held { // the rules are the lock holder's
		removeInClusterAPI()
		removeServiceRules()
		if c.netpol != nil {
			removeNetpolTable() // a killed engine leaves it; the next node's pods must not meet it
		}
	}
	unlockRealNode(c)
}

// clusterDNS is the kubelet's clusterDNS: the stand-in's address with InClusterAPI, else none
// (pods then resolve nothing: no DNS server runs).
func clusterDNS(inCluster bool) []string {
	if inCluster {
		return []string{RealNodeIP}
	}
	return []string{}
}
