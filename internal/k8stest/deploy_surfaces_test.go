package k8stest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The surfaces of serve's pod beside the gateway: the web view (serve --http), MCP over
// HTTP (agora mcp --http, a second container on the home) and the metrics listener (serve
// --metrics), as deploy/kubernetes writes them (the chart's default rendering and values-ha's).

// surface is one listener of serve's pod as the manifests must write it.
type surface struct {
	name      string // the Service agora-NAME and the named port NAME
	container string
	port      int
	hostFlag  string // the flag that lets the Service's names through the Host and Origin checks
}

var deploySurfaces = []surface{
	{"web", "agora", 8080, "--allow-host"},
	{"mcp", "mcp", 8765, "--allow-host"},
	{"metrics", "agora", 9090, "--metrics-allow-host"},
}

// strs is a decoded YAML list of strings.
func strs(v any) []string {
	var out []string
	for _, a := range v.([]any) {
		out = append(out, fmt.Sprint(a))
	}
	return out
}

// container is the container named name of a pod spec, or nil.
func container(pod any, name string) any {
	for _, c := range dig(pod, "containers").([]any) {
		if dig(c, "name") == name {
			return c
		}
	}
	return nil
}

// flagValues is every value of --flag in args (as "--flag value" pairs).
func flagValues(args []string, flag string) []string {
	var out []string
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			out = append(out, args[i+1])
		}
	}
	return out
}

// envOf is the container's env entry named name, or nil.
func envOf(c any, name string) any {
	envs, _ := dig(c, "env").([]any)
	for _, e := range envs {
		if dig(e, "name") == name {
			return e
		}
	}
	return nil
}

// checkSurfacePod holds the pod spec of serve's workload to the surfaces: serve's flags and
// ports, MCP's container, each token by reference to its own Secret, the Service names let
// through the Host checks, and each Service publishing its listener at the listener's port.
func checkSurfacePod(t *testing.T, file string, docs map[string]map[string]any, pod any) {
	t.Helper()
	agora, mcp := container(pod, "agora"), container(pod, "mcp")
	if agora == nil || mcp == nil || len(dig(pod, "containers").([]any)) != 2 {
		t.Fatalf("%s: containers %v, want agora and mcp", file, dig(pod, "containers"))
	}
	serveArgs := append(strs(dig(agora, "command")), strs(dig(agora, "args"))...)
	mcpArgs := strs(dig(mcp, "args"))
	for _, want := range [][2]string{{"--gateway", "0.0.0.0:8443"}, {"--http", "0.0.0.0:8080"}, {"--metrics", "0.0.0.0:9090"}} {
		if got := flagValues(serveArgs, want[0]); !slices.Equal(got, []string{want[1]}) {
			t.Errorf("%s: serve's %s is %v, want %s", file, want[0], got, want[1])
		}
	}
	if !slices.Contains(serveArgs, "--metrics-allow-remote") {
		t.Errorf("%s: serve's metrics on 0.0.0.0 without --metrics-allow-remote: serve refuses to start", file)
	}
	if got := flagValues(mcpArgs, "--http"); !slices.Equal(got, []string{"0.0.0.0:8765"}) || !slices.Equal(flagValues(mcpArgs, "--ceiling"), []string{"dispatch"}) {
		t.Errorf("%s: agora mcp's args %v, want --http 0.0.0.0:8765 --ceiling dispatch", file, mcpArgs)
	}
	if cmd := strs(dig(mcp, "command")); len(cmd) != 4 || cmd[0] != "sh" || !strings.Contains(cmd[2], `agora mcp "$@"`) ||
		!strings.Contains(cmd[2], "http://127.0.0.1:9090/readyz") || strings.Contains(cmd[2], "wget -T") {
		// wget -T segfaults in Debian's busybox-static 1.35 (the image's): timeout wraps it.
		t.Errorf("%s: the mcp container does not run agora mcp gated on serve's /readyz:\n%v", file, cmd)
	}
	// The Host and Origin checks let through exactly the Service's names no other namespace
	// can answer for, on its port: not the short ones, which a client's resolver looks up in
	// its own namespace first.
	for _, s := range deploySurfaces {
		args := serveArgs
		if s.container == "mcp" {
			args = mcpArgs
		}
		want := []string{"agora-" + s.name + ".agora.svc", "agora-" + s.name + ".agora.svc.cluster.local"}
		if got := flagValues(args, s.hostFlag); !slices.Equal(got, want) {
			t.Errorf("%s: %s's %s names %v, want the Service's names %v", file, s.name, s.hostFlag, got, want)
		}
		var ports []any
		for _, p := range dig(container(pod, s.container), "ports").([]any) {
			if dig(p, "name") == s.name {
				ports = append(ports, p)
			}
		}
		if len(ports) != 1 || dig(ports[0], "containerPort") != s.port {
			t.Errorf("%s: container %s's port %s: %v, want %d", file, s.container, s.name, ports, s.port)
		}
		svc := docs["Service/agora-"+s.name]
		// The Host a client sends carries the Service's port: the listener accepts its names on
		// its own port alone, so the two must be the same.
		want2 := []any{map[string]any{"name": s.name, "port": s.port, "targetPort": s.name}}
		if dig(svc, "spec", "type") != "ClusterIP" || !reflect.DeepEqual(dig(svc, "spec", "selector"), map[string]any{"app": "agora"}) ||
			!reflect.DeepEqual(dig(svc, "spec", "ports"), want2) {
			t.Errorf("%s: Service agora-%s: %v, want a ClusterIP of serve's pods publishing %v", file, s.name, dig(svc, "spec"), want2)
		}
	}
	// Each token by reference to its own Secret; binding off loopback is the explicit opt-in.
	for c, secret := range map[string]string{"agora": "agora-web-token", "mcp": "agora-mcp-token"} {
		ctr := container(pod, c)
		e := envOf(ctr, "AGORA_HTTP_TOKEN")
		if e == nil || dig(e, "value") != nil || !reflect.DeepEqual(dig(e, "valueFrom"), map[string]any{"secretKeyRef": map[string]any{"name": secret, "key": "token"}}) {
			t.Errorf("%s: container %s's AGORA_HTTP_TOKEN is %v, want a reference to Secret %s's key token", file, c, e, secret)
		}
		if e := envOf(ctr, "AGORA_HTTP_ALLOW_ANY"); dig(e, "value") != "yes-i-understand-the-risk" {
			t.Errorf("%s: container %s's AGORA_HTTP_ALLOW_ANY %v: serve and agora mcp refuse a bind off loopback without it", file, c, e)
		}
		if envOf(ctr, "AGORA_HTTP_TOKENS_FILE") != nil || dig(ctr, "envFrom") != nil {
			t.Errorf("%s: container %s takes tokens another way: %v", file, c, dig(ctr, "env"))
		}
	}
}

// checkNoTokenLiteral: no document of file carries a token: no Secret, no env value for a
// name that holds a secret, and no argument that is a token's value or names a token variable.
func checkNoTokenLiteral(t *testing.T, file string) {
	t.Helper()
	for k, obj := range deployDocs(t, file) {
		if strings.HasPrefix(k, "Secret/") {
			t.Errorf("%s holds %s: tokens are Secrets the operator makes", file, k)
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				if n, ok := v["name"].(string); ok && (strings.Contains(n, "TOKEN") || strings.Contains(n, "SECRET") || strings.Contains(n, "KEY")) && v["value"] != nil {
					t.Errorf("%s: %s sets %s to a literal", file, k, n)
				}
				for key, c := range v {
					if key == "command" || key == "args" {
						for _, a := range c.([]any) {
							if s := fmt.Sprint(a); strings.Contains(s, "AGORA_HTTP_TOKEN=") || strings.Contains(s, "Bearer ") {
								t.Errorf("%s: %s puts a token on a command line: %q", file, k, s)
							}
						}
					}
					walk(c)
				}
			case []any:
				for _, c := range v {
					walk(c)
				}
			}
		}
		walk(obj)
	}
}

// TestDeploySurfaces_Deployment: deploy/kubernetes/deployment.yaml runs serve with its web view
// and metrics listener and agora mcp --http beside it (checkSurfacePod), the probes on the
// metrics listener (startup and liveness /healthz, readiness /readyz), and no token anywhere.
func TestDeploySurfaces_Deployment(t *testing.T) {
	docs := deployDocs(t, "deployment.yaml")
	pod := dig(docs["Deployment/agora"], "spec", "template", "spec")
	checkSurfacePod(t, "deployment.yaml", docs, pod)
	agora := container(pod, "agora")
	for probe, path := range map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got := dig(agora, probe, "httpGet"); !reflect.DeepEqual(got, map[string]any{"path": path, "port": "metrics"}) {
			t.Errorf("deployment.yaml: serve's %s %v, want %s on the metrics listener", probe, got, path)
		}
	}
	if dig(container(pod, "mcp"), "readinessProbe") != nil || dig(container(pod, "mcp"), "livenessProbe") != nil {
		t.Errorf("the mcp container has a probe: a restarting MCP would take the pod, and the gateway's Service with it, out of service")
	}
	checkNoTokenLiteral(t, "deployment.yaml")
}

// TestDeploySurfaces_StatefulSet: deploy/kubernetes/ha/statefulset.yaml's replicas carry the
// same surfaces, and a standby serves none of them: the pod's readiness stays the gateway's
// /readyz (the leader alone is Ready, so no Service sends it anything), no liveness probe
// (a standby opens no listener until it leads, and would be restarted forever), and the mcp
// container starts agora mcp only once serve's metrics /readyz answers, which a standby's
// serve never opens.
func TestDeploySurfaces_StatefulSet(t *testing.T) {
	docs := deployDocs(t, "ha/statefulset.yaml")
	pod := dig(docs["StatefulSet/agora"], "spec", "template", "spec")
	checkSurfacePod(t, "ha/statefulset.yaml", docs, pod)
	agora := container(pod, "agora")
	if got := dig(agora, "readinessProbe", "httpGet"); !reflect.DeepEqual(got, map[string]any{"path": "/readyz", "port": "gateway", "scheme": "HTTPS"}) {
		t.Errorf("a replica's readiness %v, want the gateway's fenced /readyz", got)
	}
	for _, p := range []string{"livenessProbe", "startupProbe"} {
		if dig(agora, p) != nil {
			t.Errorf("a replica has a %s: a standby has no listener to answer it", p)
		}
	}
	// The bucket's credentials reach the two processes that open it, by reference.
	for _, c := range []string{"agora", "mcp"} {
		if e := envOf(container(pod, c), "AWS_SECRET_ACCESS_KEY"); dig(e, "valueFrom", "secretKeyRef", "name") != "agora-s3" {
			t.Errorf("container %s: AWS_SECRET_ACCESS_KEY %v, want the Secret agora-s3's (its blobs are in the bucket)", c, e)
		}
	}
	checkNoTokenLiteral(t, "ha/statefulset.yaml")
}

// TestDeploySurfaces_PolicyDefaultDeny: with the default values nobody in the cluster reaches
// the web view, MCP or the metrics listener (kubectl port-forward enters through the
// kubelet); each surface's from admits its peers on its own port alone, never another
// surface's or the gateway's. The NetworkPolicy API's semantics are evaluated (admits).
func TestDeploySurfaces_PolicyDefaultDeny(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ingress := peer{"the ingress controller", "ingress-nginx", map[string]string{"app": "ingress"}}
	prom := peer{"prometheus", "monitoring", map[string]string{"app": "prometheus"}}
	sel := func(p peer) string {
		return fmt.Sprintf(`[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":%q}},"podSelector":{"matchLabels":{"app":%q}}}]`, p.ns, p.labels["app"])
	}
	serve := map[string]string{"app": "agora"}
	for _, c := range []struct {
		name  string
		args  []string
		allow map[string][]int // peer name -> the ports it reaches
	}{
		{"defaults", nil, nil},
		{"leader", leaderValues, nil},
		{"web and mcp from the ingress, metrics from prometheus",
			[]string{"--set-json", "web.from=" + sel(ingress), "--set-json", "mcp.from=" + sel(ingress), "--set-json", "metrics.from=" + sel(prom)},
			map[string][]int{ingress.name: {8080, 8765}, prom.name: {9090}}},
		{"metrics only, mcp off", []string{"--set", "mcp.enabled=false", "--set-json", "metrics.from=" + sel(prom), "--set-json", "mcp.from=" + sel(ingress)},
			map[string][]int{prom.name: {9090}}},
	} {
		var policies []map[string]any
		for _, o := range renderedObjects(ctx, t, helm, c.args...) {
			if o["kind"] == "NetworkPolicy" {
				policies = append(policies, o)
			}
		}
		for _, from := range []peer{ingress, prom, dispatchPod("agents"), {"another pod of serve's namespace", "agora", map[string]string{"app": "other"}}} {
			for _, port := range []int{8080, 8765, 9090, 8443} {
				want := slices.Contains(c.allow[from.name], port) || (from.name == dispatchPod("agents").name && port == 8443)
				if got := admits(policies, from, "agora", serve, port); got != want {
					t.Errorf("%s: %s reaches serve's pod on %d: %v, want %v", c.name, from.name, port, got, want)
				}
			}
		}
	}
}

// TestDeploySurfaces_ValuesRefused: the surfaces' values that would open more than they say, or
// start a pod that cannot serve: a surface without its token Secret, one Secret for the web
// view's operator token and MCP's, MCP without the metrics listener it waits on, two
// listeners on one port, a port agora (uid 10001, no capabilities) cannot bind, an unknown
// ceiling, and an empty peer (which the NetworkPolicy API reads as everything).
func TestDeploySurfaces_ValuesRefused(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"web without its Secret", []string{"--set", "web.tokenSecret="}, "web.tokenSecret"},
		{"mcp without its Secret", []string{"--set", "mcp.tokenSecret="}, "mcp.tokenSecret"},
		{"one Secret for both", []string{"--set", "mcp.tokenSecret=agora-web-token"}, "must differ"},
		{"mcp without metrics", []string{"--set", "metrics.enabled=false"}, "mcp.enabled needs metrics.enabled"},
		{"web on the gateway's port", []string{"--set", "web.port=8443"}, "web.port 8443"},
		{"metrics on mcp's port", []string{"--set", "metrics.port=8765"}, "8765"},
		{"a privileged port", []string{"--set", "web.port=80"}, "web.port"},
		{"an unknown ceiling", []string{"--set", "mcp.ceiling=admin"}, "mcp.ceiling"},
		{"an empty peer", []string{"--set-json", "web.from=[{}]"}, "web.from"},
		{"an empty selector peer", []string{"--set-json", `metrics.from=[{"namespaceSelector":{}}]`}, "metrics.from"},
		{"a metrics host with YAML", []string{"--set-string", "metrics.allowHosts[0]=x\n- --metrics-allow-host\n- evil"}, "metrics.allowHosts"},
		{"leader, one Secret", append(slices.Clone(leaderValues), "--set", "web.tokenSecret=agora-mcp-token"), "must differ"},
	} {
		out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, c.args...)...)
		if err == nil {
			t.Errorf("%s: rendered:\n%s", c.name, tail(out, 2000))
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: refused, but not naming %q: %v", c.name, c.want, err)
		}
	}
}

// TestDeploySurfaces_Off: with web, mcp and metrics off the chart renders the pod it rendered
// before them (the gateway alone, one container, no other Service), and a surface turned off
// leaves no flag, port, Service or token reference behind.
func TestDeploySurfaces_Off(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	off := []string{"--set", "web.enabled=false", "--set", "mcp.enabled=false", "--set", "metrics.enabled=false"}
	for name, args := range map[string][]string{"one serve": off, "leader": append(slices.Clone(leaderValues), off...)} {
		out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var code strings.Builder // the rendering without its comments, which may name them
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "#") {
				code.WriteString(l + "\n")
			}
		}
		for _, s := range []string{"agora-web", "agora-mcp", "agora-metrics", "--http", "--metrics", "AGORA_HTTP_TOKEN", "AGORA_HTTP_ALLOW_ANY", "name: mcp"} {
			if strings.Contains(code.String(), s) {
				t.Errorf("%s: every surface off, the rendering still has %q", name, s)
			}
		}
		for _, doc := range strings.Split(out, "\n---\n") {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatal(err)
			}
			if k := obj["kind"]; k == "Deployment" || k == "StatefulSet" {
				pod := dig(obj, "spec", "template", "spec")
				if n := len(dig(pod, "containers").([]any)); n != 1 {
					t.Errorf("%s: %d containers", name, n)
				}
				if ports := dig(container(pod, "agora"), "ports").([]any); len(ports) != 1 || dig(ports[0], "name") != "gateway" {
					t.Errorf("%s: serve's ports %v, want the gateway alone", name, ports)
				}
			}
		}
	}
}

// TestDeploySurfaces_SchemaSkippedStaysInItsArg: with --skip-schema-validation (the schema
// refuses these values) a metrics name holding a line break and a flag stays one argument:
// no flag is added to serve's command line; a token Secret's name so made (printed in the
// header's comment too, where a line break would end it) and such a ceiling are refused.
func TestDeploySurfaces_SchemaSkippedStaysInItsArg(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	inject := "x\n- --insecure"
	// A values file: --set-string would split the values at their commas.
	vals := filepath.Join(t.TempDir(), "values.yaml")
	write := func(v map[string]any) {
		b, err := yaml.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vals, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, v := range map[string]map[string]any{
		"web.tokenSecret": {"web": map[string]any{"tokenSecret": "s\napiVersion: v1\nkind: Secret"}},
		"mcp.tokenSecret": {"mcp": map[string]any{"tokenSecret": "s}}}\n  - {name: AGORA_HTTP_TOKEN, value: leaked"}},
		"mcp.ceiling":     {"mcp": map[string]any{"ceiling": "dispatch\n  - --insecure"}},
	} {
		write(v)
		if out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--skip-schema-validation", "-f", vals); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with a line break, schema skipped: %v\n%s", name, err, tail(out, 1500))
		}
	}
	write(map[string]any{"metrics": map[string]any{"allowHosts": []string{inject}}})
	objs := renderedObjects(ctx, t, helm, "--skip-schema-validation", "-f", vals)
	for _, o := range objs {
		if o["kind"] != "Deployment" {
			continue
		}
		pod := dig(o, "spec", "template", "spec")
		for _, c := range dig(pod, "containers").([]any) {
			args := strs(dig(c, "args"))
			if slices.Contains(args, "--insecure") {
				t.Errorf("container %v's args gained a flag: %q", dig(c, "name"), args)
			}
			for _, e := range dig(c, "env").([]any) {
				if dig(e, "value") == "leaked" {
					t.Errorf("container %v gained an env entry: %v", dig(c, "name"), e)
				}
			}
		}
		if got := flagValues(strs(dig(container(pod, "agora"), "args")), "--metrics-allow-host"); !slices.Contains(got, inject) {
			t.Errorf("the injected name is not one argument: %q", got)
		}
		return
	}
	t.Fatal("no Deployment rendered")
}
