package mcphost

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/errclass"
	"github.com/agora-dev/agora/internal/mcpserver"
	"github.com/agora-dev/agora/internal/orch/client"
)

// TestErrors: the dispatcher's and the orchestrator client's refusals reach the MCP server as
// the ports' own errors; anything else passes through.
func TestErrors(t *testing.T) {
	other := errors.New("disk full")
	var re *mcpserver.RequestError
	refused := &dispatch.RequestError{Err: errors.New(`subagent "x" not found`)}
	if err := dispatchError(fmt.Errorf("accept: %w", refused)); !errors.As(err, &re) || re.Msg != refused.Error() {
		t.Errorf("a refused dispatch request: got %T %v, want a *mcpserver.RequestError saying %q", err, err, refused)
	}
	if err := dispatchError(fmt.Errorf("get: %w", dispatch.ErrNotFound)); !errors.Is(err, mcpserver.ErrNotFound) {
		t.Errorf("an unknown dispatch: got %v, want mcpserver.ErrNotFound", err)
	}
	if err := dispatchError(other); err != other {
		t.Errorf("another dispatch error: got %v, want it unchanged", err)
	}
	tests := []struct {
		in   error
		want func(error) bool
	}{
		{client.ErrNotRunning, func(err error) bool { return errors.Is(err, mcpserver.ErrOrchestratorDown) }},
		{&client.Error{Code: "not_found", Msg: "no run x"}, func(err error) bool { return errors.Is(err, mcpserver.ErrNotFound) }},
		{&client.Error{Code: "invalid", Msg: "bad plan"}, func(err error) bool { return errors.As(err, &re) && re.Msg == "bad plan" }},
		{&client.Error{Code: "conflict", Msg: "plan ran"}, func(err error) bool { return errors.As(err, &re) && re.Msg == "plan ran" }},
		{other, func(err error) bool { return err == other }},
	}
	for _, tt := range tests {
		if got := orchError(tt.in); !tt.want(got) {
			t.Errorf("orchError(%v) = %T %v", tt.in, got, got)
		}
	}
}

// TestErrors_PurgedRunNote: the service's note on a run retention purged reaches the MCP
// caller's message, with the id mcpserver names.
func TestErrors_PurgedRunNote(t *testing.T) {
	err := orchError(&client.Error{Code: "not_found", Msg: `run "r1" not found (purged ...)`, Note: "purged by retention at 2026-11-24T12:00:00Z by system: retention.runs 180d"})
	if !errors.Is(err, mcpserver.ErrNotFound) {
		t.Fatalf("got %v, want mcpserver.ErrNotFound", err)
	}
	var nf *errclass.NotFoundError
	if !errors.As(err, &nf) || nf.Note != "purged by retention at 2026-11-24T12:00:00Z by system: retention.runs 180d" {
		t.Fatalf("got %#v, want the note kept", err)
	}
}
