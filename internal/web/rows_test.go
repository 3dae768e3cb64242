package web

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// TestServer_RunEventsSendRowsAsRendered: the run's stream carries, for each listed task,
// its row exactly as the run page renders it (a viewer's masked as the page is): in the first
// snapshot, and again after the task changes, with the cells that changed (state, reason).
// Failed before: the stream carried only states, and the page patched its cells itself.
func TestServer_RunEventsSendRowsAsRendered(t *testing.T) {
	e := start(t)
	get := func(path string) string {
		req, _ := http.NewRequest("GET", e.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+readToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// pageRow is task's row in a fresh render of the run page.
	pageRow := func(task string) string {
		page := get("/runs/run1")
		i := strings.Index(page, `<tr data-task="`+task+`">`)
		if i < 0 {
			t.Fatalf("the run page has no row of %s", task)
		}
		n := strings.Index(page[i:], "</tr>")
		return page[i : i+n+len("</tr>")]
	}
	req, _ := http.NewRequest("GET", e.base+"/api/runs/run1/events?tasks=a,b", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	next := func() (string, map[string]json.RawMessage) {
		event := ""
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := strings.CutPrefix(l, "event: "); ok {
				event = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "data: "); ok {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(v), &m); err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				return event, m
			}
		}
	}
	rowsOf := func(raw json.RawMessage) map[string]string {
		var rows map[string]string
		if err := json.Unmarshal(raw, &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	ev, snap := next()
	if ev != "snapshot" || snap["rows"] == nil {
		t.Fatalf("first event %s %v, want a snapshot with rows", ev, snap)
	}
	for task, row := range rowsOf(snap["rows"]) {
		if want := pageRow(task); row != want {
			t.Errorf("snapshot row of %s:\n%s\nthe page's:\n%s", task, row, want)
		}
	}

	time.Sleep(50 * time.Millisecond) // the hub subscribes as the server starts
	const hostPath = "/srv/agora-host/secret/repo"
	if _, err := e.orch.db.SQL().Exec(`UPDATE tasks SET reason = ? WHERE run_id = 'run1' AND id = 'a'`, "failed in "+hostPath); err != nil {
		t.Fatal(err)
	}
	e.orch.set("a", lifecycle.TaskFailed)
	if ev, m := next(); ev != "tasks" || string(m["a"]) != `"failed"` {
		t.Fatalf("event %s %v, want task a failed", ev, m)
	}
	ev, m := next()
	if ev != "rows" {
		t.Fatalf("event %s, want the changed rows", ev)
	}
	rows := map[string]string{}
	for k, v := range m {
		var s string
		json.Unmarshal(v, &s)
		rows[k] = s
	}
	if len(rows) != 1 || rows["a"] != pageRow("a") {
		t.Errorf("rows %q, want a's row as the page renders it:\n%s", rows, pageRow("a"))
	}
	if !strings.Contains(rows["a"], `<td class="t-state"><span class="state st-failed">failed</span></td>`) || strings.Contains(rows["a"], hostPath) {
		t.Errorf("a's row %q: want its new state and its reason masked for a viewer", rows["a"])
	}
}
