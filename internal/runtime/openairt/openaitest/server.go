// Package openaitest is a scripted model endpoint for tests: an HTTP server that speaks the
// OpenAI chat-completions wire format faithfully, as JSON and as a chat.completion.chunk
// event stream whose deltas are split across many chunks (tool-call arguments mid-string
// included). Each request is validated as the API validates it (model, message shape, tool
// messages answering the tool calls before them; a 400 with the API's error body otherwise),
// recorded with its headers, and answered by the next [Step] of the script.
//
// It serves over TCP and, with [Server.ServeUnix], over a Unix socket, the way the worker
// reaches the model through the host-side gateway. It is test-only code for openairt, worker
// and gateway tests; nothing outside a _test.go file may import it.
package openaitest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// chatPath is where the API serves chat completions; base URLs end in /v1.
	chatPath = "/v1/chat/completions"
	// maxRequestBytes caps a request body, like the API's own limit.
	maxRequestBytes = 32 << 20
	// UnixBaseURL is the base URL to use with [UnixClient]: the host is ignored, the
	// client always dials the socket.
	UnixBaseURL = "http://openaitest.invalid/v1"
)

// Request is one request the server received.
type Request struct {
	Method, Path string
	// Header is a copy of the request headers.
	Header http.Header
	// Raw is the body as sent; Body is its decoding (partial when Rejected).
	Raw  []byte
	Body ChatRequest
	// Rejected is the error message of a request the server refused (400, 401, 404...)
	// before the script saw it; empty for an accepted request.
	Rejected string
}

// Server is a scripted chat-completions endpoint. Its methods are safe for concurrent use.
type Server struct {
	tb  testing.TB
	ts  *httptest.Server
	wg  sync.WaitGroup // handlers in flight
	now func() time.Time

	mu     sync.Mutex // guards the fields below
	script []Step
	next   int
	reqs   []Request
	apiKey string
	calls  int
	unix   []*unixServer
}

type unixServer struct {
	srv  *http.Server
	done chan struct{}
}

// New starts a server on a loopback TCP port that answers requests with script, in order.
// It is closed when the test ends. A request beyond the script fails the test and gets a 500.
func New(tb testing.TB, script ...Step) *Server {
	tb.Helper()
	s := &Server{tb: tb, script: script, now: time.Now}
	s.ts = httptest.NewServer(s)
	tb.Cleanup(s.close)
	return s
}

// URL is the base URL of the TCP listener, ending in /v1.
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Client returns an HTTP client for the TCP listener.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// RequireAPIKey makes the server answer 401, as the API does, unless a request carries
// "Authorization: Bearer key". By default no key is required.
func (s *Server) RequireAPIKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// Requests returns every request received so far, refused ones included, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	copy(out, s.reqs)
	return out
}

// Accepted returns the requests the script answered, in order.
func (s *Server) Accepted() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Rejected == "" {
			out = append(out, r)
		}
	}
	return out
}

// ServeUnix also serves on a Unix socket at path until the test ends. Reach it with
// [UnixClient] and [UnixBaseURL].
func (s *Server) ServeUnix(path string) {
	s.tb.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		s.tb.Fatalf("openaitest: listen on unix socket: %v", err)
	}
	u := &unixServer{srv: &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		_ = u.srv.Serve(ln)
	}()
	s.mu.Lock()
	s.unix = append(s.unix, u)
	s.mu.Unlock()
}

// UnixClient returns an HTTP client that dials the Unix socket at path for every request,
// as the worker's client dials the gateway.
func UnixClient(tb testing.TB, path string) *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableCompression: true,
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func (s *Server) close() {
	s.ts.Close()
	s.mu.Lock()
	unix := s.unix
	s.mu.Unlock()
	for _, u := range unix {
		_ = u.srv.Close()
		<-u.done
	}
	s.wg.Wait()
}

// ServeHTTP handles one request. Steps run on the handler goroutine: they may call t.Errorf,
// never t.Fatal.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.wg.Add(1)
	defer s.wg.Done()
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
	reject := func(e *apiError) {
		rec.Rejected = e.Message
		s.record(rec)
		writeError(w, e)
	}
	switch {
	case err != nil:
		reject(&apiError{Status: 400, Message: "could not read the request body"})
		return
	case len(raw) > maxRequestBytes:
		reject(&apiError{Status: 413, Message: "request body too large"})
		return
	case r.URL.Path != chatPath:
		reject(&apiError{Status: 404, Message: "Invalid URL (" + r.Method + " " + r.URL.Path + ")"})
		return
	case r.Method != http.MethodPost:
		reject(&apiError{Status: 405, Message: "Invalid method for URL (" + r.Method + " " + r.URL.Path + ")"})
		return
	}
	s.mu.Lock()
	key := s.apiKey
	s.mu.Unlock()
	if key != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || got == "":
			reject(&apiError{Status: 401, Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", Code: ""})
			return
		case got != key:
			reject(&apiError{Status: 401, Message: "Incorrect API key provided.", Code: "invalid_api_key"})
			return
		}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		reject(invalid("", "Invalid Content-Type header (%s), expected application/json.", ct))
		return
	}
	body, aerr := decodeRequest(raw)
	rec.Body = body
	if aerr != nil {
		reject(aerr)
		return
	}
	step, n, ok := s.take(rec)
	if !ok {
		s.tb.Errorf("openaitest: request %d is beyond the script", n)
		writeError(w, &apiError{Status: 500, Message: "openaitest: the script has no step for this request"})
		return
	}
	reply := step.reply(rec)
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	switch {
	case reply.Raw != "":
		ct := reply.RawContentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		_, _ = io.WriteString(w, reply.Raw)
	case reply.Status != 0 && reply.Status != http.StatusOK:
		writeError(w, &apiError{Status: reply.Status, Message: reply.Message})
	case body.Streaming():
		s.writeStream(w, body, s.complete(body, reply))
	default:
		s.writeJSON(w, body, s.complete(body, reply))
	}
}

// record appends a request.
func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

// take records an accepted request and returns the step that answers it and its number.
func (s *Server) take(r Request) (Step, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	n := 0
	for _, q := range s.reqs {
		if q.Rejected == "" {
			n++
		}
	}
	if s.next >= len(s.script) {
		return Step{}, n, false
	}
	st := s.script[s.next]
	if !st.repeat {
		s.next++
	}
	return st, n, true
}
