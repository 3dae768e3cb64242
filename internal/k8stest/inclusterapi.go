package k8stest

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strings"
)

// A pod of a real node reaches the apiserver as in any cluster: the kubelet gives it
// KUBERNETES_SERVICE_HOST=10.0.0.1 and _PORT=443 (the "kubernetes" Service), which client-go's
// in-cluster configuration dials with the pod's service account token. kube-proxy is what
// makes that address answer; this harness has none, so one DNAT rule stands in for it: from
// the pod subnet, 10.0.0.1:443 goes to the apiserver on the node IP. The other Services have
// their stand-ins in services.go.
const (
	kubernetesServiceIP = "10.0.0.1"
	// inClusterAPIComment marks the rule, so that a run killed before its cleanup has its rule
	// found and removed by the next one.
	inClusterAPIComment = "agora-k8stest-kubernetes-service"
)

// inClusterAPIRule is the rule's iptables arguments after the table, chain and action.
func inClusterAPIRule(server string) ([]string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Port() == "" {
		return nil, fmt.Errorf("apiserver URL %q: want https://HOST:PORT", server)
	}
	return []string{"-s", podSubnet, "-d", kubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443",
		"-m", "comment", "--comment", inClusterAPIComment,
		"-j", "DNAT", "--to-destination", net.JoinHostPort(RealNodeIP, u.Port())}, nil
}

// addInClusterAPI removes any rule a killed run left and adds this cluster's.
func addInClusterAPI(server string) error {
	rule, err := inClusterAPIRule(server)
	if err != nil {
		return err
	}
	removeInClusterAPI()
	args := append([]string{"-t", "nat", "-A", "PREROUTING"}, rule...)
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// removeInClusterAPI deletes every rule marked as this harness's, whatever port it names.
func removeInClusterAPI() {
	out, err := exec.Command("iptables", "-t", "nat", "-S", "PREROUTING").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		spec, ok := strings.CutPrefix(line, "-A PREROUTING ")
		if !ok || !strings.Contains(line, inClusterAPIComment) {
			continue
		}
		// iptables -S prints the rule as arguments; none of this rule's contain a space.
		args := append([]string{"-t", "nat", "-D", "PREROUTING"}, strings.Fields(spec)...)
		_ = exec.Command("iptables", args...).Run()
	}
}
