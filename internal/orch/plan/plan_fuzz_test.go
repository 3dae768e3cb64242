package plan_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/orch/plan"
	"github.com/agora-dev/agora/internal/strictyaml"
)

// FuzzParse parses arbitrary bytes: Parse never panics and fails only with located errors;
// whatever it accepts has a canonical form that parses back to an equal plan with the same
// digest, and resolves with every dependency a task of the plan.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		fullPlan,
		extendPlan,
		head + "  - {id: s, subagent: s}\n  - {id: f, fan_out: {from: s, select: 'output:x', template: {subagent: w, needs: {k: {from: f, select: patch}}}}}\n",
		fullCanonical,
		head + "  - {id: a, subagent: s, depends_on: [b]}\n  - {id: b, subagent: s, needs: {x: {from: a, select: patch}}}\n",
		head + "  - {id: a, subagent: s, locks: [r, {name: r, mode: shared}, [x], ~]}\n",
		head + "  - {id: a, subagent: s, input: {f: 1.5, s: \"\\N\\x7f\", n: [1, {a: [true]}]}}\n",
		head + "  - {id: a, subagent: s, retry: {max_attempts: 0, multiplier: 1e309, initial_backoff: 1h, max_backoff: 1m}}\n",
		"version: 1\nname: p\nconcurrency: 3\ndefaults: {env: [e], target: t, timeout: 1s, retry: {on_worker_failed: false}}\ntasks: [{id: a, subagent: 'x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}]\n",
		`{"version":1,"name":"p","tasks":[{"id":"a","subagent":"s","needs":{"k":{"from":"b","select":"output:a/b.txt"}}},{"id":"b","subagent":"s"}]}`,
		"version: 1\nname: p\ntasks:\n  - &a {id: a, subagent: s}\n  - *a\n",
		"version: 1\nname: p\nworkspace: app\nrevision: release/1\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\nworkspace: 'app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'\nrevision: 0123456789abcdef0123456789abcdef01234567\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\nrevision: main~1\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\nworkspace: [app]\nrevision: {r: 1}\ntasks: [{id: a, subagent: s}]\n",
		`{"version":1,"name":"p","workspace":"App","revision":"refs/heads/../x","tasks":[{"id":"a","subagent":"s"}]}`,
		head + "  - {id: a, subagent: s, grants: {egress: [a.example, \"*.b.example:443\", \"[2001:DB8::1]:8443\", {host: C.example, methods: [GET, GET], paths: [/x/]}, {host: d.example, methods: [], port: 0}]}}\n",
		"version: 1\nname: p\nqueue: nightly\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\nqueue: default\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\nqueue: [Nightly]\ntasks: [{id: a, subagent: s}]\n",
		"version: 1\nname: p\nbudget: {tokens: 1000, usd: 0.5, model_calls: 9}\ntasks: [{id: a, subagent: s, budget: {usd: 0.25}}, {id: b, subagent: s, budget: {tokens: 2000, usd: -1, model_calls: 1e3}}]\n",
		head + "  - {id: a, subagent: s, grants: {egress: [{host: a, paths: [/a/../b]}, {host: a, Host: b}, a.example:0443, 2001:db8::1, [x], ~]}}\n",
		"version: 1\nname: p\ndefaults: {verify: {command: [go, test, ./...], timeout: 10m, protect: ['**/*_test.go', '.github/**']}}\ntasks: [{id: a, subagent: s}, {id: b, subagent: s, verify: {command: [make, 'é x']}}]\n",
		head + "  - {id: a, subagent: s, verify: {command: [], timeout: 0s, protect: ['/x', 'a//b', a, a, '{a,b']}}\n",
		head + "  - {id: a, subagent: s}\n  - {id: b, subagent: s, base: [a]}\n  - {id: c, subagent: s, base: [b, a], depends_on: [a]}\n  - {id: f, fan_out: {from: a, select: 'output:x', template: {subagent: w, base: [c]}}}\n",
		head + "  - {id: a, subagent: s, base: [a, b, ~, [x]], needs: {base: {from: a, select: patch}}}\n  - {id: b, subagent: s, base: [a]}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := plan.Parse("f.yaml", src)
		if err != nil {
			var es strictyaml.Errors
			if !errors.As(err, &es) {
				t.Fatalf("error is %T, want strictyaml.Errors: %v", err, err)
			}
			if p != nil {
				t.Fatalf("Parse returned a plan with its errors")
			}
			return
		}
		c := p.Canonical()
		again, err := plan.Parse("canonical.json", c)
		if err != nil {
			t.Fatalf("Parse(Canonical) failed: %v\nsource: %q\ncanonical: %s", err, src, c)
		}
		if again.Digest() != p.Digest() {
			t.Fatalf("digest changed on round trip\nsource: %q\ncanonical: %s\nagain: %s", src, c, again.Canonical())
		}
		if diff := cmp.Diff(p, again, ignorePos); diff != "" {
			t.Fatalf("round trip (-parsed +reparsed):\n%s", diff)
		}
		ids := map[string]bool{}
		for _, task := range p.Tasks {
			ids[task.ID] = true
		}
		for _, r := range p.Resolve() {
			for _, d := range r.Deps {
				if !ids[d] || d == r.ID {
					t.Fatalf("task %q resolved with dependency %q", r.ID, d)
				}
			}
			if r.Retry.MaxAttempts < 1 || r.Retry.InitialBackoff > r.Retry.MaxBackoff || r.Retry.OnWorkerFailed == nil {
				t.Fatalf("task %q resolved with retry %+v", r.ID, r.Retry)
			}
		}
	})
}

// FuzzBackoff checks that Backoff stays within [0, max] for any policy, attempt and rnd.
func FuzzBackoff(f *testing.F) {
	f.Add(int64(time.Second), int64(time.Minute), 2.0, 3, 0.5)
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), 10.0, 1000, 0.999999)
	f.Add(int64(-1), int64(-1), -1.0, -1, -1.0)
	f.Add(int64(0), int64(0), 0.0, 0, 0.0)
	f.Add(int64(1), int64(1), math.Inf(1), math.MaxInt, math.NaN())
	f.Fuzz(func(t *testing.T, initial, maxB int64, mult float64, attempt int, u float64) {
		r := plan.Retry{InitialBackoff: time.Duration(initial), MaxBackoff: time.Duration(maxB), Multiplier: mult}
		b := r.Backoff(attempt, fixed(u))
		limit := r.MaxBackoff
		if limit == 0 {
			limit = plan.DefaultMaxBackoff
		}
		if b < 0 || b > max(limit, 0) {
			t.Fatalf("Backoff(%d) = %s for %+v, rnd %v: outside [0, %s]", attempt, b, r, u, limit)
		}
	})
}
