package web

import (
	"embed"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/agora-dev/agora/internal/agenttext"
	"github.com/agora-dev/agora/internal/orch/api"
)

// Everything the pages use is in the binary: templates, one stylesheet, one script.
//
//go:embed assets/pages.html assets/app.css assets/app.js
var assets embed.FS

func staticHandler() http.Handler {
	sub, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/static/")
		if name != "app.css" && name != "app.js" {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/" + name
		files.ServeHTTP(w, r2)
	})
}

type pages struct{ t *template.Template }

func newPages() (*pages, error) {
	t, err := template.New("pages").Funcs(template.FuncMap{
		"when":  fmtTime,
		"since": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"dur":   fmtDur,
		"bytes": fmtBytes,
		"join":  strings.Join,
		"add":   func(a, b int) int { return a + b },
		"dict":  func(p pageData, v *dispatchView) detailData { return detailData{Page: p, View: v} },
		"word":  plainWord,
		"taskrow": func(run string, t api.Task) taskRow {
			return taskRow{RunID: run, Task: t}
		},
	}).ParseFS(assets, "assets/pages.html")
	if err != nil {
		return nil, err
	}
	return &pages{t: t}, nil
}

// pageData is what every page template gets; Body is the page's own view.
type pageData struct {
	Title    string
	Who      string
	Operator bool
	CSRF     string
	Error    string
	Next     string
	// SignIn offers the identity provider's sign-in on the login page.
	SignIn bool
	Nav    string
	Body   any
}

// detailData is the dispatch detail's view inside a page (a dispatch's or a task's).
type detailData struct {
	Page pageData
	View *dispatchView
}

// render writes page name. It is rendered whole first, so a template error answers 500
// rather than half a page, and escaped whole (agenttext.go).
func (p *pages) render(w http.ResponseWriter, name string, d pageData) {
	var b strings.Builder
	if err := p.t.ExecuteTemplate(&b, name, d); err != nil {
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	io.WriteString(w, agenttext.Escape(b.String()))
}

// fragment renders template name with v alone (no page around it), escaped as a page is.
func (p *pages) fragment(name string, v any) (string, error) {
	var b strings.Builder
	if err := p.t.ExecuteTemplate(&b, name, v); err != nil {
		return "", err
	}
	return agenttext.Escape(b.String()), nil
}

func fmtTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "-"
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v == nil {
			return "-"
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	}
	return "-"
}

func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return strings.TrimSuffix(strings.TrimSuffix(fmtFloat(float64(n)/(1<<20)), "0"), ".") + " MiB"
	case n >= 1<<10:
		return strings.TrimSuffix(strings.TrimSuffix(fmtFloat(float64(n)/(1<<10)), "0"), ".") + " KiB"
	}
	return itoa(n) + " B"
}

// plainWord reports whether s may be a path segment of a form's action as it is: letters,
// digits, '_' and '-' only (the gateway's call ids). Anything else could be read by the
// browser as dot segments, a query or a fragment ("x/../../runs/R/cancel?x=" would make an
// Approve button cancel a run), and percent-encoding does not help ("%2e%2e" is ".." to a
// browser); such a call is decided from the CLI, never posted to a path it composes.
func plainWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}
