package k8stest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/k8stest"
)

// renderWith renders the chart with a values file holding values (so a value can carry any
// character, which --set cannot), plus args; it returns helm's error with its message.
func renderWith(ctx context.Context, t *testing.T, helm, values string, args ...string) (string, error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return runHelm(ctx, helm, append([]string{"template", "agora", chartDir, "-f", f}, args...)...)
}

// TestRedTeam36_ExtraConfigLineBreaksRefused: extraConfig is indented into agora.yaml's block
// in the ConfigMap by `indent`, which breaks lines at \n only; the YAML parser that reads the
// manifest (sigs.k8s.io/yaml, helm's and kubectl's) also breaks them at \r, U+0085, U+2028 and
// U+2029. Before the fix, `retention: {}\r  agora.yaml: |\r    targets: ...\rmetadata: {...
// namespace: kube-system}` passed the schema and `helm lint --strict`, and `helm install` on
// the test control plane made the ConfigMap in the other namespace with its agora.yaml replaced
// (the chart's targets, pinned images and gateway gone). Each is now refused by the schema and,
// with the schema skipped, by the template.
func TestRedTeam36_ExtraConfigLineBreaksRefused(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for name, brk := range map[string]string{"CR": `\r`, "NEL": `\u0085`, "LS": `\u2028`, "PS": `\u2029`} {
		// A YAML double-quoted scalar: the escapes become the characters themselves.
		v := `extraConfig: "retention: {}` + brk + `  agora.yaml: |` + brk + `    targets: {evil: {provider: local}}` + brk + `metadata: {name: agora-config, namespace: kube-system}"` + "\n"
		if out, err := renderWith(ctx, t, helm, v); err == nil {
			t.Errorf("%s: rendered:\n%s", name, out)
		} else if !strings.Contains(err.Error(), "extraConfig") {
			t.Errorf("%s: refused, but not naming extraConfig: %v", name, err)
		}
		if out, err := renderWith(ctx, t, helm, v, "--skip-schema-validation"); err == nil {
			t.Errorf("%s, schema skipped: rendered:\n%s", name, out)
		} else if !strings.Contains(err.Error(), "extraConfig: a carriage return") {
			t.Errorf("%s, schema skipped: refused, but not by the template's check: %v", name, err)
		}
	}
}

// TestRedTeam36_ExtraConfigStaysInAgoraYAML: what extraConfig may carry (\n lines, a tab, a
// line that looks like a ConfigMap key or a document marker) lands inside agora.yaml and
// nowhere else: the rendered ConfigMap is agora's own namespace's with one key, whose text
// still begins with the chart's targets. (A "---" in it makes agora.yaml two documents, which
// agora refuses at start: strictyaml.)
func TestRedTeam36_ExtraConfigStaysInAgoraYAML(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	v := `extraConfig: "retention:\n  keep:\t1\n  agora.yaml: x\nmetadata: {namespace: kube-system}\n---\nkind: ClusterRole\n"` + "\n"
	out, err := renderWith(ctx, t, helm, v)
	if err != nil {
		t.Fatal(err)
	}
	var cms int
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		switch obj["kind"] {
		case "ClusterRole", "ClusterRoleBinding":
			t.Errorf("extraConfig made a %v:\n%s", obj["kind"], doc)
		case "ConfigMap":
			cms++
			data, _ := obj["data"].(map[string]any)
			conf, _ := data["agora.yaml"].(string)
			if ns := dig(obj, "metadata", "namespace"); ns != "agora" || len(data) != 1 || !strings.HasPrefix(conf, "targets:\n  k8s:\n") {
				t.Errorf("extraConfig reached the ConfigMap itself: namespace %v, data %v", ns, data)
			}
			if !strings.Contains(conf, "\n  agora.yaml: x\nmetadata: {namespace: kube-system}\n---\nkind: ClusterRole\n") {
				t.Errorf("extraConfig is not agora.yaml's as written:\n%s", conf)
			}
		}
	}
	if cms != 1 {
		t.Errorf("%d ConfigMaps rendered, want 1", cms)
	}
}

// TestRedTeam36_SystemNamespacesRefused: namespaces.agents names where the chart grants create
// on Jobs and Secrets (and puts a default-deny policy), namespaces.agora where it grants the
// Lease. Before the fix, kube-system passed (with create=false): agora's service account could
// make Jobs running as any of kube-system's service accounts, the deny-all policy would cut
// the cluster's DNS, and with leader.lease=kube-scheduler it could update the scheduler's own
// Lease. default and every kube- namespace are refused, by the schema and again by the
// template.
func TestRedTeam36_SystemNamespacesRefused(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct{ key, ns string }{
		{"agents", "kube-system"}, {"agents", "default"}, {"agora", "kube-system"}, {"agora", "kube-node-lease"}, {"agora", "default"},
	} {
		set := []string{"--set", "namespaces.create=false", "--set", "namespaces." + c.key + "=" + c.ns}
		if c.key == "agora" {
			set = append(set, append(leaderValues, "--set", "leader.lease=kube-scheduler")...)
		}
		out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, set...)...)
		if err == nil {
			t.Errorf("namespaces.%s=%s: rendered:\n%s", c.key, c.ns, out)
		} else if !strings.Contains(err.Error(), "namespaces/"+c.key) {
			t.Errorf("namespaces.%s=%s: refused, but not naming it: %v", c.key, c.ns, err)
		}
		_, err = runHelm(ctx, helm, append([]string{"template", "agora", chartDir, "--skip-schema-validation"}, set...)...)
		if err == nil || !strings.Contains(err.Error(), "namespaces."+c.key+" \""+c.ns+"\": not default or a kube-") {
			t.Errorf("namespaces.%s=%s, schema skipped: want the template's refusal, got %v", c.key, c.ns, err)
		}
	}
	// A name merely starting with kube is agora's to use.
	if _, err := runHelm(ctx, helm, "template", "agora", chartDir, "--set", "namespaces.agents=kubeagents"); err != nil {
		t.Errorf("namespaces.agents=kubeagents: %v", err)
	}
}

// TestRedTeam36_HelmUpgradeRefusesModeSwitch: `helm upgrade` turning leader.enabled on (or
// off) in place. Helm makes the new workload before deleting the old, whose pod serves on
// through its grace period: before the fix the upgrade went through, so the Deployment's
// serve (no Lease, no fence) and the StatefulSet's first leader, which takes the free Lease and
// restores from the bucket the other still uploads to, ran at once. The chart now looks the
// other mode's workload up and refuses, leaving the release as it was; uninstall (the homes
// are kept) then install switches. kwok control plane, no pod needs to run.
func TestRedTeam36_HelmUpgradeRefusesModeSwitch(t *testing.T) {
	helm := helmBin(t)
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := helmRelease{helm: helm, kubeconfig: c.Kubeconfig, name: "agora-rt36", agora: "rt36-agora", agents: "rt36-agents"}
	deployment := "/apis/apps/v1/namespaces/" + r.agora + "/deployments/agora"
	statefulset := "/apis/apps/v1/namespaces/" + r.agora + "/statefulsets/agora"
	upgrade := func(values []string) error {
		args := append([]string{"upgrade", r.name, chartDir, "--kubeconfig", r.kubeconfig, "--namespace", r.agora}, r.values()...)
		_, err := runHelm(ctx, helm, append(args, values...)...)
		return err
	}
	for _, c2 := range []struct {
		name       string
		from, to   []string
		kept, made string
	}{
		{"to leader", nil, leaderValues, deployment, statefulset},
		{"from leader", leaderValues, nil, statefulset, deployment},
	} {
		r.run(ctx, t, append(append([]string{"install", r.name, chartDir, "--create-namespace"}, r.values()...), c2.from...)...)
		err := upgrade(c2.to)
		if err == nil || !strings.Contains(err.Error(), "switching in place would run both serves") {
			t.Errorf("%s: upgrade switching mode in place: %v, want refused", c2.name, err)
		}
		if objectUID(ctx, t, c, c2.kept) == "" || objectUID(ctx, t, c, c2.made) != "" {
			t.Errorf("%s: the refused upgrade changed the workload", c2.name)
		}
		// The same mode upgrades as before.
		if err := upgrade(append(c2.from, "--set", "image.digest=sha256:"+strings.Repeat("2", 64))); err != nil {
			t.Errorf("%s: an upgrade keeping the mode: %v", c2.name, err)
		}
		r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
	}
}

// TestRedTeam36_ExistingNamespacesMustBeRestricted: with namespaces.create=false the chart
// made neither namespace and took the docs' word that they enforce Pod Security "restricted".
// Before the fix it installed into an agents namespace without the label: the Role's create on
// Jobs there then let a token taken from serve run a privileged pod. Now the install names the
// namespace and refuses; labelled, it installs.
func TestRedTeam36_ExistingNamespacesMustBeRestricted(t *testing.T) {
	helm := helmBin(t)
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := helmRelease{helm: helm, kubeconfig: c.Kubeconfig, name: "agora-rt36-ns", agora: "rt36-own", agents: "rt36-own-agents"}
	namespace := func(name string, labels map[string]any) {
		t.Helper()
		if err := c.Apply(ctx, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name, "labels": labels}}); err != nil {
			t.Fatal(err)
		}
	}
	restricted := map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}
	namespace(r.agora, restricted)
	namespace(r.agents, map[string]any{"pod-security.kubernetes.io/enforce": "privileged"})
	args := append([]string{"install", r.name, chartDir, "--set", "namespaces.create=false", "--kubeconfig", r.kubeconfig, "--namespace", r.agora}, r.values()...)
	_, err := runHelm(ctx, helm, args...)
	if err == nil || !strings.Contains(err.Error(), "namespace "+r.agents+" (namespaces.agents) enforces Pod Security \"privileged\"") {
		t.Fatalf("install into a privileged agents namespace: %v, want refused naming it", err)
	}
	if objectUID(ctx, t, c, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+r.agents+"/roles/agora") != "" {
		t.Errorf("the refused install left its Role in %s", r.agents)
	}
	namespace(r.agents, restricted)
	if _, err := runHelm(ctx, helm, args...); err != nil {
		t.Fatalf("install into restricted namespaces: %v", err)
	}
	r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
}

// TestRedTeam36_AllowPrivateIPv6: egress.allowPrivate's schema takes any IPv6 address, and the
// chart joined them unquoted into a flow sequence: "::1" or "::ffff:10.0.0.1" is no plain
// scalar there, so agora.yaml did not parse ("did not find expected node content") and serve
// refused to start on a value the chart accepted. Each is quoted now, and agora's own parser
// reads back the prefixes as given.
func TestRedTeam36_AllowPrivateIPv6(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	want := []string{"::1", "fd00::/8", "::ffff:10.0.0.1", "10.0.0.0/8"}
	cfg, _ := renderedAgoraYAML(ctx, t, helm, "--set", "egress.allowPrivate={"+strings.Join(want, ",")+"}")
	c := config.Default(t.TempDir())
	if err := config.Parse("agora.yaml", []byte(cfg), c); err != nil {
		t.Fatalf("agora refuses the rendered agora.yaml: %v\n%s", err, cfg)
	}
	if !slices.Equal(c.Egress.AllowPrivate, want) {
		t.Errorf("egress.allow_private = %q, want %q", c.Egress.AllowPrivate, want)
	}
}

// TestRedTeam36_BucketCredentialsOnlyInServesEnv: in the chart's leader rendering (with a
// bucket, as TestHelmChart_NoSecretRendered's values) the bucket's credentials reach serve's
// container alone, and only as secretKeyRef: never a literal value, never the init container
// (which runs `agora init` and a shell over the ConfigMap and needs none), never an envFrom
// that would hand over every key of a Secret, and not in agora.yaml or any argument.
func TestRedTeam36_BucketCredentialsOnlyInServesEnv(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, leaderValues...)...)
	if err != nil {
		t.Fatal(err)
	}
	var pod any
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] == "StatefulSet" {
			pod = dig(obj, "spec", "template", "spec")
		}
		if (obj["kind"] == "ConfigMap" && strings.Contains(doc, "AWS_")) || strings.Contains(doc, "access_key_id:") {
			t.Errorf("a %v names the credentials' values:\n%s", obj["kind"], doc)
		}
	}
	if pod == nil {
		t.Fatal("the leader rendering has no StatefulSet")
	}
	inits, _ := dig(pod, "initContainers").([]any)
	ctrs, _ := dig(pod, "containers").([]any)
	for _, c := range append(slices.Clone(inits), ctrs...) {
		name := dig(c, "name")
		if dig(c, "envFrom") != nil {
			t.Errorf("container %v takes a whole Secret or ConfigMap as environment: %v", name, dig(c, "envFrom"))
		}
		args, _ := yaml.Marshal(map[string]any{"command": dig(c, "command"), "args": dig(c, "args")})
		if strings.Contains(string(args), "AWS_") || strings.Contains(string(args), "agora-s3") {
			t.Errorf("container %v's command names the credentials: %s", name, args)
		}
		envs, _ := dig(c, "env").([]any)
		for _, e := range envs {
			n, _ := dig(e, "name").(string)
			if !strings.HasPrefix(n, "AWS_") {
				continue
			}
			// serve and agora mcp beside it open the bucket; the init container never.
			if name != "agora" && name != "mcp" {
				t.Errorf("container %v gets %s", name, n)
			}
			if dig(e, "value") != nil || dig(e, "valueFrom", "secretKeyRef", "name") != "agora-s3" {
				t.Errorf("container %v's %s is not a reference to the Secret s3.credentialsSecret: %v", name, n, e)
			}
		}
	}
}

// TestRedTeam36_HelmUpgradeRefusesNamespaceMove: `helm upgrade` changing namespaces.agora.
// Before the fix it went through: the new serve started in the new namespace before the old
// was deleted, and the Lease is namespaced, so in leader mode two leaders held two Leases with
// their fences open, both writing the one bucket. The chart finds the release's own workload
// in another namespace (its Helm annotations) and refuses; nothing is made in the new one.
func TestRedTeam36_HelmUpgradeRefusesNamespaceMove(t *testing.T) {
	helm := helmBin(t)
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := helmRelease{helm: helm, kubeconfig: c.Kubeconfig, name: "agora-rt36-move", agora: "rt36-move", agents: "rt36-move-agents"}
	r.run(ctx, t, append([]string{"install", r.name, chartDir, "--create-namespace"}, append(r.values(), leaderValues...)...)...)
	moved := helmRelease{agora: "rt36-moved", agents: r.agents}
	args := append([]string{"upgrade", r.name, chartDir, "--kubeconfig", r.kubeconfig, "--namespace", r.agora}, append(moved.values(), leaderValues...)...)
	_, err := runHelm(ctx, helm, args...)
	if err == nil || !strings.Contains(err.Error(), "this release's serve runs in namespace "+r.agora) {
		t.Errorf("upgrade moving serve to %s: %v, want refused naming %s", moved.agora, err, r.agora)
	}
	if objectUID(ctx, t, c, "/apis/apps/v1/namespaces/"+moved.agora+"/statefulsets/agora") != "" {
		t.Errorf("the refused upgrade made a StatefulSet in %s", moved.agora)
	}
	r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
}

// TestRedTeam36_HelmUpgradeRefusesLeaseRename: `helm upgrade` renaming leader.lease went
// through before the fix: the StatefulSet rolls one pod at a time, so the first pod rolled (a
// standby) elects on the new Lease, which nobody holds, and leads while the old leader still
// holds the old one: two fences open, one bucket. The chart reads the running name from the
// Lease Role and refuses; the same name upgrades.
func TestRedTeam36_HelmUpgradeRefusesLeaseRename(t *testing.T) {
	helm := helmBin(t)
	c := k8stest.Shared(t, k8stest.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	r := helmRelease{helm: helm, kubeconfig: c.Kubeconfig, name: "agora-rt36-lease", agora: "rt36-lease", agents: "rt36-lease-agents"}
	r.run(ctx, t, append([]string{"install", r.name, chartDir, "--create-namespace"}, append(r.values(), leaderValues...)...)...)
	upgrade := func(extra ...string) error {
		args := append([]string{"upgrade", r.name, chartDir, "--kubeconfig", r.kubeconfig, "--namespace", r.agora}, append(r.values(), leaderValues...)...)
		_, err := runHelm(ctx, helm, append(args, extra...)...)
		return err
	}
	if err := upgrade("--set", "leader.lease=agora-leader-2"); err == nil || !strings.Contains(err.Error(), "the replicas lead on Lease agora-leader") {
		t.Errorf("upgrade renaming the Lease: %v, want refused", err)
	}
	if err := upgrade("--set", "leader.duration=15s"); err != nil {
		t.Errorf("upgrade keeping the Lease: %v", err)
	}
	r.run(ctx, t, "uninstall", r.name, "--wait", "--timeout", "2m")
}
