package service_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRedTeam44R_ReviewerPaths: every way a plan names a reviewer is checked as the task's
// own review is: a reviewer that could give no final answer its worker vouches for (an exec
// command, any reviewer on a sandbox: none target, claude-code on a docker target) is
// refused at submit, whether it reviews a fan-out template's items, is named with a pinned
// digest, gets its target from defaults, or the plan is a schedule's; orch validate says
// the same. A reviewer that changes into an exec command after the plan was accepted slips
// through the submit check: its worker vouches for no answer, and its review is a
// rejection, whatever the command writes.
func TestRedTeam44R_ReviewerPaths(t *testing.T) {
	e, _ := reviewEnv(t, "targets:\n  box:\n    provider: docker\n    image: alpine@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n  bare:\n    sandbox: none\n")
	e.editors(map[string]string{
		"coder":  `printf 'x\n' > x.txt`,
		"r-exec": `mkdir -p "$AGORA_OUT/outputs" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md"`,
		"split":  `mkdir -p "$AGORA_OUT/outputs" && printf '[{"id": "a"}]' > "$AGORA_OUT/outputs/items.json"`,
	})
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "r-cc.yaml"), []byte("description: reviews with claude\nruntime: claude-code\nmodel: claude-sonnet-4-5\nsystem_prompt: You review.\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "agora-manifest.yaml"), []byte("version: 1\nsubagents:\n  - {name: r-cc, from: r-cc.yaml}\n"), 0o644))
	e.run("apply", "-f", filepath.Join(dir, "agora-manifest.yaml"))
	var shown map[string]any
	must(t, json.Unmarshal([]byte(e.run("subagent", "show", "r-exec", "-o", "json")), &shown))
	pinned, _ := shown["digest"].(string)
	if !strings.HasPrefix(pinned, "sha256:") {
		t.Fatalf("subagent show -o json has no digest: %v", shown)
	}

	const execRefusal = `runs the exec runtime and cannot review`
	for _, tt := range []struct{ name, plan, path, want string }{
		{"fan-out template", `tasks:
  - {id: split, subagent: split}
  - id: port
    fan_out:
      from: split
      select: "output:items.json"
      template:
        subagent: coder
        review: {subagents: [r-exec], approve: 1}
`, "tasks[1].fan_out.template.review.subagents[0]", execRefusal},
		{"pinned digest", "tasks:\n  - id: work\n    subagent: coder\n    review: {subagents: [\"r-exec@" + pinned + "\"], approve: 1}\n",
			"tasks[0].review.subagents[0]", execRefusal},
		{"claude on a docker task", "tasks:\n  - id: work\n    subagent: coder\n    target: box\n    review: {subagents: [r-cc], approve: 1}\n",
			"tasks[0].review.subagents[0]", `whose CLI a docker target ("box") runs from a file the CLI's own tools can read`},
		{"claude on a docker default", "defaults: {target: box}\ntasks:\n  - id: work\n    subagent: coder\n    review: {subagents: [r-cc], approve: 1}\n",
			"tasks[0].review.subagents[0]", `whose CLI a docker target ("box")`},
		{"openai on sandbox none", "tasks:\n  - id: work\n    subagent: coder\n    target: bare\n    review: {subagents: [r-approve], approve: 1}\n",
			"tasks[0].review.subagents[0]", `cannot review on target "bare", which has sandbox: none`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nname: paths\ndefaults: {env: [model]}\n" + tt.plan
			if strings.HasPrefix(tt.plan, "defaults:") {
				src = "version: 1\nname: paths\n" + strings.Replace(tt.plan, "defaults: {", "defaults: {env: [model], ", 1)
			}
			out, ok := e.submit(src)
			if ok || !strings.Contains(out, tt.path+": ") || !strings.Contains(out, tt.want) {
				t.Errorf("submit (exit 0: %v), want a refusal at %s with %q:\n%s", ok, tt.path, tt.want, out)
			}
			p := filepath.Join(t.TempDir(), "plan.yaml")
			must(t, os.WriteFile(p, []byte(src), 0o644))
			for _, args := range [][]string{{"orch", "validate", p}, {"orch", "schedule", "add", "nightly", p, "--cron", "0 3 * * *"}} {
				cmd := exec.Command(agoraBin, args...)
				cmd.Env = e.vars
				b, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(b), tt.want) {
					t.Errorf("agora %s (err %v), want a refusal with %q:\n%s", strings.Join(args[:2], " "), err, tt.want, b)
				}
			}
		})
	}

	t.Run("changed after submit", func(t *testing.T) {
		mdir := t.TempDir()
		openai := "version: 1\nsubagents:\n  - name: r-slip\n    runtime: openai\n    model: test-model\n    system_prompt: \"You review work; style: prose.\"\n"
		must(t, os.WriteFile(filepath.Join(mdir, "agora-manifest.yaml"), []byte(openai), 0o644))
		e.run("apply", "-f", filepath.Join(mdir, "agora-manifest.yaml"))
		var checked map[string]any
		must(t, json.Unmarshal([]byte(e.run("subagent", "show", "r-slip", "-o", "json")), &checked))
		// The work waits for a file "go" the test puts in its workspace (its stage's, on the host).
		e.editors(map[string]string{"gated": `while [ ! -e go ]; do sleep 0.05; done; rm -f go; printf 'x\n' > x.txt`})
		p := filepath.Join(t.TempDir(), "plan.yaml")
		must(t, os.WriteFile(p, []byte("version: 1\nname: slip\ndefaults: {env: [model]}\ntasks:\n  - id: work\n    subagent: gated\n    review: {subagents: [r-slip], approve: 1}\n"), 0o644))
		runID := strings.TrimSpace(strings.Split(e.run("orch", "submit", p), "\n")[0])
		// Accepted with an openai reviewer; while the work waits at its gate, r-slip becomes an
		// exec command that approves.
		e.editors(map[string]string{"r-slip": `mkdir -p "$AGORA_OUT/outputs" && printf '{"approve": true}' > "$AGORA_OUT/outputs/final.md" && printf '{"approve": true}' > "$AGORA_OUT/outputs/verdict.json"`})
		var work api.Task
		agoratest.Eventually(t, 2*time.Minute, "the work to run", func() error {
			_, byID := e.statusOf(runID)
			if work = byID["work"]; work.State != lifecycle.TaskRunning || work.DispatchID == "" {
				return fmt.Errorf("work is %+v", work)
			}
			return nil
		})
		var ws []string
		agoratest.Eventually(t, time.Minute, "a workspace of the work's dispatch on the host", func() error {
			ws, _ = filepath.Glob(filepath.Join(e.home, "dispatches", work.DispatchID, "*", "workspace"))
			if w, _ := filepath.Glob(filepath.Join(e.home, "dispatches", work.DispatchID, "workspace")); len(w) > 0 {
				ws = w
			}
			if len(ws) == 0 {
				return fmt.Errorf("none of dispatch %s", work.DispatchID)
			}
			return nil
		})
		must(t, os.WriteFile(filepath.Join(ws[0], "go"), nil, 0o666))
		run := waitRun(t, e.client(), runID, 2*time.Minute)
		_, byID := e.statusOf(runID)
		w, r := byID["work"], byID["work.review-r-slip"]
		if run.State == lifecycle.RunSucceeded || w.State == lifecycle.TaskSucceeded {
			t.Fatalf("the work was approved by the changed reviewer: %+v %+v", w, r.Review)
		}
		// The run pinned r-slip at submit to the version its check looked at: the reviewer that
		// ran is that openai reviewer (its scripted model answers prose, an invalid review),
		// never the exec command registered after.
		var desc struct {
			SubagentDigest string `json:"subagent_digest"`
		}
		must(t, json.Unmarshal([]byte(e.run("dispatch", "describe", r.DispatchID, "-o", "json")), &desc))
		if desc.SubagentDigest != checked["digest"] {
			t.Errorf("the reviewer ran subagent %s, want the version submit checked, %v", desc.SubagentDigest, checked["digest"])
		}
		if v := r.Review; r.State != lifecycle.TaskSucceeded || v == nil || v.Approve || !v.Invalid {
			t.Errorf("the reviewer: %s %s (%s), review %+v; want the checked reviewer's own (invalid) review", r.State, r.Reason, r.Detail, r.Review)
		}
		if reviewed := e.reviewedEntries(runID, "work"); len(reviewed) != 1 || reviewed[0]["approved"] != false {
			t.Errorf("orch.task.reviewed %v", reviewed)
		}
	})
}
