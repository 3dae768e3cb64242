package dispatch_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/runtime/codexrt/responsestest"
)

// TestLearn_CodexRealCLI (#30, codex with the real CLI): under a grant of "git status" only,
// a learn dispatch's script is reported by agora's gate as tool.would_deny (exec_command, the
// argv) before codex sees it, then runs: the dispatch finishes with the script's file in its
// patch and the command allowed on record. Without --learn the same script is refused before
// it ran (TestCodexGate_BashScript_RealCLI). Failed before: the gate refused it.
func TestLearn_CodexRealCLI(t *testing.T) {
	h := newCodexGateHome(t)
	h.learn = true
	o := h.run("status-only", responsestest.Exec(`printf '%s\n' 'LEARNED' > NOTES.md`), responsestest.Say("done"))
	if o.rec.State != "finished" {
		t.Fatalf("learn dispatch %s: %s %s %q\nstderr:\n%s", o.id, o.rec.State, o.rec.Reason, o.rec.Detail, h.agora("dispatch", "logs", o.id, "--stderr"))
	}
	if !strings.Contains(o.patch, "+LEARNED") {
		t.Errorf("the script did not run in the learn dispatch %s:\n%s", o.id, o.patch)
	}
	if got := o.decisions(); len(got) != 1 || got[0] != "exec_command allowed" {
		t.Errorf("tool.call entries of %s: %q, want exec_command allowed", o.id, got)
	}
	var would []struct {
		Subject string         `json:"subject"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", "tool.would_deny", "-o", "json")), &would); err != nil {
		t.Fatal(err)
	}
	if len(would) != 1 || would[0].Details["dispatch"] != o.id || would[0].Details["tool"] != "exec_command" ||
		!strings.Contains(would[0].Details["command"].(string), "LEARNED") {
		t.Errorf("tool.would_deny entries = %+v, want one exec_command with the script", would)
	} else if r := would[0].Details["reporter"]; r != "worker" {
		// #30 F7: agora's gate runs in the worker, which proves it with its key.
		t.Errorf("the gate's would_deny has reporter %v, want worker", r)
	}
}

// TestLearn_CodexPatchOutsideRealCLI (#30, file.would_deny for codex, the real CLI): a learn
// dispatch's apply_patch mixing a file inside the workspace with paths outside it (absolute
// under /etc, "..") is recorded by agora's gate as file.would_deny (reporter worker, op, call
// id) and its outside paths rewritten into the scratch directory before codex reads the call:
// codex applies the patch, the inside file reaches the dispatch's patch, /etc is untouched and
// the scratch copy holds what the model wrote; a later Update File of the same path applies to
// the copy. Failed before: the gate refused the patch (apply_patch denied, codex stopped).
func TestLearn_CodexPatchOutsideRealCLI(t *testing.T) {
	h := newCodexGateHome(t)
	h.learn = true
	var mu sync.Mutex
	outs := map[string]string{}
	base := responsestest.Turns(
		responsestest.Patch("*** Begin Patch\n*** Add File: NOTES.md\n+inside\n*** Add File: /etc/agora-codex.conf\n+LEARNED-ETC\n*** Add File: ../up.txt\n+LEARNED-UP\n*** End Patch\n"),
		responsestest.Patch("*** Begin Patch\n*** Update File: /etc/agora-codex.conf\n@@\n-LEARNED-ETC\n+LEARNED-AGAIN\n*** End Patch\n"),
		responsestest.Exec(`test -e /etc/agora-codex.conf && echo etc=present || echo etc=absent; cat /tmp/agora-learn-writes-*/etc/agora-codex.conf`),
		responsestest.Say("done"),
	)
	o := h.runScript("status-only", func(r responsestest.Request) responsestest.Reply {
		mu.Lock()
		for k, v := range r.Outputs {
			outs[k] = v
		}
		mu.Unlock()
		return base(r)
	})
	if o.rec.State != "finished" {
		t.Fatalf("learn dispatch %s: %s %s %q\nstderr:\n%s", o.id, o.rec.State, o.rec.Reason, o.rec.Detail, h.agora("dispatch", "logs", o.id, "--stderr"))
	}
	if !strings.Contains(o.patch, "+inside") || strings.Contains(o.patch, "LEARNED") {
		t.Errorf("the dispatch's patch should hold NOTES.md only:\n%s", o.patch)
	}
	mu.Lock()
	var look string
	for _, v := range outs {
		if strings.Contains(v, "etc=") {
			look = v
		}
	}
	mu.Unlock()
	if !strings.Contains(look, "etc=absent") || !strings.Contains(look, "LEARNED-AGAIN") {
		t.Errorf("the look around came back %q; want /etc untouched and the scratch copy updated", look)
	}
	var files []struct {
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal([]byte(h.agora("audit", "log", "--kind", "file.would_deny", "-o", "json")), &files); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		d := f.Details
		if d["dispatch"] != o.id || d["call_id"] == nil || d["call_id"] == "" {
			t.Errorf("file.would_deny %v: want this dispatch's, with the call id", d)
		}
		got = append(got, fmt.Sprint(d["path"], " ", d["op"], " ", d["tool"], " ", d["reporter"]))
	}
	want := []string{"/etc/agora-codex.conf write apply_patch worker", "../up.txt write apply_patch worker", "/etc/agora-codex.conf edit apply_patch worker"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("file.would_deny entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, e := range o.entries {
		if e["decision"] != "allowed" {
			t.Errorf("tool.call %v: want every action allowed", e)
		}
	}
}
