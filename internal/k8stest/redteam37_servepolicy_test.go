package k8stest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRedTeam37_ServeIngressEmptySelectorsRefused: networkPolicy.ingress refuses a rule
// without sources or ports, an empty peer, and a peer whose selector is empty, which the NetworkPolicy API reads as everything: {namespaceSelector: {}} admits
// every pod of every namespace, {podSelector: {}} every pod of serve's namespace, and
// {matchLabels: {}} or {matchExpressions: []} look like a selector and select all the same.
// The schema refuses a selector that selects nothing in particular.
// A rule that names its sources still renders.
func TestRedTeam37_ServeIngressEmptySelectorsRefused(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ports := `"ports":[{"port":8080}]`
	for name, from := range map[string]string{
		"every namespace":             `{"namespaceSelector":{}}`,
		"every pod of serve's":        `{"podSelector":{}}`,
		"empty matchLabels":           `{"namespaceSelector":{"matchLabels":{}}}`,
		"empty matchExpressions":      `{"namespaceSelector":{"matchExpressions":[]}}`,
		"a pod label, any namespace":  `{"namespaceSelector":{},"podSelector":{"matchLabels":{"app":"ingress"}}}`,
		"a namespace, empty pod part": `{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}},"podSelector":{"matchLabels":{}}}`,
	} {
		out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--set-json", `networkPolicy.ingress=[{"from":[`+from+`],`+ports+`}]`)
		if err == nil {
			t.Errorf("%s: rendered:\n%s", name, out)
		} else if !strings.Contains(err.Error(), "networkPolicy") {
			t.Errorf("%s: refused, but not naming networkPolicy: %v", name, err)
		}
	}
	ok := `{"from":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress-nginx"}},"podSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["ingress"]}]}}],` + ports + `}`
	if out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--set-json", "networkPolicy.ingress=["+ok+"]"); err != nil || !strings.Contains(out, "ingress-nginx") {
		t.Errorf("a rule naming its sources: %v\n%s", err, out)
	}
}

// TestRedTeam37_ServePolicyBoundaries: what agora-serve does and does not stop, as
// docs/providers-k8s.md says it. (1) The allow rule trusts labels: a pod in agents that agora
// did not make but wears its two labels (anyone who may create a pod, Job or Deployment there)
// is admitted to the gateway's port, where only a live slot's token is served; the labels
// cannot be worn from another namespace (kubernetes.io/metadata.name is the apiserver's). A
// dispatch's pod cannot make such a pod: it mounts no service account token. (2) Every pod
// behind the gateway's headless Service (the Deployment's, every replica of the StatefulSet)
// is selected. (3) helm creates the policy before the workload (its install order puts
// NetworkPolicy before Deployment and StatefulSet), so an upgrade from a release without the
// policy rolls no pod out before the policy exists.
func TestRedTeam37_ServePolicyBoundaries(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for name, args := range map[string][]string{"defaults": nil, "leader": leaderValues} {
		objs := renderedObjects(ctx, t, helm, args...)
		var policies []map[string]any
		policyAt, workloadAt := -1, -1
		var serveNS string
		var serveLabels map[string]string
		var svcSelectors []map[string]string
		for i, o := range objs {
			switch o["kind"] {
			case "NetworkPolicy":
				policies = append(policies, o)
				if dig(o, "metadata", "name") == "agora-serve" {
					policyAt = i
				}
			case "Deployment", "StatefulSet":
				workloadAt = i
				serveNS, _ = dig(o, "metadata", "namespace").(string)
				serveLabels = map[string]string{}
				for k, v := range dig(o, "spec", "template", "metadata", "labels").(map[string]any) {
					serveLabels[k] = fmt.Sprint(v)
				}
			case "Service":
				sel := map[string]string{}
				for k, v := range dig(o, "spec", "selector").(map[string]any) {
					sel[k] = fmt.Sprint(v)
				}
				svcSelectors = append(svcSelectors, sel)
			}
		}
		if policyAt < 0 || workloadAt < 0 || policyAt > workloadAt {
			t.Errorf("%s: agora-serve is document %d, the workload %d: helm would roll the pods out before the policy exists", name, policyAt, workloadAt)
		}
		forged := peer{"a pod in agents agora did not make, wearing its labels", "agents", dispatchPod("agents").labels}
		if !admits(policies, forged, serveNS, serveLabels, 8443) {
			t.Errorf("%s: a pod wearing agora's labels in agents is refused: docs/providers-k8s.md says labels, not who made the pod, admit it", name)
		}
		if admits(policies, peer{forged.name, "agents-2", forged.labels}, serveNS, serveLabels, 8443) {
			t.Errorf("%s: agora's labels worn in another namespace are admitted", name)
		}
		// Every pod a Service of serve's selects (a pod of the workload's labels) is one the
		// policy selects: nobody reaches a pod behind the gateway's Service around it.
		for _, sel := range svcSelectors {
			pod := map[string]string{}
			for k, v := range sel {
				pod[k] = v
			}
			if admits(policies, peer{"a pod of another namespace", "default", map[string]string{"app": "web"}}, serveNS, pod, 8443) {
				t.Errorf("%s: a pod the Service selecting %v routes to is not under agora-serve", name, sel)
			}
		}
	}
}
