package web_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/agora-dev/agora/internal/lifecycle"
)

// cellsPlan has a task whose verify gate is red and whose fix makes it succeed (gated), one
// whose gate is red with no fix (red), one whose gate passes (green) and a dependent of it.
const cellsPlan = `version: 1
name: cells
concurrency: 4
tasks:
  - id: gated
    subagent: idle
    verify: {command: [test, -f, fixed.txt]}
    on_fail: {fix: {subagent: fixer, max_attempts: 1}}
  - id: red
    subagent: idle
    verify: {command: [test, -f, fixed.txt]}
  - id: green
    subagent: writer
    verify: {command: [test, -f, fixed.txt]}
  - id: after
    subagent: slow
    depends_on: [green]
`

// TestUI_LiveCellsMatchTheServer drives the real binary's run view in headless Chromium
// during a live run: after every task change the watcher hears of, each row of the page's
// tasks table (state, subagent, dependencies, locks, attempts, verify, reason) must come to
// equal what the server renders for a fresh load of the page. The page is loaded once as the
// run starts and again while gated waits for its fix with its red verdict shown, so a live
// update lands on a row whose Verify cell holds a badge. Failed before: the page wrote a
// task's state into the row's last badge (gated's Verify cell showed "succeeded" in green and
// its State stayed "pending"), and never updated Verify, Attempts or Reason.
func TestUI_LiveCellsMatchTheServer(t *testing.T) {
	requireUI(t)
	e := newUIHome(t)
	for name, cmd := range map[string]string{
		"idle":   `echo working; sleep 2`,
		"writer": `sleep 1; echo ok > fixed.txt`,
		"fixer":  `sleep 6; echo fixed > fixed.txt`,
	} {
		f := filepath.Join(e.dir, name+".yaml")
		must(t, os.WriteFile(f, []byte(fmt.Sprintf("description: %s\nruntime: exec\ncommand: [sh, -c, %q]\ncapabilities: [shell]\n", name, cmd)), 0o644))
		e.run("subagent", "register", name, "--from", f)
	}
	e.serve()
	b := newBrowser(t, e.base)
	b.login(uiOperatorToken)

	run := e.submit("cells", cellsPlan)
	events := watch(t, e, run.ID)
	page := "/runs/" + run.ID
	b.must(map[string]any{"op": "goto", "path": page})
	b.must(map[string]any{"op": "waitSelector", "selector": "#run[data-live]", "timeout": 10000})
	checked, reloaded := 0, false
	for msg := range events {
		if msg.Event == nil || msg.Event.Task == "" {
			if msg.Run != nil && lifecycle.RunEnded(msg.Run.State) {
				break
			}
			continue
		}
		ev := msg.Event
		if ev.Task == "gated" && ev.State == lifecycle.TaskPending && !reloaded && gatedAwaitsFix(t, e, run.ID) {
			// The red verdict is on gated's row now: a fresh page holds its badge.
			b.must(map[string]any{"op": "goto", "path": page})
			b.must(map[string]any{"op": "waitSelector", "selector": "#run[data-live]", "timeout": 10000})
			if st := txt(b, `table#tasks tr[data-task="gated"] td:nth-child(2)`); st != lifecycle.TaskPending {
				t.Fatalf("gated is %q once the reloaded page is live; its fix was to take 6 s", st)
			}
			reloaded = true
		}
		cellsMatch(t, e, b, page, fmt.Sprintf("after %s %s", ev.Task, ev.State))
		checked++
	}
	if !reloaded {
		t.Fatal("gated never waited for its fix with a red verdict")
	}
	b.must(map[string]any{"op": "waitText", "selector": "#run-state", "contains": "failed", "timeout": 10000})
	cellsMatch(t, e, b, page, "after the run ended")
	rows := b.must(map[string]any{"op": "cells", "selector": "table#tasks tr[data-task]"}).Rows
	for _, r := range rows {
		want := map[string]string{"gated": "succeeded", "gated.fix-1": "succeeded", "red": "failed", "green": "succeeded", "after": "succeeded"}[r.Task]
		if state := r.Cells[1].Text; state != want {
			t.Errorf("task %s shows state %q, want %q", r.Task, state, want)
		}
		if r.Task == "red" && (r.Cells[6].Text == "succeeded" || r.Cells[6].Text == "passed") {
			t.Errorf("the red gate shows %q", r.Cells[6].Text)
		}
	}
	t.Logf("%d live updates checked against the server's render", checked)
	b.shot("run-live-cells")
	if rep := b.must(map[string]any{"op": "report"}); len(rep.Console) > 0 {
		t.Errorf("console errors: %q", rep.Console)
	}
}

// gatedAwaitsFix reports whether gated waits for its fix now, after a red verdict.
func gatedAwaitsFix(t *testing.T, e *uiEnv, runID string) bool {
	for _, task := range mustStatus(t, e, runID).Tasks {
		if task.ID == "gated" {
			return task.Reason == "awaiting-fix" && task.Verdict != nil && !task.Verdict.Passed
		}
	}
	return false
}

// cellsMatch waits until every row the page shows equals the same row of a fresh render of
// page by the server, failing with both when they still differ after 10 s.
func cellsMatch(t *testing.T, e *uiEnv, b *browser, page, when string) {
	t.Helper()
	var shown, fresh []rowCells
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		shown = b.must(map[string]any{"op": "cells", "selector": "table#tasks tr[data-task]"}).Rows
		fresh = serverRows(t, e, page)
		if sameRows(shown, fresh) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Errorf("%s: the page's rows differ from the server's render\npage:   %+v\nserver: %+v", when, shown, fresh)
}

// sameRows: every row shown is the server's row of the same task, cell for cell (the server
// lists more when a fix or reviewer was added since the page loaded).
func sameRows(shown, fresh []rowCells) bool {
	if len(shown) == 0 {
		return false
	}
	for _, r := range shown {
		i := slices.IndexFunc(fresh, func(f rowCells) bool { return f.Task == r.Task })
		if i < 0 || len(fresh[i].Cells) != len(r.Cells) {
			return false
		}
		for k, c := range r.Cells {
			f := fresh[i].Cells[k]
			if c.Text != f.Text || !slices.Equal(c.Badges, f.Badges) {
				return false
			}
		}
	}
	return true
}

// serverRows fetches page as the operator and reads its tasks table as the browser's cells
// op does.
func serverRows(t *testing.T, e *uiEnv, page string) []rowCells {
	t.Helper()
	req, _ := http.NewRequest("GET", e.base+page, nil)
	req.Header.Set("Authorization", "Bearer "+uiOperatorToken)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", page, resp.Status)
	}
	doc, err := html.Parse(resp.Body)
	must(t, err)
	var rows []rowCells
	var walk func(n *html.Node, inTasks bool)
	walk = func(n *html.Node, inTasks bool) {
		if n.Type == html.ElementNode && n.Data == "table" && attr(n, "id") == "tasks" {
			inTasks = true
		}
		if inTasks && n.Type == html.ElementNode && n.Data == "tr" && attr(n, "data-task") != "" {
			r := rowCells{Task: attr(n, "data-task")}
			for td := n.FirstChild; td != nil; td = td.NextSibling {
				if td.Type != html.ElementNode {
					continue
				}
				c := cell{Text: strings.TrimSpace(textOf(td)), Badges: []string{}}
				badges(td, &c.Badges)
				r.Cells = append(r.Cells, c)
			}
			rows = append(rows, r)
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inTasks)
		}
	}
	walk(doc, false)
	return rows
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func textOf(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textOf(c))
	}
	return b.String()
}

// badges collects the sorted classes of each span.state under n, in document order.
func badges(n *html.Node, out *[]string) {
	if n.Type == html.ElementNode && n.Data == "span" {
		cls := strings.Fields(attr(n, "class"))
		if slices.Contains(cls, "state") {
			slices.Sort(cls)
			*out = append(*out, strings.Join(cls, " "))
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		badges(c, out)
	}
}
