package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hostileNext are login redirect targets that a browser could read as another origin, once
// it has done its own normalisation: TAB, CR and LF removed anywhere, a backslash read as a
// slash, a leading "//" read as a host, and percent-encoded forms of all of these.
var hostileNext = []string{
	"/\t/evil.example/x", // what ?next=/%09/evil.example/x decodes to
	"/%09/evil.example/x",
	"/\n/evil.example", "/\r/evil.example", "/\r\n/evil.example",
	"\t//evil.example", " //evil.example", "//evil.example/x", "///evil.example",
	"/\\evil.example", "\\\\evil.example", "/\\/evil.example", "\\/evil.example",
	"/%5Cevil.example", "/%5cevil.example", "/%2F/evil.example", "/%2f%2fevil.example",
	"/%252F%252Fevil.example", "/%25%32%46/evil.example",
	"https:evil.example", "https://evil.example/", "http:/evil.example", "HTTPS://evil.example",
	"javascript:alert(1)", "data:text/html,x", "evil.example", "%2F%2Fevil.example",
	"/\x00/evil.example", "/\x0b/evil.example", "/\u3000/evil.example", "/\uff0f/evil.example",
	"/runs\x00x", "/runs#\t//evil",
}

// TestServer_LoginNextStaysOnThisServer logs in through the real handler with every hostile
// next, given directly to POST /login and carried through GET /login?next=..., and checks
// the browser is sent to "/" on this server (Location: /\t/evil.example/x
// would send a fresh operator to evil.example).
func TestServer_LoginNextStaysOnThisServer(t *testing.T) {
	e := start(t)
	for _, next := range hostileNext {
		resp := postLogin(t, e.base, url.Values{"token": {opToken}, "next": {next}})
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/" {
			t.Errorf("POST /login next=%q: status %d, Location %q; want 303 to /", next, resp.StatusCode, loc)
		}
		// The login page keeps next in its form: what it keeps must be harmless too.
		resp, err := http.Get(e.base + "/login?next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if kept := hiddenNext(string(body)); kept != "" {
			t.Errorf("GET /login?next=%q keeps next %q in its form, want none", next, kept)
		}
	}
	for next, want := range map[string]string{
		"/runs/r1":                  "/runs/r1",
		"/runs?state=failed":        "/runs?state=failed",
		"/dispatches/d1":            "/dispatches/d1",
		"/runs/r1/tasks/a#x":        "/runs/r1/tasks/a",
		"/runs/a%20b":               "/runs/a%20b",
		"":                          "/",
		"/audit?kind=tool.call&x=1": "/audit?kind=tool.call&x=1",
	} {
		resp := postLogin(t, e.base, url.Values{"token": {opToken}, "next": {next}})
		if loc := resp.Header.Get("Location"); loc != want {
			t.Errorf("POST /login next=%q: Location %q, want %q", next, loc, want)
		}
	}
}

// postLogin posts the login form and returns the answer as sent: a round trip of the
// transport, so a Location the client could not parse is still seen.
func postLogin(t *testing.T, base string, form url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// hiddenNext is the value of the login form's hidden next field.
func hiddenNext(page string) string {
	_, rest, ok := strings.Cut(page, `name="next" value="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// fromSource is an HTTP client whose connections leave from the loopback address src
// (127.0.0.0/8 is all this host's), so the server sees a different source per address.
func fromSource(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	jar, _ := cookiejar.New(nil)
	return &http.Client{
		Jar:           jar,
		Transport:     &http.Transport{DialContext: func(ctx context.Context, n, a string) (net.Conn, error) { return d.DialContext(ctx, n, a) }},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func loginStatus(t *testing.T, c *http.Client, base, token string) int {
	t.Helper()
	resp, err := c.PostForm(base+"/login", url.Values{"token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServer_LoginFloodIsPerSource floods the login with wrong tokens from one source: that
// source's guesses are limited (429), while another source's guesses are not, and a correct
// token gets in from every source, the flooding one included (one global
// bucket would let anyone who reaches the port lock every browser out). The server's clock stands
// still: to the limiter the whole flood is one instant, however slowly a loaded machine
// serves it, so exactly the burst gets through.
func TestServer_LoginFloodIsPerSource(t *testing.T) {
	var at atomic.Int64
	at.Store(time.Now().UnixNano())
	e := start(t, func(c *Config) { c.Now = func() time.Time { return time.Unix(0, at.Load()) } })
	attacker, victim, other := fromSource("127.0.0.2"), fromSource("127.0.0.1"), fromSource("127.0.0.3")
	var wg sync.WaitGroup
	limited := make(chan int, 200)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				limited <- loginStatus(t, attacker, e.base, fmt.Sprintf("wrong-%d-%d-0123456789abcdef0123456789abcdef", w, i))
			}
		}()
	}
	wg.Wait()
	close(limited)
	n429 := 0
	for code := range limited {
		if code == http.StatusTooManyRequests {
			n429++
		} else if code != http.StatusUnauthorized {
			t.Errorf("a wrong token answered %d", code)
		}
	}
	if n429 == 0 {
		t.Error("200 wrong tokens from one source in a burst were never limited")
	}
	if n429 != 200-loginBurst {
		t.Errorf("%d of 200 wrong tokens from one source in one instant were limited, want all but the burst (%d)", n429, 200-loginBurst)
	}
	if code := loginStatus(t, attacker, e.base, "wrong-again-0123456789abcdef0123456789abcdef"); code != http.StatusTooManyRequests {
		t.Errorf("the flooding source's next wrong token: status %d, want 429", code)
	}
	// A second on the server's clock gives the source loginRate guesses back, and no more.
	at.Add(int64(time.Second))
	for i := range loginRate + 1 {
		want := http.StatusUnauthorized
		if i == loginRate {
			want = http.StatusTooManyRequests
		}
		if code := loginStatus(t, attacker, e.base, fmt.Sprintf("wrong-later-%d-0123456789abcdef0123456789abcdef", i)); code != want {
			t.Errorf("wrong token %d a second after the flood: status %d, want %d", i+1, code, want)
		}
	}
	for name, c := range map[string]*http.Client{"another source": victim, "the flooding source": attacker} {
		if code := loginStatus(t, c, e.base, opToken); code != http.StatusSeeOther {
			t.Errorf("the operator's token from %s during the flood: status %d, want 303", name, code)
		}
		if code := loginStatus(t, c, e.base, readToken); code != http.StatusSeeOther {
			t.Errorf("the viewer's token from %s during the flood: status %d, want 303", name, code)
		}
	}
	if code := loginStatus(t, other, e.base, "typo-0123456789abcdef0123456789abcdef"); code != http.StatusUnauthorized {
		t.Errorf("one wrong token from a third source during the flood: status %d, want 401 (not limited)", code)
	}
}

// TestServer_SessionsBoundedPerToken logs in with the read-only token more times than the
// server keeps sessions: the operator still logs in and acts, the reader's newest sessions
// work and its oldest is gone (otherwise a read-only token fills all 1,024 sessions
// and the operator gets 503).
func TestServer_SessionsBoundedPerToken(t *testing.T) {
	e := start(t)
	first, _ := login(t, e, readToken)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range 1100 {
		if code := loginStatus(t, c, e.base, readToken); code != http.StatusSeeOther {
			t.Fatalf("the reader's login %d: status %d", i, code)
		}
	}
	last, _ := login(t, e, readToken)
	op, csrf := login(t, e, opToken)
	resp, err := op.PostForm(e.base+"/runs/run1/retry", url.Values{"csrf": {csrf}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the operator's retry after the reader's logins: status %d", resp.StatusCode)
	}
	for name, cl := range map[string]*http.Client{"newest": last, "oldest": first} {
		resp, err := cl.Get(e.base + "/runs")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusOK
		if name == "oldest" {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want {
			t.Errorf("the reader's %s session: status %d, want %d", name, resp.StatusCode, want)
		}
	}
}
