package cli_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLearn_MarkedOnEveryCLISurface ("the dispatch is marked learn everywhere it is
// shown"): with the real binary and bubblewrap, a learn dispatch says so on `dispatch run`'s
// stderr (the accepted line's LEARN line and the summary's "mode learn"), in `dispatch list`'s
// table ("(learn)" after the subagent) and in `dispatch describe`; a plain dispatch of the
// same subagent says none of it.
func TestLearn_MarkedOnEveryCLISurface(t *testing.T) {
	for _, tool := range []string{"bwrap", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s not installed; the test dispatches in a sandbox with it", tool)
		}
	}
	dir := t.TempDir()
	env := map[string]string{"AGORA_HOME": filepath.Join(dir, "agora"), "HOME": dir, "USER": "tester"}
	run := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := agoraProcess(t, env, args...)
		cmd.Dir = dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("agora %v: %v", args, err)
		}
		return out.String(), errOut.String(), code
	}
	must := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, code := run(args...)
		if code != 0 {
			t.Fatalf("agora %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out, errOut
	}
	must("init")
	writeFile(t, filepath.Join(dir, "caps", "say", "capability.yaml"), "commands: [\"echo said\"]\n")
	must("capability", "register", "say", "--from", filepath.Join(dir, "caps", "say"))
	must("subagent", "register", "sayer", "--runtime", "exec", "--command", "echo said", "--capability", "say")
	repo := filepath.Join(dir, "repo")
	gitInit(t, repo)

	// dispatch run: text output (the summary on stderr) and the id from describe's list.
	ids := map[bool]string{}
	for _, learn := range []bool{false, true} {
		args := []string{"dispatch", "run", "--subagent", "sayer", "--repo", repo}
		if learn {
			args = append(args, "--learn")
		}
		_, errOut := must(args...)
		var id string
		for _, line := range strings.Split(errOut, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "dispatch" {
				id = f[1]
			}
		}
		if id == "" {
			t.Fatalf("dispatch run (learn %v): no summary line naming the dispatch:\n%s", learn, errOut)
		}
		ids[learn] = id
		for _, mark := range []string{id + " is a LEARN dispatch: what its grant would refuse is recorded", "\nmode      learn ("} {
			if got := strings.Contains(errOut, mark); got != learn {
				t.Errorf("dispatch run (learn %v): stderr has %q = %v:\n%s", learn, mark, got, errOut)
			}
		}
	}

	list, _ := must("dispatch", "list")
	checkLearnRows(t, list, ids)

	for learn, id := range ids {
		desc, _ := must("dispatch", "describe", id)
		if got := strings.Contains(desc, "mode:      learn"); got != learn {
			t.Errorf("dispatch describe %s (learn %v) says mode learn = %v:\n%s", id, learn, got, desc)
		}
		js, _ := must("dispatch", "describe", id, "-o", "json")
		var rec struct {
			State string `json:"state"`
			Learn bool   `json:"learn"`
		}
		if err := json.Unmarshal([]byte(js), &rec); err != nil {
			t.Fatalf("describe -o json: %v\n%s", err, js)
		}
		if rec.Learn != learn || rec.State != "finished" {
			t.Errorf("dispatch %s: state %s, learn %v; want finished, learn %v", id, rec.State, rec.Learn, learn)
		}
	}
}

// checkLearnRows asserts dispatch list marks exactly the learn dispatch "(learn)".
func checkLearnRows(t *testing.T, list string, ids map[bool]string) {
	t.Helper()
	rows := map[string]string{}
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = line
		}
	}
	for learn, id := range ids {
		row, ok := rows[id]
		if !ok {
			t.Fatalf("dispatch list has no row for %s:\n%s", id, list)
		}
		if got := strings.Contains(row, "sayer (learn)"); got != learn {
			t.Errorf("dispatch list row of %s (learn %v) has \"(learn)\" = %v: %q", id, learn, got, row)
		}
	}
	if n := strings.Count(list, "(learn)"); n != 1 {
		t.Errorf("dispatch list marks %d dispatches learn, want 1:\n%s", n, list)
	}
}
