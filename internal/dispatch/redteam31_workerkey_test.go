package dispatch_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestRedTeam31_LearnWorkerKeyOutOfReach (learn): the worker's gateway key lives
// only in the worker's memory, and the worker is non-dumpable. In a learn dispatch the agent's
// command, with every capability it holds, tries each way a process of the same uid reads
// another's memory or environment: the worker's (pid 1 in the sandbox) maps, mem, environ
// and its fd to the gateway. All refused; the agent holds no capability. (Held.)
func TestRedTeam31_LearnWorkerKeyOutOfReach(t *testing.T) {
	e := netEnv(t, nil)
	e.d.Egress.AllowPrivate = append(e.d.Egress.AllowPrivate, netip.MustParsePrefix("127.0.0.1/32"))
	e.capability("reader", "tools: [read_file]\n", nil)
	e.modelSubagent("learner", "openai", "reader")
	script := `grep CapEff /proc/self/status; tr '\0' ' ' < /proc/1/cmdline; echo; ` +
		`for f in maps mem environ syscall stack; do if head -c 1 /proc/1/$f >/dev/null 2>&1; then echo "read-$f"; fi; done; ` +
		`if ls /proc/1/fd >/dev/null 2>&1; then echo read-fd; fi; echo probed`
	var result string
	e.model(testAPIKey,
		openaitest.CallTool("run_command", mustJSON(t, map[string]any{"argv": []string{"sh", "-c", script}})),
		openaitest.Func(func(req openaitest.Request) openaitest.Reply {
			result = lastToolResult(t, req)
			return openaitest.Reply{Content: "done"}
		}),
	)
	r := e.run(dispatch.Request{Subagent: "learner", Envs: []string{"model"}, Learn: true, Input: []byte(`{"prompt":"probe"}`)})
	wantFinished(t, r)
	if !strings.Contains(result, "probed") || !strings.Contains(result, "agora-worker worker") {
		t.Fatalf("the probe did not run against the worker: %q", result)
	}
	if !strings.Contains(result, "CapEff:\t0000000000000000") {
		t.Errorf("the agent holds capabilities: %q", result)
	}
	if strings.Contains(result, "read-") {
		t.Errorf("the agent read the worker's process: %q", result)
	}
}
