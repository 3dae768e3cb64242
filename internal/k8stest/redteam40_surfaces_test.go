package k8stest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRedTeam40_SurfacePeersEmptySelectorsRefusedSchemaSkipped:
// web.from, mcp.from and metrics.from refused an empty peer or selector through the
// schema alone, so with --skip-schema-validation (which the chart otherwise guards against:
// names and ports stay in their arguments) {namespaceSelector: {}} rendered as a rule that
// admits every pod of every namespace, and {podSelector: {}} every pod of serve's namespace,
// to the port: for metrics.from, the listener that has no token. A peer that is not a map, a
// from that is not a list, or a selector key the API does not know were let through the same
// way. The chart now refuses each in the template too; a peer that names its sources renders.
func TestRedTeam40_SurfacePeersEmptySelectorsRefusedSchemaSkipped(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for _, s := range []string{"web", "mcp", "metrics"} {
		for name, from := range map[string]string{
			"every namespace":            `[{"namespaceSelector":{}}]`,
			"every pod of serve's":       `[{"podSelector":{}}]`,
			"empty matchLabels":          `[{"namespaceSelector":{"matchLabels":{}}}]`,
			"empty matchExpressions":     `[{"podSelector":{"matchExpressions":[]}}]`,
			"a pod label, any namespace": `[{"namespaceSelector":{},"podSelector":{"matchLabels":{"app":"x"}}}]`,
			"an empty peer":              `[{}]`,
			"a peer not a map":           `["namespaceSelector: {}"]`,
			"from not a list":            `{"namespaceSelector":{}}`,
			"a selector as a string":     `[{"namespaceSelector":"all"}]`,
		} {
			out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--skip-schema-validation", "--set-json", s+".from="+from)
			if err == nil {
				t.Errorf("%s.from, %s: rendered with the schema skipped:\n%s", s, name, policyOf(out))
			} else if !strings.Contains(err.Error(), s+".from") {
				t.Errorf("%s.from, %s: refused, but not naming %s.from: %v", s, name, s, err)
			}
		}
		ok := `[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}},"podSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["prometheus"]}]}},{"ipBlock":{"cidr":"10.1.2.0/24"}}]`
		if out, err := runHelm(ctx, helm, "template", "agora", chartDir, "--skip-schema-validation", "--set-json", s+".from="+ok); err != nil || !strings.Contains(out, "10.1.2.0/24") {
			t.Errorf("%s.from naming its sources: %v\n%s", s, err, out)
		}
	}
}

// policyOf is the NetworkPolicy document of a rendering, for a failure's message.
func policyOf(out string) string {
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.Contains(doc, "kind: NetworkPolicy") {
			return doc
		}
	}
	return out
}

// TestRedTeam40_MCPBucketCredentialsOnlyWhenUsed: the mcp container must not take the
// bucket's credentials whenever serve does (TestRedTeam36's "serve's
// container alone" widened to mcp). agora mcp opens the bucket for blobs (blobs.s3: its
// dispatches' blobs) and, without leader, to replicate agora.db should serve stop; with
// leader.enabled it never replicates (only the leading serve does, mcp.go), so with the
// replicas on a Lease and blobs on the volume it now gets no credentials at all: a token
// holder's MCP process cannot write the bucket the next leader restores from.
func TestRedTeam40_MCPBucketCredentialsOnlyWhenUsed(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		args []string
		want bool
	}{
		{"leader, blobs in the bucket", leaderValues, true},
		{"leader, blobs on the volume", append(slices.Clone(leaderValues), "--set", "blobs.s3=false"), false},
		{"one serve, replicated", []string{"--set", "replicate.enabled=true", "--set", "s3.endpoint=https://s3.example.invalid",
			"--set", "s3.bucket=team-agora", "--set", "s3.region=eu-west-1", "--set", "s3.credentialsSecret=agora-s3"}, true},
	} {
		var mcp any
		for _, o := range renderedObjects(ctx, t, helm, c.args...) {
			if o["kind"] == "StatefulSet" || o["kind"] == "Deployment" {
				mcp = container(dig(o, "spec", "template", "spec"), "mcp")
			}
		}
		if mcp == nil {
			t.Fatalf("%s: no mcp container", c.name)
		}
		var got []string
		envs, _ := dig(mcp, "env").([]any)
		for _, e := range envs {
			if n, _ := dig(e, "name").(string); strings.HasPrefix(n, "AWS_") {
				got = append(got, n)
			}
		}
		if (len(got) > 0) != c.want {
			t.Errorf("%s: the mcp container's bucket credentials %v, want them: %v", c.name, got, c.want)
		}
	}
}
