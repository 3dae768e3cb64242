package web

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/dispatch"
)

// TestServer_LearnShown (#30): a learn dispatch is marked learn on the dispatches page and its
// own page; another dispatch is not. Failed before: the pages had no such mark.
func TestServer_LearnShown(t *testing.T) {
	now := time.Now()
	recs := map[string]*dispatch.Record{
		"d1": {ID: "d1", State: dispatch.StateFinished, Subagent: "learner", CreatedAt: now, EndedAt: &now, Learn: true},
		"d2": {ID: "d2", State: dispatch.StateFinished, Subagent: "plain", CreatedAt: now, EndedAt: &now},
	}
	e := startWith(t, Sources{Orch: newFakeOrch(), Dispatches: fakeDispatches{recs}})
	c, _ := login(t, e, readToken)
	get := func(path string) string {
		resp, err := c.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		return string(b)
	}
	if b := get("/dispatches/d1"); !strings.Contains(b, `id="d-learn"`) {
		t.Errorf("the learn dispatch's page does not say learn")
	}
	if b := get("/dispatches/d2"); strings.Contains(b, `id="d-learn"`) {
		t.Errorf("a dispatch that is not a learn one is marked learn")
	}
	if b := get("/dispatches"); strings.Count(b, `<span class="learn">(learn)</span>`) != 1 {
		t.Errorf("the dispatches page marks %d dispatches learn, want 1", strings.Count(b, `<span class="learn">(learn)</span>`))
	}
}
