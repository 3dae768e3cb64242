package openairt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastBackoff keeps retry tests quick where the server sends no Retry-After.
func fastBackoff(int) time.Duration { return time.Millisecond }

// gotCall is one call the fake tools received.
type gotCall struct {
	Name string
	Args string
}

// fakeTools behaves like a toolreg View: it lists specs, refuses names it does not list (and
// records the refusal, as the View audits it), and runs the rest with run.
type fakeTools struct {
	specs []ToolSpec
	run   func(ctx context.Context, name string, args json.RawMessage) (string, error)

	mu    sync.Mutex
	calls []gotCall
}

var errNotPermitted = errors.New("tool not permitted")

func (f *fakeTools) List() []ToolSpec { return f.specs }

func (f *fakeTools) Call(ctx context.Context, name string, args json.RawMessage) (string, error) {
	f.mu.Lock()
	f.calls = append(f.calls, gotCall{Name: name, Args: string(args)})
	f.mu.Unlock()
	if !slices.ContainsFunc(f.specs, func(s ToolSpec) bool { return s.Name == name }) {
		return "", fmt.Errorf("call %q: %w", name, errNotPermitted)
	}
	if f.run == nil {
		return "ok", nil
	}
	return f.run(ctx, name, args)
}

func (f *fakeTools) got() []gotCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// readTools offers read_file and ask_human; read_file answers "contents of <path>".
func readTools() *fakeTools {
	return &fakeTools{
		specs: []ToolSpec{
			{Name: "read_file", Description: "Read a workspace file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "ask_human", Description: "Ask a person"},
		},
		run: func(_ context.Context, name string, args json.RawMessage) (string, error) {
			var a struct {
				Path     string `json:"path"`
				Question string `json:"question"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			if name == "ask_human" {
				return "", fmt.Errorf("ask: %w", needsInputError{a.Question})
			}
			return "contents of " + a.Path, nil
		},
	}
}

// needsInputError is what a View's ask_human returns.
type needsInputError struct{ q string }

func (e needsInputError) Error() string      { return "needs input" }
func (e needsInputError) NeedsInput() string { return e.q }

// config points a loop at srv over TCP.
func config(srv *openaitest.Server, stream bool) Config {
	return Config{
		BaseURL:      srv.URL(),
		Model:        "test-model",
		SystemPrompt: "You are a careful agent.",
		Client:       srv.Client(),
		Stream:       stream,
		backoff:      fastBackoff,
	}
}

// transcriptEvents decodes every transcript line, failing on a line that is not JSON.
func transcriptEvents(t testing.TB, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("transcript line %q is not JSON: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

func eventTypes(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return out
}

// assertNoAuthorization fails when any recorded request carried an Authorization header.
func assertNoAuthorization(t testing.TB, srv *openaitest.Server) {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("no requests recorded")
	}
	for i, r := range reqs {
		if v, ok := r.Header["Authorization"]; ok {
			t.Errorf("request %d carried Authorization %q, want none", i, v)
		}
	}
}
