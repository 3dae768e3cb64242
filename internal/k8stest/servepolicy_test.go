package k8stest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// peer is a pod that tries to connect: its namespace (and that namespace's labels, as the
// apiserver sets kubernetes.io/metadata.name) and its own labels.
type peer struct {
	name   string
	ns     string
	labels map[string]string
}

// dispatchPod carries the labels internal/compute/kubernetes gives a dispatch's and a warm
// slot's pod (labels(id): managed-by agora and the dispatch id).
func dispatchPod(ns string) peer {
	return peer{"agora's dispatch pod", ns, map[string]string{"app.kubernetes.io/managed-by": "agora", "agora.dispatch": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}}
}

// selects reports whether a LabelSelector (a decoded map, nil: the field is absent) selects
// labels. matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) are ANDed; an
// empty selector selects everything.
func selects(sel map[string]any, labels map[string]string) bool {
	ml, _ := sel["matchLabels"].(map[string]any)
	for k, v := range ml {
		if labels[k] != fmt.Sprint(v) {
			return false
		}
	}
	exprs, _ := sel["matchExpressions"].([]any)
	for _, e := range exprs {
		m, _ := e.(map[string]any)
		key, _ := m["key"].(string)
		val, has := labels[key]
		var in bool
		vals, _ := m["values"].([]any)
		for _, v := range vals {
			in = in || fmt.Sprint(v) == val
		}
		switch m["operator"] {
		case "Exists":
			if !has {
				return false
			}
		case "DoesNotExist":
			if has {
				return false
			}
		case "In":
			if !has || !in {
				return false
			}
		case "NotIn":
			if has && in {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// admits reports whether the NetworkPolicies of a rendering let from connect to a pod of
// namespace ns with labels to, on TCP port, as the NetworkPolicy API defines it: a pod no
// policy with policyTypes Ingress selects admits everything; a selected one admits what one
// of the selecting policies' rules allows (a rule's from peers are ORed, a peer's
// namespaceSelector and podSelector ANDed, a peer without namespaceSelector is of the
// policy's namespace; an absent from or ports allows all). ipBlock peers are not pods: they
// admit none of these.
func admits(policies []map[string]any, from peer, ns string, to map[string]string, port int) bool {
	selected := false
	for _, p := range policies {
		if dig(p, "metadata", "namespace") != ns {
			continue
		}
		spec, _ := p["spec"].(map[string]any)
		sel, _ := spec["podSelector"].(map[string]any)
		types, _ := spec["policyTypes"].([]any)
		ingress := len(types) == 0
		for _, ty := range types {
			ingress = ingress || ty == "Ingress"
		}
		if !ingress || !selects(sel, to) {
			continue
		}
		selected = true
		rules, _ := spec["ingress"].([]any)
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			if ruleAdmits(rule, from, ns, port) {
				return true
			}
		}
	}
	return !selected
}

func ruleAdmits(rule map[string]any, from peer, ns string, port int) bool {
	if ports, ok := rule["ports"].([]any); ok && len(ports) > 0 {
		match := false
		for _, p := range ports {
			pm, _ := p.(map[string]any)
			proto, _ := pm["protocol"].(string)
			match = match || (proto == "" || proto == "TCP") && fmt.Sprint(pm["port"]) == fmt.Sprint(port)
		}
		if !match {
			return false
		}
	}
	peers, ok := rule["from"].([]any)
	if !ok || len(peers) == 0 {
		return true
	}
	nsLabels := map[string]string{"kubernetes.io/metadata.name": from.ns}
	for _, pe := range peers {
		pm, _ := pe.(map[string]any)
		if _, ip := pm["ipBlock"]; ip {
			continue
		}
		nsSel, hasNS := pm["namespaceSelector"].(map[string]any)
		podSel, hasPod := pm["podSelector"].(map[string]any)
		nsOK := hasNS && selects(nsSel, nsLabels) || !hasNS && from.ns == ns
		podOK := !hasPod || selects(podSel, from.labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

// renderedObjects renders the chart with args and returns its documents.
func renderedObjects(ctx context.Context, t *testing.T, helm string, args ...string) []map[string]any {
	t.Helper()
	out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("the rendering is not YAML: %v", err)
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
}

// TestHelmChart_ServeIngressPolicy: the dispatches' pods are denied
// all traffic but their own gateway egress; without this policy nothing limits who reaches serve's pod: any
// pod of the cluster (another team's, a compromised workload in agora's own namespace, a pod
// in agents that agora did not make) could connect to the gateway's port and to any port a
// site opened beside it (MCP HTTP, the web view, metrics). The rendering now selects serve's
// pods (the Deployment's, and every replica of the StatefulSet: leader and standbys) with a
// policy that admits agora's own dispatch and warm-slot pods in namespaces.agents on the
// gateway's port and nothing else unless networkPolicy.ingress names it. Each attacker below is
// admitted before the fix (no policy selected serve) and refused after; the dispatch pod is
// admitted to the gateway and to nothing else. The NetworkPolicy API's semantics are evaluated
// here (admits): the test clusters run no network plugin that enforces a policy.
func TestHelmChart_ServeIngressPolicy(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	site := `{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}},"podSelector":{"matchLabels":{"app":"ingress"}}}],"ports":[{"port":8080}]}`
	for _, c := range []struct {
		name   string
		args   []string
		agents string
		port   int
	}{
		{"defaults", nil, "agents", 8443},
		{"leader", leaderValues, "agents", 8443},
		{"other namespaces and port", []string{"--set", "namespaces.agora=team-agora", "--set", "namespaces.agents=team-agents", "--set", "gateway.port=9443"}, "team-agents", 9443},
		{"a site's rule", []string{"--set-json", "networkPolicy.ingress=[" + site + "]"}, "agents", 8443},
	} {
		objs := renderedObjects(ctx, t, helm, c.args...)
		var policies []map[string]any
		var serveNS string
		var serveLabels map[string]string
		for _, o := range objs {
			switch o["kind"] {
			case "NetworkPolicy":
				policies = append(policies, o)
			case "Deployment", "StatefulSet":
				serveNS, _ = dig(o, "metadata", "namespace").(string)
				serveLabels = map[string]string{}
				for k, v := range dig(o, "spec", "template", "metadata", "labels").(map[string]any) {
					serveLabels[k] = fmt.Sprint(v)
				}
			}
		}
		if serveLabels == nil {
			t.Fatalf("%s: no serve workload rendered", c.name)
		}
		admitted := func(from peer, port int) bool { return admits(policies, from, serveNS, serveLabels, port) }
		if !admitted(dispatchPod(c.agents), c.port) {
			t.Errorf("%s: agora's dispatch pod in %s cannot reach serve's gateway on %d", c.name, c.agents, c.port)
		}
		for _, attack := range []struct {
			from peer
			port int
		}{
			{peer{"a pod of another namespace", "default", map[string]string{"app": "web"}}, c.port},
			{dispatchPod("default"), c.port}, // agora's labels, worn in another namespace
			{peer{"a pod in agents agora did not make", c.agents, map[string]string{"app.kubernetes.io/managed-by": "agora"}}, c.port},
			{peer{"a pod in agents with a dispatch label only", c.agents, map[string]string{"agora.dispatch": "x"}}, c.port},
			{peer{"another pod in serve's namespace", serveNS, map[string]string{"app": "other"}}, c.port},
			{peer{"a serve pod (a standby) to another port", serveNS, serveLabels}, 9090},
			{dispatchPod(c.agents), 9090}, // metrics
			{dispatchPod(c.agents), 8080}, // MCP HTTP, the web view
			{peer{"the ingress controller, no rule for it", "ingress-nginx", map[string]string{"app": "ingress"}}, c.port},
		} {
			if admitted(attack.from, attack.port) {
				t.Errorf("%s: %s (namespace %s) reaches serve's pods on port %d", c.name, attack.from.name, attack.from.ns, attack.port)
			}
		}
		ctrl := peer{"the ingress controller", "ingress-nginx", map[string]string{"app": "ingress"}}
		if got := admitted(ctrl, 8080); got != (c.name == "a site's rule") {
			t.Errorf("%s: the site's ingress controller admitted on 8080: %v", c.name, got)
		}
	}
}

// TestHelmChart_ServeIngressRulesRefused: networkPolicy.ingress takes NetworkPolicy ingress
// rules that name their sources and their ports. A rule that leaves either out (which the
// NetworkPolicy API reads as "from everywhere" or "on every port"), an empty peer, an unknown
// key (a typo that would leave a rule wider than written) and YAML smuggled in a label are
// refused by the schema.
func TestHelmChart_ServeIngressRulesRefused(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ns := `{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}}}`
	for name, rule := range map[string]string{
		"no from":        `{"ports":[{"port":8080}]}`,
		"empty from":     `{"from":[],"ports":[{"port":8080}]}`,
		"no ports":       `{"from":[` + ns + `]}`,
		"an empty rule":  `{}`,
		"an empty peer":  `{"from":[{}],"ports":[{"port":8080}]}`,
		"a typo":         `{"from":[{"namespaceSelectr":{}}],"ports":[{"port":8080}]}`,
		"a label's YAML": `{"from":[{"podSelector":{"matchLabels":{"app":"x}\n  - {}"}}}],"ports":[{"port":8080}]}`,
		"port 0":         `{"from":[` + ns + `],"ports":[{"port":0}]}`,
	} {
		out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--set-json", "networkPolicy.ingress=["+rule+"]")
		if err == nil {
			t.Errorf("%s: rendered:\n%s", name, out)
		} else if !strings.Contains(err.Error(), "networkPolicy") {
			t.Errorf("%s: refused, but not naming networkPolicy: %v", name, err)
		}
	}
}
