package config_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
)

// TestTarget_WarmPool: a kubernetes target's warm: N pods are agent-sandbox's
// SandboxWarmPool, so warm: N implies warm_pool on `backend: agent-sandbox`. Either is refused
// where it could mean nothing or be misread: warm: N or warm_pool on the jobs backend (which
// keeps no warm pods), warm_pool without warm: N (a pool of no size), warm_pool: false with
// warm: N (warm pods and no pool: never read as unset), and warm_pool, true or false, on a
// provider that is not kubernetes.
func TestTarget_WarmPool(t *testing.T) {
	sandbox := func(extra string) string {
		return strings.Replace(k8sPullFile(extra), "backend: jobs", "backend: agent-sandbox", 1)
	}
	c := config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(sandbox("    warm: 2\n    warm_pool: true\n")), c); err != nil {
		t.Fatal(err)
	}
	if k, _ := c.Target("k"); !k.KeepsPool() || k.Warm != 2 {
		t.Errorf("warm_pool %v, warm %d: want true, 2", k.KeepsPool(), k.Warm)
	}
	c = config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(sandbox("    warm: 2\n")), c); err != nil {
		t.Fatal(err)
	}
	if k, _ := c.Target("k"); !k.KeepsPool() {
		t.Error("warm: 2 on backend: agent-sandbox keeps warm_pool off: want it implied")
	}
	c = config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(sandbox("")), c); err != nil {
		t.Fatal(err)
	}
	if k, _ := c.Target("k"); k.KeepsPool() {
		t.Error("warm_pool on without warm: N: want off")
	}
	// An explicit false without warm: N says what warm: 0 says: no pool.
	c = config.Default("/h")
	if err := config.Parse("agora.yaml", []byte(sandbox("    warm_pool: false\n")), c); err != nil {
		t.Fatal(err)
	}
	if k, _ := c.Target("k"); k.KeepsPool() {
		t.Error("warm_pool: false without warm: N keeps a pool: want none")
	}
	for name, tt := range map[string]struct{ yaml, want string }{
		"jobs backend":          {k8sPullFile("    warm: 2\n    warm_pool: true\n"), "warm: 2 warm pods are kept in agent-sandbox's SandboxWarmPool, which the Job backend has not: set backend: agent-sandbox"},
		"jobs backend, warm":    {k8sPullFile("    warm: 1\n"), "warm: 1 warm pods are kept in agent-sandbox's SandboxWarmPool, which the Job backend has not: set backend: agent-sandbox"},
		"jobs backend, no warm": {k8sPullFile("    warm_pool: true\n"), "warm_pool: a SandboxWarmPool is agent-sandbox's: set backend: agent-sandbox"},
		"no warm":               {sandbox("    warm_pool: true\n"), "warm_pool: says how warm: N pods are kept, and warm is 0"},
		"explicit false":        {sandbox("    warm: 2\n    warm_pool: false\n"), "warm_pool: false, with warm: 2: a kubernetes target's warm pods are kept in agent-sandbox's SandboxWarmPool alone, so the two contradict each other: set warm: 0 to start every dispatch cold, or remove warm_pool: false"},
		"explicit false, jobs":  {k8sPullFile("    warm: 1\n    warm_pool: false\n"), "warm_pool: false, with warm: 1"},
		"docker, false":         {"targets:\n  d:\n    provider: docker\n    image: box" + digest + "\n    warm: 1\n    warm_pool: false\n", "warm_pool: not a setting of provider docker"},
		"docker":                {"targets:\n  d:\n    provider: docker\n    image: box" + digest + "\n    warm: 1\n    warm_pool: true\n", "warm_pool: not a setting of provider docker"},
		"local":                 {"targets:\n  l:\n    warm: 1\n    warm_pool: true\n", "warm_pool: not a setting of provider local"},
	} {
		err := config.Parse("agora.yaml", []byte(tt.yaml), config.Default("/h"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Parse = %v, want %q", name, err, tt.want)
		}
	}
}
