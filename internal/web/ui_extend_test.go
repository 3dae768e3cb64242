package web_test

import (
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/web"
)

// TestUI_AddedTasksLinked: in headless Chromium, the graph of a run draws the tasks it added,
// a click on an item's node (its id holds brackets, which the page's script escapes) lands on
// its task page, and a reviewer's reasons show as text, never as markup.
func TestUI_AddedTasksLinked(t *testing.T) {
	requireUI(t)
	base, token := web.AddedRunServer(t)
	b := newBrowser(t, base)
	b.login(token)
	b.must(map[string]any{"op": "goto", "path": "/runs/run1"})
	b.must(map[string]any{"op": "waitSelector", "selector": `svg#dag g.node[data-task="each[pkg-1]"]`, "timeout": 10000})
	if n := b.must(map[string]any{"op": "count", "selector": "svg#dag g.node"}).N; n != 7 {
		t.Errorf("the graph has %d nodes, want 7", n)
	}
	if n := b.must(map[string]any{"op": "count", "selector": `svg#dag g.node.st-rejected[data-task="docs.fix-1"]`}).N; n != 1 {
		t.Errorf("the rejected fix's node is not drawn rejected (%d)", n)
	}
	b.shot("run-added")
	a := b.must(map[string]any{"op": "click", "selector": `svg#dag g.node[data-task="each[pkg-1]"]`, "nav": true})
	if !strings.HasSuffix(a.URL, "/runs/run1/tasks/each%5Bpkg-1%5D") {
		t.Errorf("clicking the node of each[pkg-1] went to %s", a.URL)
	}
	if got := txt(b, "#t-added"); !strings.Contains(got, "an item of fan-out each") {
		t.Errorf("the item's page says %q", got)
	}
	b.must(map[string]any{"op": "goto", "path": "/runs/run1/tasks/docs.review-r1"})
	b.shot("task-review")
	if got := txt(b, "#t-review"); !strings.Contains(got, "rejects") || !strings.Contains(got, "no test <script>alert(1)</script>") {
		t.Errorf("the review shows %q, want the reason as text", got)
	}
	if n := b.must(map[string]any{"op": "count", "selector": "#t-review script"}).N; n != 0 {
		t.Errorf("the reviewer's reason made %d script elements", n)
	}
}
