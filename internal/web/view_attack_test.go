package web

import (
	"bufio"
	"context"
	"database/sql"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit"
	"github.com/agora-dev/agora/internal/digest"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
	"github.com/agora-dev/agora/internal/store"
)

// privateRepo is a repository path on the serving host: an operator may see it, a read-only
// viewer never, in any text.
const privateRepo = "/tmp/t1/private-repo"

// rlo is RIGHT-TO-LEFT OVERRIDE: "invoice" + rlo + "fdp.exe" reads "invoiceexe.pdf".
const rlo = "\u202e"

// hostile is text an agent wrote: a reversed file name, an isolate, a C1 control and the
// repository's path it read from git.
const hostile = "invoice" + rlo + "fdp.exe \u2066x\u2069 \u009b31m origin\t" + privateRepo + " (fetch)"

// startHostile serves a run and dispatches whose every free-text field holds a host path or
// agent-written bidirectional controls, and both audit logs with such entries.
func startHostile(t *testing.T) env {
	t.Helper()
	o := newFakeOrch(
		api.Task{ID: "a", State: lifecycle.TaskFailed, Subagent: "coder", Reason: "worker-failed",
			Detail: "repository " + privateRepo + " is not a directory", DispatchID: "d1", Dispatches: []string{"d1"}},
		api.Task{ID: "c", State: lifecycle.TaskNeedsInput, Subagent: "coder", Question: "Which one? " + hostile, DispatchID: "d2", Dispatches: []string{"d2"}},
	)
	o.run.Repo = privateRepo
	now := time.Now()
	blobs := map[digest.Digest][]byte{"sha256:out": []byte("stdout " + hostile + "\n"), "sha256:tr": []byte(`{"text":"` + hostile + `"}` + "\n")}
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: lifecycle.DispatchStarted, Subagent: "coder", Repo: privateRepo, CreatedAt: now, StartedAt: &now,
			Detail: "checkout " + privateRepo + ": exit status 128"},
		"d2": {ID: "d2", State: lifecycle.DispatchNeedsInput, Subagent: "coder", Repo: privateRepo, CreatedAt: now, EndedAt: &now,
			Reason: "", Detail: "asked: " + hostile,
			Events: []dispatch.Event{{Seq: 1, Kind: "needs_input", At: now, Data: map[string]any{"question": hostile, "where": privateRepo + "/x"}}},
			Result: &dispatch.Result{Stdout: &dispatch.Artifact{Digest: "sha256:out", Size: 10}, Transcript: &dispatch.Artifact{Digest: "sha256:tr", Size: 10},
				Outputs:    []dispatch.Output{{Path: "invoice" + rlo + "fdp.exe", Digest: "sha256:x", Size: 3}},
				NeedsInput: &dispatch.NeedsInput{Question: hostile}}},
		"d3": {ID: "d3", State: lifecycle.DispatchFailed, Subagent: "alone", Repo: privateRepo, CreatedAt: now, EndedAt: &now,
			Reason: "worker-failed", Detail: "repository " + privateRepo + " is not a directory"},
	}
	mainLog := auditDB(t, "agora.db", audit.Entry{Actor: "cli", Kind: "dispatch.failed", Subject: "dispatch/d3",
		Details: map[string]any{"repo": privateRepo, "detail": "repository " + privateRepo + " is not a directory", "said": hostile}})
	orchLog := auditDB(t, "orch.db", audit.Entry{Actor: "orch", Kind: "orch.task.failed", Subject: "run/run1/task/a",
		Details: map[string]any{"detail": "repository " + privateRepo + " is not a directory", "question": hostile}})
	return startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{recs}, MainLog: mainLog, OrchLog: orchLog,
		Blob: func(d digest.Digest, _ int64) ([]byte, error) { return blobs[d], nil },
		Live: func(string) dispatch.Live {
			return dispatch.Live{Stdout: []byte("live " + hostile + "\n"), Stderr: []byte("fatal: " + privateRepo + " gone\n")}
		},
	})
}

// auditDB is a real audit log in a temporary SQLite database holding entries.
func auditDB(t *testing.T, name string, entries ...audit.Entry) audit.Querier {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), name), audit.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Tx(ctx, func(tx *sql.Tx) error {
		_, err := audit.New(nil).AppendAll(ctx, tx, entries)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return db.SQL()
}

// viewed are every page, API answer and event stream that shows the hostile run's text.
var viewed = []string{"/runs", "/runs/run1", "/runs/run1/tasks/a", "/runs/run1/tasks/c", "/dispatches", "/dispatches/d1",
	"/dispatches/d2", "/dispatches/d3", "/audit", "/audit?log=orch", "/api/runs", "/api/runs/run1", "/api/dispatches/d1",
	"/api/dispatches/d2", "/api/dispatches/d3", "/api/dispatches/d1/tail", "/api/runs/run1/events"}

// fetch returns what path answers token: a page or API whole, a stream's first event.
func fetch(t *testing.T, e env, token, path string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", e.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	if !strings.HasSuffix(path, "/events") && !strings.HasSuffix(path, "/tail") {
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	br := bufio.NewReader(resp.Body)
	for {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if strings.HasPrefix(l, "data: ") {
			return l
		}
	}
}

// TestServer_HostPathsHiddenInFreeText: a read-only viewer finds the repository's path in no
// string of any page, API answer or event stream (failure details, agent output, events,
// audit details), and an operator still sees it (a task's failure detail
// "repository /tmp/.../private-repo is not a directory" must not reach read-only viewers).
func TestServer_HostPathsHiddenInFreeText(t *testing.T) {
	e := startHostile(t)
	for _, path := range viewed {
		if body := fetch(t, e, readToken, path); strings.Contains(body, "private-repo") {
			i := strings.Index(body, "private-repo")
			t.Errorf("a read-only viewer's %s shows the host path: ...%s...", path, body[max(0, i-120):min(len(body), i+40)])
		}
	}
	for _, path := range []string{"/runs/run1/tasks/a", "/dispatches/d3", "/api/runs/run1"} {
		if body := fetch(t, e, opToken, path); !strings.Contains(body, privateRepo) {
			t.Errorf("an operator's %s lacks the repository path", path)
		}
	}
}

// TestServer_BidiEscaped: agent-written bidirectional controls and control characters reach
// no page, API answer or event stream as they are: pages and streams show them escaped as the
// CLI prints them (\u202e), JSON carries them as JSON escapes (an output
// invoice<U+202E>fdp.exe would read invoiceexe.pdf).
func TestServer_BidiEscaped(t *testing.T) {
	e := startHostile(t)
	for _, token := range []string{opToken, readToken} {
		for _, path := range viewed {
			body := fetch(t, e, token, path)
			for _, r := range []string{rlo, "\u2066", "\u2069", "\u009b"} {
				if strings.Contains(body, r) {
					i := strings.Index(body, r)
					t.Errorf("%s shows %U as it is: ...%q...", path, []rune(r)[0], body[max(0, i-60):min(len(body), i+20)])
				}
			}
		}
	}
	for _, path := range []string{"/runs/run1", "/runs/run1/tasks/c", "/dispatches/d2"} {
		if body := fetch(t, e, opToken, path); !strings.Contains(body, `invoice\u202efdp.exe`) {
			t.Errorf("%s does not show the output's name escaped (invoice\\u202efdp.exe)", path)
		}
	}
	if l := fetch(t, e, opToken, "/api/dispatches/d1/tail"); !strings.Contains(l, `invoice\\u202efdp.exe`) {
		t.Errorf("the live tail does not carry the name escaped for the page: %s", l)
	}
}
