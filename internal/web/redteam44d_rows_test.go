package web

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/agora-dev/agora/internal/agoratest"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch/api"
)

// rtEvent is one event of a run's stream as it came over the wire: its name, its data line
// and every line of its frame.
type rtEvent struct {
	name, data string
	lines      []string
}

// rtStream opens run1's event stream as token with ?tasks=listed and returns its events in
// order (the channel closes when the stream ends). Every line of every frame is kept, so a
// test can check the framing itself.
func rtStream(t *testing.T, e env, token string, listed ...string) <-chan rtEvent {
	t.Helper()
	q := make([]string, len(listed))
	for i, id := range listed {
		q[i] = url.QueryEscape(id)
	}
	req, _ := http.NewRequest("GET", e.base+"/api/runs/run1/events?tasks="+strings.Join(q, ","), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("events: %s: %s", resp.Status, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	out := make(chan rtEvent, 64)
	go func() {
		defer close(out)
		br := bufio.NewReader(resp.Body)
		var ev rtEvent
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			l = strings.TrimSuffix(l, "\n")
			if l == "" {
				if ev.name != "" || ev.data != "" {
					out <- ev
				}
				ev = rtEvent{}
				continue
			}
			ev.lines = append(ev.lines, l)
			if v, ok := strings.CutPrefix(l, "event: "); ok {
				ev.name = v
			}
			if v, ok := strings.CutPrefix(l, "data: "); ok {
				ev.data = v
			}
		}
	}()
	return out
}

// rtNext returns the next event named name (others are skipped), failing after d.
func rtNext(t *testing.T, events <-chan rtEvent, name string, d time.Duration) (rtEvent, bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return rtEvent{}, false
			}
			if ev.name == name {
				return ev, true
			}
		case <-deadline:
			return rtEvent{}, false
		}
	}
}

// rtRows reads the rows of a "rows" event, or of a snapshot's "rows".
func rtRows(t *testing.T, ev rtEvent) map[string]string {
	t.Helper()
	rows := map[string]string{}
	if ev.name == "snapshot" {
		var s struct {
			Rows map[string]string `json:"rows"`
		}
		if err := json.Unmarshal([]byte(ev.data), &s); err != nil {
			t.Fatalf("snapshot %q: %v", ev.data, err)
		}
		return s.Rows
	}
	if err := json.Unmarshal([]byte(ev.data), &rows); err != nil {
		t.Fatalf("rows %q: %v", ev.data, err)
	}
	return rows
}

// rtPageRow is task's row in a fresh render of run1's page as token sees it.
func rtPageRow(t *testing.T, e env, token, task string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", e.base+"/runs/run1", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	i := strings.Index(page, `<tr data-task="`+html.EscapeString(task)+`">`)
	if i < 0 {
		t.Fatalf("the run page has no row of %q:\n%s", task, page)
	}
	n := strings.Index(page[i:], "</tr>")
	return page[i : i+n+len("</tr>")]
}

// rtHubReady waits until the server's hub watches the fake engine, so a change is heard.
func rtHubReady(t *testing.T, e env) {
	t.Helper()
	agoratest.WaitFor(t, 10*time.Second, "the hub's subscription to the engine", func() bool {
		e.orch.mu.Lock()
		defer e.orch.mu.Unlock()
		return len(e.orch.subs) > 0
	})
}

// TestRedTeam44D_RowRenderedWithoutItsShapeIsSentAgainWithIt: a run's shape (the plan's
// subagent, dependencies, locks and verify gate of each task) is rebuilt when the kept one is
// dropped (another run's shape took the room) or the run grows (a fix, a reviewer, a fan-out's
// items), and one build runs at a time: while another run's large shape builds, the stream
// waits streamShapeWait for this one and then renders a changed row without its plan's
// columns. The page must not keep that row: once the shape is ready, the stream sends the row
// again as a fresh load renders it. Failed before: the row stayed without its subagent,
// dependencies and locks (a fresh load showed them) until the task changed again.
func TestRedTeam44D_RowRenderedWithoutItsShapeIsSentAgainWithIt(t *testing.T) {
	e := start(t)
	events := rtStream(t, e, opToken, "a", "b")
	snap, ok := rtNext(t, events, "snapshot", 10*time.Second)
	if !ok {
		t.Fatal("no first snapshot")
	}
	if got, want := rtRows(t, snap)["b"], rtPageRow(t, e, opToken, "b"); got != want || !strings.Contains(got, "<td>coder</td>") {
		t.Fatalf("first snapshot's row of b:\n%s\nthe page's:\n%s", got, want)
	}
	rtHubReady(t, e)

	// The kept shape is dropped (as evict drops it for another run's), and another run's
	// shape holds the one build slot for longer than the stream waits.
	sh := e.srv.shapes
	sh.mu.Lock()
	if en := sh.runs["run1"]; en != nil && en.ready {
		sh.tasks -= len(en.s.ids)
		delete(sh.runs, "run1")
	}
	sh.mu.Unlock()
	sh.build <- struct{}{}
	released := false
	release := func() {
		if !released {
			released = true
			<-sh.build
		}
	}
	defer release()

	e.orch.set("b", lifecycle.TaskFailed)
	ev, ok := rtNext(t, events, "rows", 10*time.Second)
	if !ok {
		t.Fatal("no rows after b changed")
	}
	first := rtRows(t, ev)["b"]
	if !strings.Contains(first, "st-failed") {
		t.Fatalf("b's row %q does not show its new state", first)
	}
	release()
	// The shape is ready now: a fresh load shows b's plan columns.
	var want string
	agoratest.Eventually(t, 10*time.Second, "b's subagent in a fresh load", func() error {
		if want = rtPageRow(t, e, opToken, "b"); !strings.Contains(want, "<td>coder</td>") {
			return fmt.Errorf("b's row: %s", want)
		}
		return nil
	})
	if first == want {
		return // the stream's shape wait covered the build: nothing to send again
	}
	t.Logf("b's row without its shape: %s", first)
	for {
		ev, ok := rtNext(t, events, "rows", 10*time.Second)
		if !ok {
			t.Fatalf("the page keeps b's row without its plan's columns:\n%s\na fresh load renders:\n%s", first, want)
		}
		if got, ok := rtRows(t, ev)["b"]; ok && got == want {
			return
		}
	}
}

// TestRedTeam44D_HostileRowFieldsStayOneInertRow: whatever a row's fields hold (markup,
// quotes, a closing </tr> and a row of another task, SSE framing with newlines, line and
// paragraph separators, a carriage return, bidi controls, a host path), the stream carries
// each row in one data line of one event, and the row parses, as app.js parses it in a
// <template>, into exactly one <tr> of that task with no element or attribute the template
// does not write, its text the field's; a viewer's carries no host path. Held: html/template
// escapes every field and json.Marshal every newline.
func TestRedTeam44D_HostileRowFieldsStayOneInertRow(t *testing.T) {
	const hostPath = "/srv/agora-host/secret/repo"
	hostile := "x\"'><script>alert(1)</script><img src=x onerror=alert(2)></td></tr><tr data-task=\"a\"><td>forged" +
		"\n\nevent: rows\ndata: {\"a\":\"<img src=x onerror=alert(3)>\"}\n\r\u2028\u2029\u202e in " + hostPath
	e := start(t)
	rtHubReady(t, e)
	// A verdict's reason is one of verdict.Reasons (the reader refuses any other), so the
	// row's free text is the task's reason.
	if _, err := e.orch.db.SQL().Exec(`UPDATE tasks SET reason = ?, detail = ? WHERE run_id = 'run1' AND id = 'a'`, hostile, hostile); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token  string
		viewer bool
	}{{opToken, false}, {readToken, true}} {
		events := rtStream(t, e, tc.token, "a", "b")
		snap, ok := rtNext(t, events, "snapshot", 10*time.Second)
		if !ok {
			t.Fatal("no first snapshot")
		}
		e.orch.set("a", lifecycle.TaskFailed)
		ev, ok := rtNext(t, events, "rows", 10*time.Second)
		if !ok {
			t.Fatal("no rows after a changed")
		}
		for _, got := range []rtEvent{snap, ev} {
			if len(got.lines) != 2 || !strings.HasPrefix(got.lines[0], "event: ") || !strings.HasPrefix(got.lines[1], "data: ") {
				t.Errorf("%s: an event of %d lines, want one event and one data line: %q", got.name, len(got.lines), got.lines)
			}
			row := rtRows(t, got)["a"]
			if tc.viewer && strings.Contains(row, hostPath) {
				t.Errorf("%s: a viewer's row of a holds the host path: %s", got.name, row)
			}
			if !tc.viewer && !strings.Contains(html.UnescapeString(row), hostPath) {
				t.Errorf("%s: the operator's row lost the reason's text: %s", got.name, row)
			}
			rtInertRow(t, got.name, "a", row)
		}
		if want := rtPageRow(t, e, tc.token, "a"); rtRows(t, ev)["a"] != want {
			t.Errorf("viewer %v: the stream's row of a differs from a fresh load's:\n%s\n%s", tc.viewer, rtRows(t, ev)["a"], want)
		}
		e.orch.set("a", lifecycle.TaskRunning) // for the next viewer's change
	}
}

// rtInertRow parses row as app.js does (innerHTML of a <template>) and checks it is one <tr>
// of task holding only the elements and attributes the taskrow template writes.
func rtInertRow(t *testing.T, when, task, row string) {
	t.Helper()
	ctx := &html.Node{Type: html.ElementNode, Data: "template", DataAtom: atom.Template}
	nodes, err := html.ParseFragment(strings.NewReader(row), ctx)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	// A <template>'s contents hang off the element itself in x/net/html's fragment parse.
	var elems []*html.Node
	for _, n := range nodes {
		if n.Type == html.ElementNode {
			elems = append(elems, n)
		}
	}
	if len(elems) != 1 || elems[0].Data != "tr" || rtAttr(elems[0], "data-task") != task {
		t.Fatalf("%s: the row parses into %d elements, want one <tr data-task=%q>: %s", when, len(elems), task, row)
	}
	allowed := map[string][]string{"tr": {"data-task"}, "td": {"class"}, "a": {"href"}, "span": {"class", "title"}}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attrs, ok := allowed[n.Data]
			if !ok {
				t.Errorf("%s: the row holds a <%s> element: %s", when, n.Data, row)
			}
			for _, a := range n.Attr {
				if !strings.Contains(" "+strings.Join(attrs, " ")+" ", " "+a.Key+" ") {
					t.Errorf("%s: <%s> has attribute %s=%q: %s", when, n.Data, a.Key, a.Val, row)
				}
			}
			if n.Data == "a" && !strings.HasPrefix(rtAttr(n, "href"), "/runs/run1/tasks/") {
				t.Errorf("%s: a link to %q", when, rtAttr(n, "href"))
			}
			if n.Data == "tr" && n != elems[0] {
				t.Errorf("%s: a second row inside the row: %s", when, row)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(elems[0])
}

func rtAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// TestRedTeam44D_StreamRowsAreOnlyThisRunsTasks: a page's ?tasks= may name anything; the
// stream renders rows only of the run it follows, never another run's task of the same id
// or one named only there, and another run's changes send no row. Held: TasksNamed reads
// WHERE run_id, and the hub hands a stream only its run's events.
func TestRedTeam44D_StreamRowsAreOnlyThisRunsTasks(t *testing.T) {
	e := start(t)
	db := e.orch.db.SQL()
	for _, q := range []string{
		`INSERT INTO runs(id, name, digest, state, actor, repo, created_at, queue, schedule, slot, missed) SELECT 'run2', 'other', digest, state, actor, '/srv/other-repo', created_at, queue, schedule, slot, missed FROM runs WHERE id = 'run1'`,
		`INSERT INTO run_plans(run_id, plan) SELECT 'run2', plan FROM run_plans WHERE run_id = 'run1'`,
		`INSERT INTO tasks(run_id, idx, id, state, attempts, dispatch_id, reason, detail, question, review) VALUES ('run2', 0, 'a', 'failed', 0, '', 'secret-of-run2', '', '', ''), ('run2', 1, 'only2', 'failed', 0, '', 'secret-of-run2', '', '', '')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	rtHubReady(t, e)
	events := rtStream(t, e, opToken, "a", "only2", "b")
	snap, ok := rtNext(t, events, "snapshot", 10*time.Second)
	if !ok {
		t.Fatal("no first snapshot")
	}
	rows := rtRows(t, snap)
	if len(rows) != 2 || rows["only2"] != "" || strings.Contains(snap.data, "secret-of-run2") {
		t.Errorf("snapshot rows %v, want a's and b's of run1 only", rows)
	}
	// Another run's change reaches no stream of run1.
	e.orch.mu.Lock()
	subs := e.orch.subs
	e.orch.mu.Unlock()
	for _, ch := range subs {
		ch <- api.Event{Run: "run2", Task: "a", State: lifecycle.TaskFailed, Kind: "orch.task.failed"}
	}
	e.orch.set("b", lifecycle.TaskFailed)
	ev, ok := rtNext(t, events, "rows", 10*time.Second)
	if !ok {
		t.Fatal("no rows after b changed")
	}
	if rows := rtRows(t, ev); len(rows) != 1 || rows["b"] == "" {
		t.Errorf("rows %v after run1's b and run2's a changed, want b's alone", rows)
	}
	if strings.Contains(ev.data, "secret-of-run2") {
		t.Errorf("run2's reason reached run1's stream: %s", ev.data)
	}
}
