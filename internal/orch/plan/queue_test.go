package plan_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/config"
	"github.com/agora-dev/agora/internal/orch/plan"
)

// A plan names its queue; the default queue, written or left out, is the same plan with the
// digest a plan had before queues existed.
func TestParse_Queue(t *testing.T) {
	without := mustParse(t, fullPlan)
	if got, want := without.Digest(), "sha256:10876cb4049d572cd6db6992317acaad4d08ef18cd6ed866f2a62a609baf376a"; got != want {
		t.Fatalf("a plan without a queue changed its digest: %s, want %s", got, want)
	}
	named := mustParse(t, strings.Replace(fullPlan, "name: nightly-fixes\n", "name: nightly-fixes\nqueue: default\n", 1))
	if named.Digest() != without.Digest() || named.QueueName() != plan.DefaultQueue || without.QueueName() != plan.DefaultQueue {
		t.Errorf("queue: default gives digest %s queue %q, want %s and %q", named.Digest(), named.QueueName(), without.Digest(), plan.DefaultQueue)
	}
	nightly := mustParse(t, strings.Replace(fullPlan, "name: nightly-fixes\n", "name: nightly-fixes\nqueue: nightly\n", 1))
	if nightly.QueueName() != "nightly" || nightly.Digest() == without.Digest() {
		t.Errorf("queue: nightly gives queue %q, digest %s (the same as without: %v)", nightly.QueueName(), nightly.Digest(), nightly.Digest() == without.Digest())
	}
	c := nightly.Canonical()
	if !strings.Contains(string(c), `"name":"nightly-fixes","queue":"nightly","tasks"`) {
		t.Errorf("canonical form does not hold the queue in key order: %s", c)
	}
	again, err := plan.Parse("c.json", c)
	if err != nil || again.QueueName() != "nightly" || again.Digest() != nightly.Digest() {
		t.Errorf("canonical form parses to queue %v digest %v (err %v)", again.QueueName(), again.Digest(), err)
	}
}

// An unknown queue is refused with every other problem, naming the declared queues; a name
// wrong in form is reported and not looked up.
func TestValidate_Queue(t *testing.T) {
	refs := &fakeRefs{subagents: []string{"s"}, queues: []string{"default", "nightly"}}
	_, err := plan.Validate(t.Context(), "p.yaml", []byte("version: 1\nname: p\nqueue: nighty\ntasks: [{id: a, subagent: nobody}]\n"), refs)
	want := "p.yaml:3: queue: queue \"nighty\" not found; known: default, nightly\n" +
		"p.yaml:4: tasks[0].subagent: subagent \"nobody\" not found; known: s"
	if err == nil || err.Error() != want {
		t.Errorf("Validate = %v, want\n%s", err, want)
	}
	_, err = plan.Validate(t.Context(), "p.yaml", []byte("version: 1\nname: p\nqueue: Night/ly\ntasks: [{id: a, subagent: s}]\n"), refs)
	if err == nil || !strings.Contains(err.Error(), `queue: invalid queue name "Night/ly"`) {
		t.Errorf("Validate = %v, want the name's form refused", err)
	}
	if refs.calls["queue Night/ly"] != 0 {
		t.Errorf("a malformed queue name was looked up")
	}
	if _, err := plan.Validate(t.Context(), "p.yaml", []byte("version: 1\nname: p\nqueue: nightly\ntasks: [{id: a, subagent: s}]\n"), refs); err != nil {
		t.Errorf("a declared queue: %v", err)
	}
}

// TestQueueName_AgreesWithConfig keeps the plan's queue names and agora.yaml's the same: a
// queue agora.yaml accepts can be named by a plan, and the reverse.
func TestQueueName_AgreesWithConfig(t *testing.T) {
	for _, name := range []string{"default", "nightly", "n-1_x", "a", "0", strings.Repeat("q", 63), strings.Repeat("q", 64),
		"Nightly", "-x", "_x", "a.b", "a/b", "a b", "", "é", "a:b"} {
		planErr := plan.CheckQueueName(name)
		c := config.Default(t.TempDir())
		cfgErr := config.Parse("agora.yaml", []byte("queues: {\""+name+"\": {concurrency: 1}}"), c)
		if (planErr == nil) != (cfgErr == nil) {
			t.Errorf("queue %q: plan says %v, agora.yaml says %v", name, planErr, cfgErr)
		}
	}
}
