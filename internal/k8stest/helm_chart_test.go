package k8stest_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agora-dev/agora/internal/config"
)

// chartDir is the chart, from this package's directory.
const chartDir = "../../deploy/helm/agora"

// helmBin is the helm scripts/helm-tools.sh builds ($HELM overrides it), or t skips saying how
// to get it.
func helmBin(t *testing.T) string {
	t.Helper()
	p := os.Getenv("HELM")
	if p == "" {
		abs, err := filepath.Abs("../../.cache/helm/bin/helm")
		if err != nil {
			t.Fatal(err)
		}
		p = abs
	}
	if _, err := os.Stat(p); err != nil {
		t.Skip("SKIP: helm is missing (" + p + "): run scripts/helm-tools.sh (make helm-tools)")
	}
	return p
}

// runHelm runs helm with args and returns its stdout, and its error with stderr in it.
func runHelm(ctx context.Context, helm string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No repository, cache or configuration of this machine's user is read or written.
	dir, err := os.MkdirTemp("", "helm-home-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+dir+"/config", "HELM_CACHE_HOME="+dir+"/cache", "HELM_DATA_HOME="+dir+"/data")
	if err := cmd.Run(); err != nil {
		return stdout.String(), &helmError{args: args, err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type helmError struct {
	args   []string
	err    error
	stderr string
}

func (e *helmError) Error() string {
	return "helm " + strings.Join(e.args, " ") + ": " + e.err.Error() + "\n" + e.stderr
}

// leaderValues turn on two replicas on a Lease with the bucket they need.
var leaderValues = []string{
	"--set", "leader.enabled=true", "--set", "replicate.enabled=true", "--set", "blobs.s3=true",
	"--set", "s3.endpoint=https://s3.eu-west-1.amazonaws.com", "--set", "s3.bucket=team-agora",
	"--set", "s3.prefix=prod/", "--set", "s3.region=eu-west-1", "--set", "s3.credentialsSecret=agora-s3",
}

// TestHelmChart_RenderingIsDeployKubernetes: deploy/kubernetes/*.yaml are the chart's rendering
// with its default values and deploy/kubernetes/ha/*.yaml its rendering with values-ha.yaml,
// byte for byte (scripts/helm-render.sh into a scratch directory), and the directories hold
// nothing else, so the manifests' tests (TestRealNodeDeployManifests, the leader's kill on the
// real kubelet, the attack tests) prove the chart's renderings. Fix a failure with
// `make helm-render`.
func TestHelmChart_RenderingIsDeployKubernetes(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, "../../scripts/helm-render.sh", out)
	cmd.Env = append(os.Environ(), "HELM="+helm)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/helm-render.sh: %v\n%s", err, b)
	}
	for _, sub := range []string{".", "ha"} {
		rendered, _ := filepath.Glob(filepath.Join(out, sub, "*.yaml"))
		written, _ := filepath.Glob(filepath.Join("../../deploy/kubernetes", sub, "*.yaml"))
		names := func(paths []string) []string {
			var s []string
			for _, p := range paths {
				s = append(s, filepath.Base(p))
			}
			return s
		}
		if len(rendered) == 0 || !slices.Equal(names(rendered), names(written)) {
			t.Errorf("deploy/kubernetes/%s holds %v, the chart renders %v: run make helm-render", sub, names(written), names(rendered))
		}
		for _, p := range rendered {
			rel := filepath.Join(sub, filepath.Base(p))
			want, _ := os.ReadFile(p)
			got, err := os.ReadFile(filepath.Join("../../deploy/kubernetes", rel))
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("deploy/kubernetes/%s is not the chart's rendering (%v): run make helm-render", rel, err)
			}
		}
	}
}

// TestHelmChart_Lint: `helm lint --strict` passes on the chart with its default values and with
// two replicas on a Lease.
func TestHelmChart_Lint(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for name, args := range map[string][]string{"defaults": nil, "leader": leaderValues} {
		out, err := runHelm(ctx, helm, append([]string{"lint", "--strict", chartDir}, args...)...)
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
	}
}

// TestHelmChart_RefusesValues: the attacks on the chart's values, each of which must fail the
// rendering (so `helm install` and `helm upgrade` too) with a message naming it: an image by
// tag (unpinned: whatever the registry serves next), a name carrying YAML into agora.yaml or a
// manifest (a newline, a flow-map brace), an unknown key (a typo silently ignored), one
// namespace for serve and its dispatches, a Lease without the replica it restores from, a
// bucket without credentials, and a tag with the schema skipped.
func TestHelmChart_RefusesValues(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"agora image by tag", []string{"--set", "image.digest=latest"}, "image.digest"},
		{"worker image by tag", []string{"--set", "target.workerImage.digest=sha256:abc"}, "workerImage"},
		{"repository with a tag", []string{"--set", "image.repository=registry.example/agora:v1"}, "image.repository"},
		{"repository with a digest", []string{"--set", "target.image.repository=r.example/t@sha256:00"}, "target.image.repository"},
		{"namespace injecting YAML", []string{"--set-string", "namespaces.agents=agents\n  kubeconfig: /etc/x"}, "namespaces.agents"},
		{"pull secret closing the list", []string{"--set-string", "target.imagePullSecrets[0]=a]\n    provider: local"}, "imagePullSecrets"},
		{"serve's pull secret as a map", []string{"--set-string", "imagePullSecrets[0]=a}, {name: b"}, "imagePullSecrets"},
		{"lease name injecting", []string{"--set-string", "leader.lease=x]\n  verbs: ['*']"}, "leader.lease"},
		{"unknown key", []string{"--set", "imagee.digest=x"}, "imagee"},
		{"one namespace", []string{"--set", "namespaces.agents=agora"}, "must differ"},
		{"leader without replica", []string{"--set", "leader.enabled=true"}, "leader.enabled needs replicate.enabled"},
		{"bucket without credentials", []string{"--set", "blobs.s3=true", "--set", "s3.endpoint=https://s3.example", "--set", "s3.bucket=team-agora"}, "credentialsSecret"},
		{"endpoint with a password", []string{"--set", "s3.endpoint=https://k:s@s3.example"}, "s3.endpoint"},
		{"tag, schema skipped", []string{"--skip-schema-validation", "--set", "image.digest=latest"}, "pinned by digest"},
	} {
		out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, c.args...)...)
		if err == nil {
			t.Errorf("%s: rendered:\n%s", c.name, out)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: refused, but not naming %q: %v", c.name, c.want, err)
		}
	}
}

// TestHelmChart_NoSecretRendered: whatever the values, the chart makes no Secret and puts no
// credential in agora.yaml: the bucket's credentials reach serve as secretKeyRef environment
// from a Secret the operator makes, and the release's records (which hold the rendering) carry
// names only.
func TestHelmChart_NoSecretRendered(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for name, args := range map[string][]string{"defaults": nil, "leader": leaderValues} {
		out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, args...)...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, doc := range strings.Split(out, "\n---\n") {
			if strings.Contains(doc, "\nkind: Secret\n") {
				t.Errorf("%s: the chart renders a Secret:\n%s", name, doc)
			}
		}
		if name == "leader" {
			for _, want := range []string{"secretKeyRef: {name: agora-s3, key: secret_access_key}", "kind: StatefulSet", "resourceNames: [agora-leader]", "leader: {lease: agora-leader, namespace: agora"} {
				if !strings.Contains(out, want) {
					t.Errorf("leader: the rendering lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "kind: Deployment") {
				t.Errorf("leader: a Deployment beside the StatefulSet would be a second serve")
			}
		}
	}
}

// renderedAgoraYAML renders the chart with args and returns agora.yaml of its ConfigMap, and
// every document's kind.
func renderedAgoraYAML(ctx context.Context, t *testing.T, helm string, args ...string) (string, []string) {
	t.Helper()
	out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var cfg string
	var kinds []string
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the rendering is not YAML: %v\n%s", err, out)
		}
		if obj == nil {
			continue
		}
		kinds = append(kinds, obj["kind"].(string))
		if obj["kind"] == "ConfigMap" {
			cfg, _ = dig(obj, "data", "agora.yaml").(string)
		}
	}
	return cfg, kinds
}

// TestHelmChart_AgoraYAMLIsAgoras: agora.yaml as the chart renders it, with the default values,
// with every value that reaches it set, and with two replicas on a Lease, is accepted by
// agora's own parser (config.Parse: unknown keys, names, the bucket, the lease), so no value
// renders a configuration serve refuses at its start. extraConfig is appended inside the
// ConfigMap's agora.yaml whatever it holds: a document separator and a Secret in it stay text
// of agora.yaml (the rendering has no Secret), and a key the chart already writes is refused by
// agora as a duplicate, never taken over.
func TestHelmChart_AgoraYAMLIsAgoras(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	everything := []string{
		"--set", "target.name=gpu_pool", "--set", "target.imagePullSecrets={regcred,other}",
		"--set", "target.imagePullPolicy=Always", "--set", "gateway.port=9443", "--set", "replicate.keepGenerations=3",
		"--set", "leader.duration=20s", "--set", "egress.allowPrivate={10.0.0.0/8,fd00::/8}",
		"--set", "extraConfig=retention: {logs: 30d}",
	}
	for name, args := range map[string][]string{
		"defaults": nil, "everything": append(slices.Clone(leaderValues), everything...), "leader": leaderValues,
		"bucket, one serve": {"--set", "blobs.s3=true", "--set", "replicate.enabled=true", "--set", "s3.endpoint=http://10.20.0.5:7070", "--set", "s3.bucket=agora", "--set", "s3.credentialsSecret=s3", "--set", "egress.allowPrivate={10.20.0.5/32}"},
	} {
		cfg, _ := renderedAgoraYAML(ctx, t, helm, args...)
		// The init container writes each pod's name over @POD_NAME@ (two replicas on a Lease).
		cfg = strings.ReplaceAll(cfg, "@POD_NAME@", "agora-0")
		if err := config.Parse("agora.yaml", []byte(cfg), config.Default(t.TempDir())); err != nil {
			t.Errorf("%s: agora refuses the chart's agora.yaml: %v\n%s", name, err, cfg)
		}
	}

	// A values file: --set would split the value at its commas.
	vals := filepath.Join(t.TempDir(), "values.yaml")
	b, err := yaml.Marshal(map[string]string{"extraConfig": "retention: {logs: 30d}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: agora-injected, namespace: agora}\n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vals, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, kinds := renderedAgoraYAML(ctx, t, helm, "-f", vals)
	if slices.Contains(kinds, "Secret") || !strings.Contains(cfg, "kind: Secret") {
		t.Errorf("extraConfig left agora.yaml: kinds %v\nagora.yaml:\n%s", kinds, cfg)
	}
	cfg, _ = renderedAgoraYAML(ctx, t, helm, "--set-string", "extraConfig=targets: {k8s: {provider: local}}")
	if err := config.Parse("agora.yaml", []byte(cfg), config.Default(t.TempDir())); err == nil {
		t.Errorf("agora takes extraConfig's second targets over the chart's:\n%s", cfg)
	} else {
		t.Logf("a duplicate key in extraConfig: %v", err)
	}
}
