package web_test

import (
	"encoding/json"
	"net/url"
	"os/exec"
	"strings"
	"testing"
)

// TestUI_LoginNextLandsHere logs in, in headless Chromium, from login pages whose next points
// off the server in the ways a browser normalises (a TAB it drops, a backslash it reads as a
// slash, a leading //, encoded forms, a scheme): every login lands on this server, and the
// browser never asks another origin for anything (login?next=/%09/evil.example/x
// would send a fresh operator to evil.example).
func TestUI_LoginNextLandsHere(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	b := newBrowser(t, e.base)
	for _, query := range []string{
		"next=/%09/evil.example/x", "next=/%0A/evil.example/x", "next=/%5Cevil.example", "next=/%255Cevil.example",
		"next=" + url.QueryEscape(`/\evil.example`), "next=//evil.example", "next=" + url.QueryEscape("https:evil.example"),
		"next=%2F%2Fevil.example", "next=/%2F/evil.example", "next=" + url.QueryEscape(" //evil.example"),
	} {
		b.must(map[string]any{"op": "goto", "path": "/login?" + query})
		b.must(map[string]any{"op": "fill", "selector": "#token", "value": uiOperatorToken})
		a := b.do(map[string]any{"op": "click", "selector": "#login", "nav": true})
		if !a.OK || !strings.HasPrefix(a.URL, e.base+"/") {
			t.Errorf("login from /login?%s ended at %q (%s), want a page of %s", query, a.URL, a.Error, e.base)
		}
	}
	if rep := b.must(map[string]any{"op": "report"}); len(rep.Offsite) > 0 {
		t.Errorf("logins asked other origins for %v", rep.Offsite)
	}
	// A path on this server is still where the login goes.
	b.must(map[string]any{"op": "goto", "path": "/login?next=" + url.QueryEscape("/dispatches")})
	b.must(map[string]any{"op": "fill", "selector": "#token", "value": uiViewerToken})
	if a := b.must(map[string]any{"op": "click", "selector": "#login", "nav": true}); a.URL != e.base+"/dispatches" {
		t.Errorf("login with next=/dispatches ended at %s", a.URL)
	}
}

// TestUI_BidiShownEscaped runs a real agent that writes RIGHT-TO-LEFT OVERRIDE into its
// output, an output file's name and its question, and reads its dispatch page in headless
// Chromium: the text shows the override escaped (invoice\u202efdp.exe) and never holds it.
// An output invoice<U+202E>fdp.exe would read invoiceexe.pdf.
func TestUI_BidiShownEscaped(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	cmd := exec.Command(agoraBin, "dispatch", "run", "--subagent", "bidi", "--repo", e.repo, "-o", "json")
	cmd.Env = e.vars
	out, _ := cmd.Output() // exits 4: the dispatch asks a question
	var rec struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	must(t, json.Unmarshal(out, &rec))
	if rec.State != "needs_input" {
		t.Fatalf("the bidi dispatch ended %q, want needs_input: %s", rec.State, out)
	}
	b := newBrowser(t, e.base)
	b.login(uiViewerToken)
	b.must(map[string]any{"op": "goto", "path": "/dispatches/" + rec.ID})
	b.shot("dispatch-bidi")
	page := txt(b, "main")
	if strings.Contains(page, "\u202e") {
		t.Errorf("the dispatch page shows U+202E as it is: %q", page)
	}
	for _, sel := range []string{"#stdout", "main"} {
		if got := txt(b, sel); !strings.Contains(got, `invoice\u202efdp.exe`) {
			t.Errorf("%s does not show the name escaped (invoice\\u202efdp.exe): %q", sel, got)
		}
	}
	if !strings.Contains(page, `Pay invoice\u202efdp.exe?`) {
		t.Errorf("the question is not shown escaped: %q", page)
	}
	if n := b.must(map[string]any{"op": "count", "selector": "table#outputs tbody tr"}).N; n > 0 {
		if got := txt(b, "table#outputs"); !strings.Contains(got, `invoice\u202efdp.exe`) || strings.Contains(got, "\u202e") {
			t.Errorf("the outputs table shows %q, want the name escaped", got)
		}
	}
}
