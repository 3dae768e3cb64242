package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/orch"
	"github.com/agora-dev/agora/internal/orch/api"
)

// TestRedTeam29_ConflictIsInertJSON: an action the engine refuses
// (posted straight at the endpoint, without a button: a script's bearer, or a stale page's
// form with its CSRF token) answers 409 as JSON: application/json with nosniff, "conflict:"
// once, and the engine's words, whatever they hold (markup, a bidirectional override, a
// "conflict:" of their own), inert: no raw '<', no raw override. Without the CSRF token the
// same form is refused before the engine is asked.
func TestRedTeam29_ConflictIsInertJSON(t *testing.T) {
	o := newFakeOrch(api.Task{ID: "a", State: lifecycle.TaskFailed, Subagent: "coder"})
	o.refuse = fmt.Errorf("%w: run <img src=x onerror=alert(1)> is sealed (conflict: \u202eexe.fdp); a sealed run accepts no further changes", orch.ErrConflict)
	e := startWith(t, Sources{Orch: o, Dispatches: fakeDispatches{}})
	browser, csrf := login(t, e, opToken)
	for _, path := range []string{"/runs/run1/cancel", "/runs/run1/retry", "/runs/run1/tasks/a/cancel", "/runs/run1/tasks/a/answer"} {
		for _, via := range []string{"bearer", "form"} {
			var resp *http.Response
			var err error
			if via == "bearer" {
				req, _ := http.NewRequest("POST", e.base+path, strings.NewReader(url.Values{"answer": {"yes"}}.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Authorization", "Bearer "+opToken)
				req.Header.Set("Accept", "application/json")
				resp, err = http.DefaultClient.Do(req)
			} else {
				resp, err = browser.PostForm(e.base+path, url.Values{"answer": {"yes"}, "csrf": {csrf}})
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(b)
			var got api.Error
			switch {
			case resp.StatusCode != http.StatusConflict:
				t.Errorf("%s %s: status %d, want 409: %s", via, path, resp.StatusCode, body)
			case !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("X-Content-Type-Options") != "nosniff":
				t.Errorf("%s %s: Content-Type %q, nosniff %q", via, path, resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"))
			case strings.ContainsAny(body, "<>\u202e"):
				t.Errorf("%s %s: the 409 carries raw markup or an override: %s", via, path, body)
			case json.Unmarshal(b, &got) != nil || got.Code != "conflict" || !strings.HasPrefix(got.Error, "conflict: run <img") || strings.HasPrefix(got.Error, "conflict: conflict"):
				t.Errorf("%s %s: %s, want {error: \"conflict: run <img...\", code: conflict} with one leading conflict:", via, path, body)
			}
		}
		// The form without its token never reaches the engine's refusal.
		resp, err := browser.PostForm(e.base+path, url.Values{"answer": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("form %s without its CSRF token: %d, want 403", path, resp.StatusCode)
		}
	}
	if len(o.actions) != 0 {
		t.Errorf("refused actions were recorded: %+v", o.actions)
	}
}
