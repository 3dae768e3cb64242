package k8stest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/k8stest/nodeparse"
)

// NetworkPolicy enforcement on the real node: kubernetes-sigs/kube-network-policies,
// built by scripts/netpol-tools.sh into .cache/netpol/bin, runs on the node beside the kubelet
// whenever it is built. Its nftables table (inet kube-network-policies) sends the first packet
// of every connection from or to a pod that a NetworkPolicy selects to nfqueue NetpolQueue,
// where the engine accepts or drops it by the policies, as the API defines them. Later packets
// of an accepted connection pass (conntrack); so do packets of pods no policy selects.
//
// What it covers on this node, as built (the patch in scripts/netpol-tools says why):
//   - pod to pod (the bridge's traffic, which br_netfilter hands to the IPv4 hooks), pod to an
//     address beyond the node (forwarded), and pod to the node itself (its IP, the bridge's
//     address, the DNAT of the stand-in kube-proxy, services.go): the INPUT hook;
//   - DNS queries of a selected pod (the engine's PREROUTING chain).
//
// What it does not: connections the node's root processes open to pods (upstream accepts
// them, so the kubelet's probes work), and the moment between a pod's start and the engine
// learning its address from the apiserver (its address is not yet in the table's set, so its
// packets pass unevaluated: upstream closes that with NRI, which Debian's containerd 1.6 does
// not speak).
//
// Killed, the engine leaves its table: a selected pod's new connections wait in a queue
// nobody reads and are dropped (fail closed); established ones go on.
const (
	// NetpolQueue is the nfqueue the engine reads.
	NetpolQueue = 100
	// NetpolTable is the engine's nftables table (family inet).
	NetpolTable = "kube-network-policies"
	netpolName  = "kube-network-policies"
)

// netpolBinary is the engine's path, or why it cannot run here: not built, or no nft (which
// the harness uses to see the engine's table in place and to remove a killed engine's).
func netpolBinary() (path, missing string) {
	root, err := moduleRoot()
	if err != nil {
		return "", "find kube-network-policies: " + err.Error()
	}
	path = filepath.Join(root, ".cache", "netpol", "bin", netpolName)
	if fi, err := os.Stat(path); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Sprintf("no %s in %s: run scripts/netpol-tools.sh (make netpol-tools)", netpolName, filepath.Dir(path))
	}
	if _, err := exec.LookPath("nft"); err != nil {
		return "", "no nft (the real node's NetworkPolicy engine is checked with it): apt-get install nftables"
	}
	return path, ""
}

// netpolProc is the engine, with a kubeconfig of its own. It acts as admin, as kwok does: it
// only reads pods, namespaces and policies and writes events, and this cluster has one node.
func (c *Cluster) netpolProc(dir, bin string, p *pki) (*proc, error) {
	id, err := p.client(netpolName, netpolName, "system:masters")
	if err != nil {
		return nil, err
	}
	kubeconfig, err := writeKubeconfig(dir, netpolName, c.Server, p.caPEM, id, "")
	if err != nil {
		return nil, err
	}
	// A table left by a killed run would police this node's pods with another cluster's
	// policies until the engine replaces it; the engine replaces it at start anyway.
	removeNetpolTable()
	argv := []string{bin,
		"-kubeconfig=" + kubeconfig, "-hostname-override=" + RealNodeName,
		fmt.Sprintf("-nfqueue-id=%d", NetpolQueue), "-nftables-table=" + NetpolTable,
	}
	// AGORA_K8S_NETPOL_V=2 logs the engine's every verdict and why (its log: c.Log).
	if v := os.Getenv("AGORA_K8S_NETPOL_V"); v != "" {
		argv = append(argv, "-v="+v)
	}
	return newProc(dir, netpolName, argv, noWatchList), nil
}

// waitNetpol waits until the engine has installed its table and reads its queue: from then on
// a pod a policy selects is policed.
func (c *Cluster) waitNetpol(timeout time.Duration) error {
	err := waitFor(timeout, 100*time.Millisecond, "the NetworkPolicy engine's table and queue", c.checkAlive, func() (bool, error) {
		if err := exec.Command("nft", "list", "chain", "inet", NetpolTable, "postrouting").Run(); err != nil {
			return false, fmt.Errorf("no chain postrouting in table inet %s: %w", NetpolTable, err)
		}
		bound, err := queueBound(NetpolQueue)
		if err != nil || !bound {
			return false, errors.Join(err, fmt.Errorf("nothing reads nfqueue %d", NetpolQueue))
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w; kube-network-policies' log ends:\n%s", err, c.Log(netpolName))
	}
	return nil
}

// queueBound reports whether a process reads nfqueue n (a line of
// /proc/net/netfilter/nfnetlink_queue: queue number, peer port id, ...).
func queueBound(n int) (bool, error) {
	b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return false, fmt.Errorf("read nfnetlink_queue: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == fmt.Sprint(n) {
			return true, nil
		}
	}
	return false, nil
}

// NetpolRules is the engine's table as nft prints it, for a test that shows what is enforced.
// nft cannot print the xtables NFQUEUE target the patched engine uses in an inet table: a
// rule that queues shows as its match alone.
func (c *Cluster) NetpolRules(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "nft", "list", "table", "inet", NetpolTable).Output()
	if err != nil {
		return "", fmt.Errorf("nft list table inet %s: %w", NetpolTable, err)
	}
	return string(out), nil
}

// KillNetworkPolicyEngine kills the engine (SIGKILL): its table stays, with nobody reading
// its queue. RestartNetworkPolicyEngine brings it back.
func (c *Cluster) KillNetworkPolicyEngine() error {
	p := c.netpol
	if p == nil {
		return errors.New("the cluster runs no NetworkPolicy engine")
	}
	p.kill()
	return nil
}

// RestartNetworkPolicyEngine starts the killed engine again and waits until it polices.
func (c *Cluster) RestartNetworkPolicyEngine() error {
	p := c.netpol
	if p == nil {
		return errors.New("the cluster runs no NetworkPolicy engine")
	}
	if done, _ := p.exited(); !done {
		return errors.New("kube-network-policies is still running: call KillNetworkPolicyEngine first")
	}
	if err := p.start(); err != nil {
		return err
	}
	return c.waitNetpol(clusterReady)
}

// removeNetpolTable deletes the engine's table, a killed engine's too.
func removeNetpolTable() {
	_ = exec.Command("nft", "delete", "table", "inet", NetpolTable).Run()
}

// NetpolPolices reports whether the engine polices ip now: its table's set of the node's pods
// that a policy selects holds it, so the first packet of ip's every connection is judged.
func (c *Cluster) NetpolPolices(ctx context.Context, ip string) (bool, error) {
	out, err := exec.CommandContext(ctx, "nft", "list", "set", "inet", NetpolTable, "podips-v4").Output()
	if err != nil {
		return false, fmt.Errorf("nft list set inet %s podips-v4: %w", NetpolTable, err)
	}
	return nodeparse.SetHolds(string(out), ip), nil
}
