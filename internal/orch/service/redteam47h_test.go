package service_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRedTeam47H_SumsAreNoOracle: a decline names the variables whose sums differ from the
// taker's, so a process could guess a value of serve's environment (a proxy's password, an
// AGORA_* token), 8 bytes of sha256 at a time, and read the answer in the decline. Only a
// process that proves it may inspect serve (and so could read its /proc/PID/environ) ever
// gets that far: without the proof, a right guess and a wrong one get the same reason, which
// names no variable.
func TestRedTeam47H_SumsAreNoOracle(t *testing.T) {
	e, _ := handoffEnv(t)
	exe := filepath.Join(filepath.Dir(agoraBin), "agora-full")
	if abs, err := filepath.EvalSymlinks(exe); err == nil {
		exe = abs
	}
	// The right sum of serve's PATH, and a wrong one; the request's env is not serve's, so
	// Prepare would decline it for the environment and name what differs.
	var right string
	for _, s := range api.EnvSums(e.vars) {
		if strings.HasPrefix(s, "PATH=") {
			right = s
		}
	}
	if right == "" {
		t.Fatal("serve's environment has no PATH")
	}
	answers := map[string]string{}
	for name, sum := range map[string]string{"right": right, "wrong": "PATH=0123456789abcdef"} {
		body := fmt.Sprintf(`{"home":%q,"exe":%q,"env":"not-serve's","env_sums":[%q],"subagent":"ok","budget":{}}`, e.home, exe, sum)
		status, answer := e.postRaw(api.HandoffPath, []byte(body))
		if status != 409 {
			t.Fatalf("%s guess: status %d %s", name, status, answer)
		}
		if strings.Contains(answer, "PATH") || strings.Contains(answer, "differ") {
			t.Errorf("%s guess: an unproven caller is told what differs: %s", name, answer)
		}
		answers[name] = answer
	}
	if answers["right"] != answers["wrong"] {
		t.Errorf("a right and a wrong guess get different answers:\n%s\n%s", answers["right"], answers["wrong"])
	}
	if e.handoffs() != 0 {
		t.Errorf("serve took %d", e.handoffs())
	}
}
