package k8stest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/s3"
)

// agoraRefuses reports why agora refuses agora.yaml cfg at serve's start, or nil: its
// parser (config.Parse), then what serve checks when it builds the bucket's clients
// (s3.Config.Validate, each of blobs.s3 and replicate.s3) and its egress policy.
func agoraRefuses(t *testing.T, cfg string) error {
	t.Helper()
	c := config.Default(t.TempDir())
	if err := config.Parse("agora.yaml", []byte(strings.ReplaceAll(cfg, "@POD_NAME@", "agora-0")), c); err != nil {
		return err
	}
	for _, l := range []*config.S3Location{c.Blobs.S3, c.Replicate.S3} {
		if l == nil {
			continue
		}
		if err := (s3.Config{Endpoint: l.Endpoint, Bucket: l.Bucket, Prefix: l.Prefix, Region: l.Region}).Validate(); err != nil {
			return err
		}
	}
	_, err := c.Egress.Prefixes()
	return err
}

// bucketValues turn on a bucket for one serve (replicate, blobs).
var bucketValues = []string{"--set", "replicate.enabled=true", "--set", "blobs.s3=true", "--set", "s3.endpoint=https://s3.example",
	"--set", "s3.bucket=team-agora", "--set", "s3.credentialsSecret=agora-s3"}

func with(base []string, more ...string) []string { return append(slices.Clone(base), more...) }

// TestHelmChart_RefusesStartFailures: values that passed
// values.schema.json and `helm install`, and that agora refused only when serve started (the
// pod crash-looping with the release "deployed"): a replicate.lag or leader.duration outside
// agora's bounds, a bucket name with two dots, a prefix with an empty, . or .. segment, an
// egress.allowPrivate entry that is no address or prefix (999.1.1.1, /33), a target pull
// Secret named agora-* (agora's own Secrets) or with a label over 63, a Lease name with a
// label over 63; and with two replicas on a Lease, any IPv6 address beginning :: in
// allowPrivate, which ha/config.yaml wrote unquoted (the fix of TestRedTeam36_AllowPrivateIPv6
// reached config.yaml alone). Each case first shows it is real: with the schema skipped the
// chart renders an agora.yaml agora refuses. Then the schema refuses it, naming the value.
// The values at each bound are accepted by the schema and by agora.
func TestHelmChart_RefusesStartFailures(t *testing.T) {
	helm := helmBin(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	long := strings.Repeat("a", 64)
	for _, c := range []struct {
		name string
		args []string
		path string // what the schema's refusal names
	}{
		{"lag under 100ms", with(bucketValues, "--set", "replicate.lag=50ms"), "/replicate/lag"},
		{"lag over 1h", with(bucketValues, "--set", "replicate.lag=61m"), "/replicate/lag"},
		{"lag 2h", with(bucketValues, "--set", "replicate.lag=2h"), "/replicate/lag"},
		{"lease duration 1999ms", with(leaderValues, "--set", "leader.duration=1999ms"), "/leader/duration"},
		{"lease duration 301s", with(leaderValues, "--set", "leader.duration=301s"), "/leader/duration"},
		{"lease duration 6m", with(leaderValues, "--set", "leader.duration=6m"), "/leader/duration"},
		{"bucket a..b", with(bucketValues, "--set", "s3.bucket=team..agora"), "/s3/bucket"},
		{"prefix a//b", with(bucketValues, "--set", "s3.prefix=prod//x"), "/s3/prefix"},
		{"prefix climbing", with(bucketValues, "--set", "s3.prefix=prod/../other"), "/s3/prefix"},
		{"prefix dot", with(bucketValues, "--set", "s3.prefix=prod/."), "/s3/prefix"},
		{"allowPrivate 999.1.1.1", []string{"--set", "egress.allowPrivate={999.1.1.1}"}, "/egress/allowPrivate/0"},
		{"allowPrivate 1.2.3", []string{"--set", "egress.allowPrivate={1.2.3}"}, "/egress/allowPrivate/0"},
		{"allowPrivate /33", []string{"--set", "egress.allowPrivate={10.0.0.0/33}"}, "/egress/allowPrivate/0"},
		{"allowPrivate ::/200", []string{"--set", "egress.allowPrivate={::/200}"}, "/egress/allowPrivate/0"},
		{"allowPrivate :::", []string{"--set", "egress.allowPrivate={:::}"}, "/egress/allowPrivate/0"},
		{"pull Secret agora-*", []string{"--set", "target.imagePullSecrets={agora-regcred}"}, "/target/imagePullSecrets/0"},
		{"pull Secret label 64", []string{"--set", "target.imagePullSecrets={" + long + "}"}, "/target/imagePullSecrets/0"},
		{"lease label 64", with(leaderValues, "--set", "leader.lease="+long), "/leader/lease"},
	} {
		cfg, _ := renderedAgoraYAML(ctx, t, helm, with(c.args, "--skip-schema-validation")...)
		if err := agoraRefuses(t, cfg); err == nil {
			t.Errorf("%s: not a start failure: agora takes the chart's agora.yaml:\n%s", c.name, cfg)
		} else {
			t.Logf("%s: agora at start: %v", c.name, err)
		}
		out, err := runHelm(ctx, helm, append([]string{"template", "agora", chartDir}, c.args...)...)
		if err == nil {
			t.Errorf("%s: the schema takes it:\n%.400s", c.name, out)
		} else if !strings.Contains(err.Error(), "at '"+c.path+"'") {
			t.Errorf("%s: refused, but not naming %s: %v", c.name, c.path, err)
		}
	}

	// With two replicas on a Lease an IPv6 address beginning "::" broke agora.yaml; the schema
	// takes it (it is one), so the template quotes it now.
	cfg, _ := renderedAgoraYAML(ctx, t, helm, with(leaderValues, "--set", "egress.allowPrivate={::1,::ffff:10.0.0.1,fd00::/8}")...)
	if err := agoraRefuses(t, cfg); err != nil {
		t.Errorf("two replicas, IPv6 allowPrivate: agora refuses the chart's agora.yaml: %v\n%s", err, cfg)
	}

	// The bounds themselves, and values agora takes that look odd, pass both.
	for _, args := range [][]string{
		with(bucketValues, "--set", "replicate.lag=100ms", "--set", "s3.bucket=a.-b", "--set", "s3.prefix=a/.b/c_/"),
		with(bucketValues, "--set", "replicate.lag=1h", "--set", "s3.prefix=a../b..", "--set", "s3.endpoint=http://10.0.0.5:65535"),
		with(bucketValues, "--set", "replicate.lag=3600000ms", "--set", "s3.bucket=abc"),
		with(leaderValues, "--set", "leader.duration=2s", "--set", "egress.allowPrivate={0.0.0.0/0,255.255.255.255,::/0,1:2:3:4:5:6:7:8/128,1:2:3:4:5:6:1.2.3.4}"),
		with(leaderValues, "--set", "leader.duration=300000ms", "--set", "leader.lease="+long[:63]+"."+long[:63]),
		with(leaderValues, "--set", "leader.duration=5m", "--set", "target.imagePullSecrets={regcred,agora}"),
	} {
		cfg, _ := renderedAgoraYAML(ctx, t, helm, args...)
		if err := agoraRefuses(t, cfg); err != nil {
			t.Errorf("%v: agora refuses what the schema takes: %v", args, err)
		}
	}
}
