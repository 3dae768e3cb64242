package web_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestUI_RedTeamWeb_LoginNextDotSegments logs in, in headless Chromium, from login pages
// whose next a browser resolves with dot segments, encoded dots and slashes, or reads past
// a query or fragment: every login lands on this server and Chromium asks no other origin
// for anything (the unit tests check the targets with Go's parser; this asks the
// browser's).
func TestUI_RedTeamWeb_LoginNextDotSegments(t *testing.T) {
	requireUI(t)
	e := newUIEnv(t)
	b := newBrowser(t, e.base)
	for _, next := range []string{
		"/.//evil.example", "/..//evil.example/x", "/%2e//evil.example", "/%2e%2e//evil.example", "/%2e%2e/%2f%2fevil.example",
		"/.%2f/evil.example", "/runs/..//evil.example", "/./..//evil.example", "/?//evil.example", "/#//evil.example",
		"/%E2%88%95%E2%88%95evil.example", "/@evil.example", "/:@evil.example",
	} {
		b.must(map[string]any{"op": "goto", "path": "/login?next=" + url.QueryEscape(next)})
		b.must(map[string]any{"op": "fill", "selector": "#token", "value": uiOperatorToken})
		a := b.do(map[string]any{"op": "click", "selector": "#login", "nav": true})
		if !a.OK || !strings.HasPrefix(a.URL, e.base+"/") {
			t.Errorf("login with next=%q ended at %q (%s), want a page of %s", next, a.URL, a.Error, e.base)
		}
	}
	if rep := b.must(map[string]any{"op": "report"}); len(rep.Offsite) > 0 {
		t.Errorf("logins asked other origins for %v", rep.Offsite)
	}
}
