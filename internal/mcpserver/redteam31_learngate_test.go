package mcpserver_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// gateDispatcher is a fakeDispatcher that tells learn targets and learn dispatches apart.
type gateDispatcher struct {
	*fakeDispatcher
	ran int
}

func (g *gateDispatcher) LearnTarget(target string) error {
	if target == "learning" {
		return errors.New("target \"learning\" is in learn mode: an MCP client cannot start a learn dispatch")
	}
	return nil
}

func (g *gateDispatcher) LearnParent(_ context.Context, id string) error {
	if id == dispatchID {
		return errors.New("dispatch is a learn dispatch: an MCP client cannot start a learn dispatch")
	}
	return nil
}

// TestRedTeam31_LearnGateAuditsDenied (learn): agora_dispatch to a learn target,
// or answering a learn dispatch's question, is refused before the dispatcher runs, audited as
// one mcp.tool.denied with decision denied (never allowed); another target and another
// dispatch's answer reach the dispatcher as before.
func TestRedTeam31_LearnGateAuditsDenied(t *testing.T) {
	audit := &auditLog{}
	d := &gateDispatcher{fakeDispatcher: &fakeDispatcher{}}
	d.dispatch = func(context.Context, mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		d.ran++
		return nil, &mcpserver.RequestError{Msg: "stop here"}
	}
	d.resume = func(context.Context, string, string, string) (*mcpserver.Record, error) {
		d.ran++
		return nil, &mcpserver.RequestError{Msg: "stop here"}
	}
	s, err := mcpserver.New(mcpserver.Config{Catalog: fakeCatalog{}, Dispatcher: d, Audit: audit.record})
	if err != nil {
		t.Fatal(err)
	}
	sr, cw := io.Pipe()
	cr, sw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { s.ServeStdio(ctx, sr, sw, mcpserver.StdioConfig{Principal: tester}); sw.Close() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "v0"}, nil).Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, args := range []map[string]any{
		{"subagent": "writer", "target": "learning"},
		{"resume": map[string]any{"dispatch": dispatchID, "answer": "yes"}},
	} {
		before := len(audit.all())
		res := call(t, cs, "agora_dispatch", args)
		if !res.IsError || !strings.Contains(text(res), "cannot start a learn dispatch") {
			t.Errorf("%v: %q, want the learn refusal", args, text(res))
		}
		es := audit.all()[before:]
		if len(es) != 1 || es[0].Kind != entry.MCPToolDenied || es[0].Details["decision"] != "denied" {
			t.Errorf("%v: audit %+v, want one mcp.tool.denied", args, es)
		}
	}
	if d.ran != 0 {
		t.Errorf("the dispatcher ran %d refused calls", d.ran)
	}
	for _, args := range []map[string]any{
		{"subagent": "writer", "target": "local"},
		{"resume": map[string]any{"dispatch": "01ARZ3NDEKTSV4RRFFQ69G5FAW", "answer": "yes"}},
	} {
		call(t, cs, "agora_dispatch", args)
	}
	if d.ran != 2 {
		t.Errorf("the dispatcher ran %d of the 2 allowed calls", d.ran)
	}
}
