// Package chartschema holds the Helm chart's values.schema.json to agora's own checks (tests
// only): what the schema takes for a value that reaches agora.yaml, agora takes too. It is a
// package of its own, apart from k8stest (which links client-go and builds a control plane),
// so its fuzz target builds with only the config and S3 checks it compares against.
package chartschema

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/s3"
)

// chartDir is agora's Helm chart.
const chartDir = "../../../deploy/helm/agora"

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

// dig walks obj by keys (a string for a map, an int for a list), nil when a step is absent.
func dig(obj any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := obj.(map[string]any)
			obj = m[k]
		case int:
			l, _ := obj.([]any)
			if k >= len(l) {
				return nil
			}
			obj = l[k]
		}
	}
	return obj
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
