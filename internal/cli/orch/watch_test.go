package orch

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/cli/cmdutil"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRunWatcher_Progress: each tick shows a running task's phase, elapsed time and last
// output line (read from its dispatch's stage), as a JSON line with -o json, as a line per
// change otherwise, redrawn on a terminal; a tick with nothing new prints nothing (off a
// terminal), and the agent's control characters are escaped.
func TestRunWatcher_Progress(t *testing.T) {
	stateDir := t.TempDir()
	id := "01JAAAAAAAAAAAAAAAAAAAAAAA"
	os.MkdirAll(filepath.Join(stateDir, id), 0o700)
	os.WriteFile(filepath.Join(stateDir, id, "phase"), []byte("agent\n"), 0o600)
	os.WriteFile(filepath.Join(stateDir, id, "stdout.log"), []byte("compiling\n\x1b[2Jtests pass\n"), 0o600)
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	run := api.Run{ID: "run1", Name: "n", State: lifecycle.RunRunning, Total: 2, Counts: map[string]int{lifecycle.TaskRunning: 1, lifecycle.TaskPending: 1},
		Tasks: []api.Task{{ID: "build", State: lifecycle.TaskRunning, DispatchID: id}, {ID: "deploy", State: lifecycle.TaskPending}}}
	newWatcher := func(live, jsonl bool) (*runWatcher, *bytes.Buffer) {
		var out bytes.Buffer
		f := cmdutil.NewFactory(&cmdutil.IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}, func(string) string { return "" })
		f.Now = func() time.Time { return now }
		w := &runWatcher{f: f, out: &out, live: live, jsonl: jsonl, stateDir: stateDir, running: map[string]time.Time{}, shown: map[string]taskProgress{}}
		w.setRun(run)
		w.running["build"] = now.Add(-12 * time.Second)
		return w, &out
	}

	w, out := newWatcher(false, true)
	w.progress()
	var line watchLine
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out.String())
	}
	want := taskProgress{Task: "build", DispatchID: id, ElapsedMS: 12000, Phase: "agent", LastLine: "\x1b[2Jtests pass"}
	if len(line.Progress) != 1 || line.Progress[0] != want {
		t.Errorf("progress %+v, want [%+v]", line.Progress, want)
	}
	out.Reset()
	w.progress()
	if out.Len() != 0 {
		t.Errorf("a tick with nothing new printed %q", out.String())
	}

	w, out = newWatcher(false, false)
	w.progress()
	if got := out.String(); !strings.Contains(got, "build\tprogress\tagent\t12s \\x1b[2Jtests pass\n") {
		t.Errorf("text progress %q", got)
	}

	w, out = newWatcher(true, false)
	w.progress()
	w.progress()
	got := out.String()
	if !strings.Contains(got, "agent 12s  | \\x1b[2Jtests pass") || strings.Count(got, "\x1b[3A\x1b[J") != 1 {
		t.Errorf("terminal redraw %q: want the task's phase, elapsed and escaped last line, redrawn in place", got)
	}
}
