package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// Fakes of the server's ports: the process and store edges the real binary tests cover.

type fakeCatalog map[catalog.Kind][]catalog.Version

func (c fakeCatalog) List(_ context.Context, k catalog.Kind) ([]catalog.Version, error) {
	return c[k], nil
}

type fakeDispatcher struct {
	dispatch func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error)
	get      func(context.Context, string) (*mcpserver.Record, error)
	cancel   func(context.Context, string) (*mcpserver.Record, error)
	resume   func(ctx context.Context, id, answer, actor string) (*mcpserver.Record, error)
	// content is the stored content by digest.
	content map[string][]byte
	// ended is the end signal of a dispatch (mcpserver.EndSignal); nil: none.
	ended func(id string) <-chan struct{}
}

func (d *fakeDispatcher) Ended(id string) <-chan struct{} {
	if d.ended == nil {
		return nil
	}
	return d.ended(id)
}

func (d *fakeDispatcher) Resume(ctx context.Context, p mcpserver.Principal, id, answer string) (*mcpserver.Record, error) {
	actor := "mcp:" + p.Client
	if d.resume == nil {
		return nil, errUnexpected
	}
	return d.resume(ctx, id, answer, actor)
}

func (d *fakeDispatcher) Content(_ context.Context, digest string, max int64) ([]byte, error) {
	b, ok := d.content[digest]
	if !ok {
		return nil, errUnexpected
	}
	if int64(len(b)) > max {
		return nil, errors.New("over the limit")
	}
	return b, nil
}

var errUnexpected = errors.New("unexpected call")

func (d *fakeDispatcher) Dispatch(ctx context.Context, r mcpserver.DispatchRequest) (*mcpserver.Record, error) {
	if d.dispatch == nil {
		return nil, errUnexpected
	}
	return d.dispatch(ctx, r)
}

func (d *fakeDispatcher) Get(ctx context.Context, id string) (*mcpserver.Record, error) {
	if d.get == nil {
		return nil, errUnexpected
	}
	return d.get(ctx, id)
}

func (d *fakeDispatcher) Cancel(ctx context.Context, id string) (*mcpserver.Record, error) {
	if d.cancel == nil {
		return nil, errUnexpected
	}
	return d.cancel(ctx, id)
}

type fakeOrchestrator struct {
	submitted json.RawMessage
	actor     string
	newRun    bool
}

func (o *fakeOrchestrator) Submit(_ context.Context, actor string, plan json.RawMessage, newRun bool) (json.RawMessage, error) {
	o.actor, o.submitted, o.newRun = actor, plan, newRun
	return json.RawMessage(`{"run":{"id":"run-1","state":"running"},"created":true,"message":"started run run-1"}`), nil
}

func (o *fakeOrchestrator) Status(_ context.Context, id string) (json.RawMessage, error) {
	if id != "run-1" {
		return nil, mcpserver.ErrNotFound
	}
	return json.RawMessage(`{"id":"run-1","state":"running"}`), nil
}

func (o *fakeOrchestrator) Watch(_ context.Context, id string, _ time.Duration) (json.RawMessage, error) {
	return json.RawMessage(`{"id":"run-1","state":"done"}`), nil
}

func (o *fakeOrchestrator) Schedules(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`{"schedules":[{"name":"nightly","spec":"0 2 * * *"}]}`), nil
}

func (o *fakeOrchestrator) Schedule(_ context.Context, name string) (json.RawMessage, error) {
	if name != "nightly" {
		return nil, mcpserver.ErrNotFound
	}
	return json.RawMessage(`{"name":"nightly","spec":"0 2 * * *"}`), nil
}

// auditLog records what the server audits.
type auditLog struct {
	mu      sync.Mutex
	entries []mcpserver.AuditEntry
	fail    error
}

func (a *auditLog) record(_ context.Context, e mcpserver.AuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail != nil {
		return a.fail
	}
	a.entries = append(a.entries, e)
	return nil
}

func (a *auditLog) all() []mcpserver.AuditEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]mcpserver.AuditEntry(nil), a.entries...)
}

// fixture is an in-process server over fake ports.
type fixture struct {
	cat   fakeCatalog
	disp  *fakeDispatcher
	orch  mcpserver.Orchestrator
	audit *auditLog
	// srv is the server the fixture made last (server, stdio, http).
	srv *mcpserver.Server
}

func newFixture() *fixture {
	return &fixture{cat: fakeCatalog{}, disp: &fakeDispatcher{}, audit: &auditLog{}}
}

func (f *fixture) server(t testing.TB) *mcpserver.Server {
	t.Helper()
	s, err := mcpserver.New(mcpserver.Config{
		Catalog: f.cat, Dispatcher: f.disp, Orchestrator: f.orch, Audit: f.audit.record,
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = s
	return s
}

// stdio connects a client to an in-process server speaking stdio over pipes.
func (f *fixture) stdio(t testing.TB, p mcpserver.Principal, l mcpserver.Limits) *mcp.ClientSession {
	t.Helper()
	return f.stdioWith(t, p, l, nil)
}

// stdioWith is stdio with a client of opts (a progress handler).
func (f *fixture) stdioWith(t testing.TB, p mcpserver.Principal, l mcpserver.Limits, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	s := f.server(t)
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.ServeStdio(ctx, sr, sw, mcpserver.StdioConfig{Principal: p, Limits: l})
		sw.Close()
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agora-test", Version: "v0"}, opts).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

// http serves an in-process server on a real loopback listener; it returns the bound address.
func (f *fixture) http(t testing.TB, cfg mcpserver.HTTPConfig) string {
	t.Helper()
	s := f.server(t)
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	addr := make(chan net.Addr, 1)
	cfg.Listening = func(a net.Addr) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ListenHTTP(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenHTTP: %v", err)
		}
	})
	select {
	case a := <-addr:
		return a.String()
	case err := <-done:
		t.Fatalf("ListenHTTP: %v", err)
	}
	return ""
}

// record returns a dispatch record in state.
func record(id, state string) *mcpserver.Record {
	done := state != "accepted" && state != "started"
	return &mcpserver.Record{ID: id, State: state, Done: done, Subagent: "writer@sha256:" + hex64, Target: "local",
		Sandbox: "bwrap", Network: "none", Actor: "mcp:tester", CreatedAt: time.Unix(1e9, 0).UTC()}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

const dispatchID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
