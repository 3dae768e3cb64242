package k8stest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// With InClusterAPI, a real node's pods also reach the cluster's other Services as in a
// cluster, by name and ClusterIP. A cluster's DNS server and kube-proxy are what make that
// work; this harness runs neither, so it stands in for both, for ClusterIP Services with a
// selector (agora's manifests publish serve's gateway at one, so that a Job reaches the serve
// pod that replaced the one it started under):
//
//   - serviceDNS answers A queries for NAME.NAMESPACE.svc.cluster.local with the Service's
//     ClusterIP, on the node IP's port 53, which the kubelet gives pods as their nameserver
//     (clusterDNS); every other name does not exist.
//   - syncServices keeps one DNAT rule per Service port, from the pod subnet to a ready pod
//     the Service selects, moving it when the pod is replaced, and one MASQUERADE rule for a connection rewritten to a pod, so that its
//     answer comes back through the node (the client and the endpoint share the bridge).
//
// NetworkPolicies are enforced by kube-network-policies when it is built (netpol.go): it judges
// a connection to a ClusterIP after the DNAT here, by the pod it reaches, as a cluster's engine
// behind kube-proxy does.
const servicesComment = "agora-k8stest-service"

// serviceName is a Service's name in the cluster's DNS.
var serviceName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.([a-z0-9]([-a-z0-9]*[a-z0-9])?)\.svc\.cluster\.local\.$`)

// startServices starts the two stand-ins until ctx ends.
func (c *Cluster) startServices(ctx context.Context) error {
	removeServiceRules()
	conn, err := net.ListenPacket("udp", net.JoinHostPort(RealNodeIP, "53"))
	if err != nil {
		return fmt.Errorf("the cluster DNS stand-in: %w", err)
	}
	if err := iptables("-t", "nat", "-A", "POSTROUTING", "-s", podSubnet, "-d", podSubnet, "-m", "conntrack", "--ctstate", "DNAT",
		"-m", "comment", "--comment", servicesComment, "-j", "MASQUERADE"); err != nil {
		conn.Close()
		return err
	}
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
	go c.serviceDNS(ctx, conn)
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			c.syncServices(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

// serviceDNS answers the queries on conn until it is closed.
func (c *Cluster) serviceDNS(ctx context.Context, conn net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := c.answerDNS(ctx, buf[:n]); out != nil {
			_, _ = conn.WriteTo(out, from)
		}
	}
}

// answerDNS is the answer to one query, nil for a message that is none.
func (c *Cluster) answerDNS(ctx context.Context, in []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(in)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	resp := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RCode: dnsmessage.RCodeNameError},
		Questions: []dnsmessage.Question{q}}
	if m := serviceName.FindStringSubmatch(strings.ToLower(q.Name.String())); m != nil {
		var svc struct{ Spec struct{ ClusterIP string } }
		lookup, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Do(lookup, http.MethodGet, "/api/v1/namespaces/"+m[3]+"/services/"+m[1], nil, &svc)
		cancel()
		if ip, perr := netip.ParseAddr(svc.Spec.ClusterIP); err == nil && perr == nil && ip.Is4() {
			resp.RCode = dnsmessage.RCodeSuccess
			if q.Type == dnsmessage.TypeA {
				resp.Answers = []dnsmessage.Resource{{
					Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 5},
					Body:   &dnsmessage.AResource{A: ip.As4()},
				}}
			}
		}
	}
	out, err := resp.Pack()
	if err != nil {
		return nil
	}
	return out
}

// syncServices makes the DNAT rules those the Services and their pods want now. The
// endpoints are read from the pods themselves (a running, ready pod the Service's selector
// matches, its target port resolved by name against its containers' ports): the harness's
// controller-manager runs no EndpointSlice controller.
func (c *Cluster) syncServices(ctx context.Context) {
	var svcs struct {
		Items []struct {
			Metadata struct{ Name, Namespace string }
			Spec     struct {
				ClusterIP string
				Selector  map[string]string
				Ports     []struct {
					Protocol   string
					Port       int
					TargetPort targetPort
				}
			}
		}
	}
	if c.Do(ctx, http.MethodGet, "/api/v1/services", nil, &svcs) != nil {
		return
	}
	var want []string
	for _, s := range svcs.Items {
		if ip, err := netip.ParseAddr(s.Spec.ClusterIP); err != nil || !ip.Is4() || s.Spec.ClusterIP == kubernetesServiceIP || len(s.Spec.Selector) == 0 {
			continue
		}
		pods, ok := c.readyPods(ctx, s.Metadata.Namespace, s.Spec.Selector)
		if !ok {
			continue
		}
		for _, sp := range s.Spec.Ports {
			if sp.Protocol != "" && sp.Protocol != "TCP" {
				continue
			}
			if to := endpoint(pods, sp.TargetPort, sp.Port); to != "" {
				want = append(want, strings.Join([]string{"-s", podSubnet, "-d", s.Spec.ClusterIP + "/32", "-p", "tcp", "-m", "tcp", "--dport", fmt.Sprint(sp.Port),
					"-m", "comment", "--comment", servicesComment, "-j", "DNAT", "--to-destination", to}, " "))
			}
		}
	}
	have := serviceRules("PREROUTING")
	for _, r := range want {
		if !slices.Contains(have, r) {
			_ = iptables(append([]string{"-t", "nat", "-I", "PREROUTING"}, strings.Fields(r)...)...)
		}
	}
	for _, r := range have {
		if !slices.Contains(want, r) {
			_ = iptables(append([]string{"-t", "nat", "-D", "PREROUTING"}, strings.Fields(r)...)...)
		}
	}
}

// readyPod is what an endpoint needs of a pod.
type readyPod struct {
	ip    string
	ports map[string]int // container ports by name
}

// readyPods lists the running, ready pods of ns whose labels include selector.
func (c *Cluster) readyPods(ctx context.Context, ns string, selector map[string]string) ([]readyPod, bool) {
	var sel []string
	for k, v := range selector {
		sel = append(sel, k+"="+v)
	}
	slices.Sort(sel)
	var list struct {
		Items []struct {
			Metadata struct{ DeletionTimestamp *string }
			Spec     struct {
				Containers []struct {
					Ports []struct {
						Name          string
						ContainerPort int
					}
				}
			}
			Status struct {
				Phase, PodIP string
				Conditions   []struct{ Type, Status string }
			}
		}
	}
	if c.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+ns+"/pods?labelSelector="+url.QueryEscape(strings.Join(sel, ",")), nil, &list) != nil {
		return nil, false
	}
	var out []readyPod
	for _, p := range list.Items {
		ready := false
		for _, cd := range p.Status.Conditions {
			ready = ready || (cd.Type == "Ready" && cd.Status == "True")
		}
		if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" || !ready || p.Status.PodIP == "" {
			continue
		}
		rp := readyPod{ip: p.Status.PodIP, ports: map[string]int{}}
		for _, ct := range p.Spec.Containers {
			for _, port := range ct.Ports {
				if port.Name != "" {
					rp.ports[port.Name] = port.ContainerPort
				}
			}
		}
		out = append(out, rp)
	}
	return out, true
}

// endpoint is IP:PORT of the first pod that has the target port, "" for none.
func endpoint(pods []readyPod, target targetPort, port int) string {
	for _, p := range pods {
		n := port
		switch {
		case target.name != "":
			if n = p.ports[target.name]; n == 0 {
				continue
			}
		case target.num != 0:
			n = target.num
		}
		return net.JoinHostPort(p.ip, fmt.Sprint(n))
	}
	return ""
}

// serviceRules are the stand-in's rules of chain in the nat table, as iptables -S prints
// them without "-A CHAIN ".
func serviceRules(chain string) []string {
	out, err := exec.Command("iptables", "-t", "nat", "-S", chain).Output()
	if err != nil {
		return nil
	}
	var rules []string
	for _, line := range strings.Split(string(out), "\n") {
		if spec, ok := strings.CutPrefix(line, "-A "+chain+" "); ok && strings.Contains(line, servicesComment) {
			rules = append(rules, strings.TrimSpace(spec))
		}
	}
	return rules
}

// removeServiceRules deletes every rule of the stand-in, a killed run's too.
func removeServiceRules() {
	for _, chain := range []string{"PREROUTING", "POSTROUTING"} {
		for _, r := range serviceRules(chain) {
			_ = iptables(append([]string{"-t", "nat", "-D", chain}, strings.Fields(r)...)...)
		}
	}
}

func iptables(args ...string) error {
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
