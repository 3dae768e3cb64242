package modelgw

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestGateway_ModelInjectsKey(t *testing.T) {
	type seen struct {
		method, path, query, body string
		header                    http.Header
	}
	got := make(chan seen, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Clone()}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1"}`)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test") + "/v1/", APIKey: []byte(testKey)})

	reqBody := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions?api_key=from-sandbox", http.Header{
		"Content-Type":        {"application/json"},
		"Accept":              {"application/json"},
		"Authorization":       {"Bearer sk-sandbox-forged-key-0000"},
		"Proxy-Authorization": {"Basic Zm9vOmJhcg=="},
		"Cookie":              {"session=abc"},
		"X-Api-Key":           {"sandbox"},
		"X-Forwarded-For":     {"10.0.0.1"},
		"Accept-Encoding":     {"identity"},
	}, reqBody)
	if resp.StatusCode != http.StatusOK || string(body) != `{"id":"chatcmpl-1"}` {
		t.Fatalf("got %d %q, want 200 and the upstream body", resp.StatusCode, body)
	}
	s := <-got
	if s.method != http.MethodPost || s.path != "/v1/chat/completions" || s.query != "" || s.body != reqBody {
		t.Errorf("upstream got %s %s ?%s body %q, want POST /v1/chat/completions, no query, the request body", s.method, s.path, s.query, s.body)
	}
	if a := s.header.Get("Authorization"); a != "Bearer "+testKey {
		t.Errorf("upstream got Authorization %q, want the configured key as a bearer token", a)
	}
	var names []string
	for k := range s.header {
		names = append(names, k)
	}
	slices.Sort(names)
	// Accept-Encoding is the gateway's own, whatever the sandbox asked for.
	want := []string{"Accept", "Accept-Encoding", "Authorization", "Content-Length", "Content-Type", "User-Agent"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("upstream request headers (-want +got):\n%s", diff)
	}
	if ae := s.header.Values("Accept-Encoding"); len(ae) != 1 || ae[0] != "identity" {
		t.Errorf("upstream got Accept-Encoding %q, want the gateway's identity", ae)
	}
	rec := h.audit.lastGateway(t, 1)
	wantRecord(t, rec, routeModelChat, decisionAllowed, http.StatusOK, "")
	if rec["host"] != "model.test" || rec["path"] != "/v1/chat/completions" || rec["method"] != "POST" {
		t.Errorf("got record host %v path %v method %v, want model.test /v1/chat/completions POST", rec["host"], rec["path"], rec["method"])
	}
	if rec["bytes_in"] != int64(len(reqBody)) || rec["bytes_out"] != int64(len(body)) {
		t.Errorf("got record bytes in/out %v/%v, want %d/%d", rec["bytes_in"], rec["bytes_out"], len(reqBody), len(body))
	}
	if strings.Contains(fmt.Sprint(h.audit.all()), "from-sandbox") {
		t.Error("the audit log holds the query string")
	}
	wantNoKeyInAudit(t, h.audit)
}

func TestGateway_ModelWithoutKey(t *testing.T) {
	auth := make(chan []string, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Values("Authorization")
		io.WriteString(w, `{"data":[]}`)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test")})
	resp, _ := h.do(t, http.MethodGet, "/model/models", http.Header{"Authorization": {"Bearer sk-sandbox-forged-key-0000"}}, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200", resp.StatusCode)
	}
	if got := <-auth; got != nil {
		t.Errorf("upstream got Authorization %q, want none (no key configured, the sandbox's dropped)", got)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelModels, decisionAllowed, http.StatusOK, "")
}

// echoKey is an upstream that echoes the key it was sent everywhere it can.
func echoKey(stream bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		b64 := base64.StdEncoding.EncodeToString([]byte(key))
		for _, h := range []string{"X-Request-Id", "X-Ratelimit-Remaining-Tokens", "Set-Cookie", "Www-Authenticate", "X-Echo", "Location"} {
			w.Header().Set(h, "k="+key)
		}
		if !stream {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","b64":"%s","hex":"%x"}}`, key, b64, key)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		fmt.Fprintf(w, "data: {\"echo\":\"%s\"}\n\n", key)
		rc.Flush()
		// The key split across two writes within one line is still masked.
		fmt.Fprintf(w, "data: {\"split\":\"%s", key[:10])
		rc.Flush()
		time.Sleep(20 * time.Millisecond)
		fmt.Fprintf(w, "%s\",\"b64\":\"%s\"}\n\n", key[10:], b64)
		io.WriteString(w, "data: [DONE]\n\n")
	}
}

func TestGateway_KeyNeverReachesSandbox(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		want   string
	}{
		{name: "JSON", stream: false, want: "HTTP/1.1 401"},
		{name: "EventStream", stream: true, want: "data: [DONE]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, echoKey(tc.stream))
			h := start(t, Config{ModelBaseURL: up.at("model.test") + "/v1", APIKey: []byte(testKey)})
			body := `{"model":"m","stream":true}`
			out := h.raw(t, "POST /model/chat/completions HTTP/1.1\r\nHost: gateway\r\n"+
				"Content-Type: application/json\r\nConnection: close\r\n"+
				fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(body), body))
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("got response %q, want it to contain %q", out, tc.want)
			}
			wantNoKey(t, "response", out)
			head, _, _ := strings.Cut(string(out), "\r\n\r\n")
			if !strings.Contains(head, "X-Request-Id: k=[REDACTED]") || !strings.Contains(head, "X-Ratelimit-Remaining-Tokens: k=[REDACTED]") {
				t.Errorf("got header %q, want X-Request-Id and X-Ratelimit-* passed with the key masked", head)
			}
			for _, dropped := range []string{"Set-Cookie", "Www-Authenticate", "X-Echo", "Location"} {
				if strings.Contains(head, dropped) {
					t.Errorf("got header %q, want no %s", head, dropped)
				}
			}
			if n := strings.Count(string(out), "[REDACTED]"); n < 4 {
				t.Errorf("got %d masks in %q, want the key masked in headers and body", n, out)
			}
			h.audit.waitGateway(t, 1)
			wantNoKeyInAudit(t, h.audit)
		})
	}
}

func TestGateway_ModelStreamsIncrementally(t *testing.T) {
	next := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		rc := http.NewResponseController(w)
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
			rc.Flush()
			select { // the next chunk only once the test has read this one
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey)})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/model/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("got Content-Type %q, want the upstream's", ct)
	}
	br := bufio.NewReader(resp.Body)
	for i := 1; i <= 3; i++ {
		line := make(chan string, 1)
		go func() {
			l, _ := br.ReadString('\n')
			br.ReadString('\n') // the blank line ending the event
			line <- l
		}()
		select {
		case l := <-line:
			if want := fmt.Sprintf("data: {\"n\":%d}\n", i); l != want {
				t.Fatalf("got event line %q, want %q", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d did not arrive while the upstream waited: the gateway buffers the stream", i)
		}
		next <- struct{}{}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Errorf("got %q after the last event, want nothing", rest)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionAllowed, http.StatusOK, "")
}

func TestGateway_ModelRoutesRefused(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey)})
	refused := map[string]int{} // by route and status: counted, not recorded alone
	for _, tc := range []struct {
		name, method, path string
		status             int
		route              string
	}{
		{"Embeddings", http.MethodPost, "/model/embeddings", http.StatusNotFound, routeModelOther},
		{"DotDot", http.MethodPost, "/model/../fetch", http.StatusNotFound, routeModelOther},
		{"NestedChat", http.MethodPost, "/model/v1/chat/completions", http.StatusNotFound, routeModelOther},
		{"ChatWithGET", http.MethodGet, "/model/chat/completions", http.StatusMethodNotAllowed, routeModelChat},
		{"ModelsWithPOST", http.MethodPost, "/model/models", http.StatusMethodNotAllowed, routeModelModels},
		{"Root", http.MethodGet, "/", http.StatusNotFound, routeUnknown},
		{"FetchWithGET", http.MethodGet, "/fetch", http.StatusMethodNotAllowed, routeFetch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.do(t, tc.method, tc.path, nil, "{}")
			if resp.StatusCode != tc.status {
				t.Fatalf("got %d %q, want %d", resp.StatusCode, body, tc.status)
			}
			errorOf(t, body)
			k := fmt.Sprint(tc.route, tc.status)
			refused[k]++
			wantRefused(t, h, tc.route, tc.status, refused[k])
		})
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
}

func TestGateway_NoModelRoute(t *testing.T) {
	h := start(t, Config{})
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(errorOf(t, body), "no model endpoint") {
		t.Fatalf("got %d %q, want 404 naming the missing model endpoint", resp.StatusCode, body)
	}
	wantRefused(t, h, routeModelChat, http.StatusNotFound, 1)
}

func TestGateway_ModelRedirectNotFollowed(t *testing.T) {
	other := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.at("model.test")+"/steal", http.StatusTemporaryRedirect)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey)})
	resp, _ := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	if resp.StatusCode != http.StatusTemporaryRedirect {
		t.Errorf("got status %d, want the upstream's 307 passed back", resp.StatusCode)
	}
	if n := other.hits.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests (with the key), want 0", n)
	}
	if loc := resp.Header.Get("Location"); loc != "" {
		t.Errorf("got Location %q, want none passed", loc)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionAllowed, http.StatusTemporaryRedirect, "307")
}

func TestGateway_ModelLoopbackRefusedByDefault(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	// model.test resolves to 127.0.0.1, which the default egress policy refuses at dial time.
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey), Dialer: defaultDialer()})
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	if msg := errorOf(t, body); resp.StatusCode != http.StatusForbidden || msg != "address 127.0.0.1 is loopback" {
		t.Errorf("got %d %q, want 403 %q", resp.StatusCode, msg, "address 127.0.0.1 is loopback")
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionDenied, http.StatusForbidden, "loopback")

	// A loopback literal is refused before anything listens.
	_, err := Listen(t.Context(), shortDir(t)+"/gw.sock", Config{
		DispatchID: testDispatchID, Role: testRole, ModelBaseURL: up.URL,
		Dialer: defaultDialer(), Audit: &fakeAuditor{},
	})
	if err == nil || !strings.Contains(err.Error(), "address 127.0.0.1 is loopback") {
		t.Errorf("listen with a loopback model URL: got %v, want a refusal naming the loopback address", err)
	}
}

func TestGateway_ModelUpstreamDown(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {})
	base := up.at("model.test")
	up.Close()
	h := start(t, Config{ModelBaseURL: base, APIKey: []byte(testKey)})
	resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`)
	if msg := errorOf(t, body); resp.StatusCode != http.StatusBadGateway || !strings.Contains(msg, "upstream request failed") {
		t.Errorf("got %d %q, want 502 upstream request failed", resp.StatusCode, msg)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionError, http.StatusBadGateway, "connection refused")
	wantNoKeyInAudit(t, h.audit)
}

func TestGateway_ModelResponseOverCap(t *testing.T) {
	for _, tc := range []struct {
		name, contentType string
	}{
		{"JSON", "application/json"},
		{"EventStream", "text/event-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				for range 64 {
					io.WriteString(w, "data: "+strings.Repeat("x", 57)+"\n") // 64 bytes a line
				}
			})
			h := start(t, Config{ModelBaseURL: up.at("model.test"), MaxBody: 1024})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://gateway/model/chat/completions", strings.NewReader(`{"model":"m"}`))
			// The cut may come before the buffered header is sent (Do fails) or after (the read does).
			resp, err := h.client.Do(req)
			var b []byte
			if err == nil {
				b, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if err == nil {
				t.Errorf("read a %d byte body without error, want the response cut off at the cap", len(b))
			}
			if len(b) > 1024 {
				t.Errorf("got %d body bytes, want at most the 1024 byte cap", len(b))
			}
			wantRecord(t, h.audit.lastGateway(t, 1), routeModelChat, decisionError, http.StatusOK, "over the 1024 byte limit")
		})
	}
}
