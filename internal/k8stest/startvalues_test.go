package k8stest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"regexp"
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

// schemaPatterns are the patterns values.schema.json gives the values checked against agora
// below, compiled by Go's regexp (RE2, the dialect helm's validator uses).
func schemaPatterns(t testing.TB) map[string]*regexp.Regexp {
	t.Helper()
	b, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string]*regexp.Regexp{}
	for name, path := range map[string][]any{
		"allowPrivate":  {"properties", "egress", "properties", "allowPrivate", "items", "pattern"},
		"lag":           {"$defs", "lag", "pattern"},
		"leaseDuration": {"$defs", "leaseDuration", "pattern"},
		"bucket":        {"properties", "s3", "properties", "bucket", "anyOf", 1, "pattern"},
		"prefix":        {"properties", "s3", "properties", "prefix", "pattern"},
		"dnsSubdomain":  {"$defs", "dnsSubdomain", "pattern"},
	} {
		p, ok := dig(s, path...).(string)
		if !ok {
			t.Fatalf("values.schema.json has no pattern at %v", path)
		}
		out[name] = regexp.MustCompile(p)
	}
	return out
}

// TestHelmChart_DurationPatternsAreAgoras: replicate.lag's and leader.duration's patterns
// take a duration exactly when agora's bounds do (100ms to 1h, 2s to 5m), for every count of
// each unit up to past the bound.
func TestHelmChart_DurationPatternsAreAgoras(t *testing.T) {
	re := schemaPatterns(t)
	for _, unit := range []struct {
		suffix string
		d      time.Duration
		max    int
	}{{"ms", time.Millisecond, 3_700_000}, {"s", time.Second, 4000}, {"m", time.Minute, 100}, {"h", time.Hour, 5}} {
		for n := 0; n <= unit.max; n++ {
			if unit.suffix == "ms" && n > 12_000 && n%97 != 0 && !(n > 3_599_000 && n < 3_601_000) && !(n > 299_000 && n < 301_000) {
				continue // every count near the bounds, a sample between
			}
			v, d := fmt.Sprintf("%d%s", n, unit.suffix), time.Duration(n)*unit.d
			if got, want := re["lag"].MatchString(v), d >= 100*time.Millisecond && d <= time.Hour; got != want {
				t.Errorf("replicate.lag %s: the schema takes it %v, agora %v", v, got, want)
			}
			if got, want := re["leaseDuration"].MatchString(v), d >= 2*time.Second && d <= 5*time.Minute; got != want {
				t.Errorf("leader.duration %s: the schema takes it %v, agora %v", v, got, want)
			}
		}
	}
}

// TestHelmChart_AllowPrivatePatternTakesAddresses: every address and prefix as Go prints it
// (IPv4, IPv6, IPv4-mapped, each prefix length) is taken by the schema, so the pattern that
// refuses what agora refuses refuses nothing agora takes in its usual spellings.
func TestHelmChart_AllowPrivatePatternTakesAddresses(t *testing.T) {
	re := schemaPatterns(t)["allowPrivate"]
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var a netip.Addr
		switch i % 4 {
		case 0:
			a = netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())})
		case 1:
			var b [16]byte
			for j := range b {
				if rng.IntN(3) > 0 { // runs of zeros, so "::" is used
					b[j] = byte(rng.Uint32())
				}
			}
			a = netip.AddrFrom16(b)
		case 2:
			var b [16]byte
			for j := rng.IntN(16); j < 16; j++ {
				b[j] = byte(rng.Uint32())
			}
			a = netip.AddrFrom16(b)
		default:
			a = netip.AddrFrom16(netip.AddrFrom4([4]byte{10, byte(i), byte(i >> 8), 1}).As16()) // ::ffff:10.x.y.1
		}
		for _, s := range []string{a.String(), netip.PrefixFrom(a, rng.IntN(a.BitLen()+1)).Masked().String()} {
			if !re.MatchString(s) {
				t.Fatalf("egress.allowPrivate %q: agora takes it, the schema refuses it", s)
			}
		}
	}
}

// FuzzChartSchemaIsAgoras: what values.schema.json takes for a value that reaches agora.yaml,
// agora takes too: an egress.allowPrivate entry parses as agora's prefix, a bucket and a
// prefix pass the S3 client's checks, a DNS name passes agora's Lease and pull-Secret name
// check.
func FuzzChartSchemaIsAgoras(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "::1", "::ffff:10.0.0.1", "1:2:3:4:5:6:7::", "1::", "999.1.1.1", "a..b", "a.-b", "prod/../x",
		"prod//", "a/.b/", "fd00::/8", "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "1::2:3:4:5:6:7", "01.2.3.4"} {
		f.Add(s)
	}
	re := schemaPatterns(f)
	home := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		if re["allowPrivate"].MatchString(s) && len(s) <= 64 {
			if _, err := (config.Egress{AllowPrivate: []string{s}}).Prefixes(); err != nil {
				t.Errorf("allowPrivate %q: the schema takes it, agora refuses it: %v", s, err)
			}
		}
		if re["bucket"].MatchString(s) && len(s) >= 3 && len(s) <= 63 {
			if err := s3.CheckBucketName(s); err != nil {
				t.Errorf("bucket %q: the schema takes it, agora refuses it: %v", s, err)
			}
		}
		if re["prefix"].MatchString(s) && len(s) <= 200 {
			if err := s3.CheckPrefix(s); err != nil {
				t.Errorf("prefix %q: the schema takes it, agora refuses it: %v", s, err)
			}
		}
		if re["dnsSubdomain"].MatchString(s) && len(s) <= 253 {
			c := config.Default(home)
			y := fmt.Sprintf("leader: {lease: %q, namespace: agora}\n", s)
			if err := config.Parse("agora.yaml", []byte(y), c); err != nil {
				t.Errorf("lease %q: the schema takes it, agora refuses it: %v", s, err)
			}
		}
	})
}
