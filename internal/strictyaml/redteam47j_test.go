package strictyaml

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// unknownKeys is a mapping of n distinct keys no struct field names.
func unknownKeys(n int) []byte {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":0`)
	}
	b.WriteString("}")
	return []byte(b.String())
}

// TestRedTeam47J_ManyUnknownKeysLinear: past maxErrors a struct's unknown keys are still read
// (and marked, as the YAML path does); the fast path's list of keys seen grew with each, so a
// 16 MiB plan of distinct unknown keys (two million) cost hours, quadratic where the YAML
// path is linear. 40,000 keys took 20s against the YAML path's 1.2s.
func TestRedTeam47J_ManyUnknownKeysLinear(t *testing.T) {
	src := unknownKeys(10000)
	if !matchYAML(t, src, func() any { return new(jDoc) }) {
		t.Fatal("the fast path gave up")
	}
	best := func(f func()) time.Duration {
		var m time.Duration
		for i := range 2 {
			t0 := time.Now()
			f()
			if d := time.Since(t0); i == 0 || d < m {
				m = d
			}
		}
		return m
	}
	fast := best(func() { _, _ = Decode("f.json", src, new(jDoc)) })
	slow := best(func() { _, _ = DecodeYAML("f.json", src, new(jDoc)) })
	t.Logf("fast %v, yaml %v", fast, slow)
	if fast > slow+200*time.Millisecond {
		t.Fatalf("fast path %v for 10,000 unknown keys, the YAML path %v", fast, slow)
	}
}
