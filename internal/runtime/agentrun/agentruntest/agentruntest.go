// Package agentruntest is what the tests of the worker and of the runtimes' adapters share:
// the real gateway (package modelgw, the host side) on a socket in a fresh directory, and an
// in-memory auditor that keeps what it records. Tests alone import it: it links the host's
// gateway, which nothing in the sandbox may (internal/deps_test.go).
package agentruntest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// Auditor keeps the gateway's records; a record of kind FailKind fails instead.
type Auditor struct {
	mu       sync.Mutex
	kinds    []string
	records  []map[string]any
	FailKind string // guarded by mu once the gateway runs: set it with SetFailKind
}

// Record is the gateway's [modelgw.Auditor].
func (a *Auditor) Record(_ context.Context, kind string, details map[string]any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if kind == a.FailKind {
		return errors.New("audit log unavailable")
	}
	a.kinds = append(a.kinds, kind)
	a.records = append(a.records, details)
	return nil
}

// SetFailKind makes the records of kind fail from now on.
func (a *Auditor) SetFailKind(kind string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.FailKind = kind
}

// Records returns the details of every record of kind, in order.
func (a *Auditor) Records(kind string) []map[string]any {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []map[string]any
	for i, k := range a.kinds {
		if k == kind {
			out = append(out, a.records[i])
		}
	}
	return out
}

// ToolCalls returns "tool decision reason" of each tool.call record.
func (a *Auditor) ToolCalls() []string {
	var out []string
	for _, d := range a.Records(entry.ToolCall) {
		out = append(out, d["tool"].(string)+" "+d["decision"].(string)+" "+d["reason"].(string))
	}
	return out
}

// Calls returns "tool decision reason|phase|call_id|args_hash" of each tool.call record.
func (a *Auditor) Calls() []string {
	var out []string
	for _, d := range a.Records(entry.ToolCall) {
		out = append(out, fmt.Sprintf("%s %s %s|%v|%v|%v", d["tool"], d["decision"], d["reason"], d["phase"], d["call_id"], d["args_hash"]))
	}
	return out
}

// StartGateway runs the real gateway for the Anthropic API on a socket in a fresh directory,
// recording into a, and returns the socket's path.
func StartGateway(t *testing.T, a *Auditor) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), wire.GatewaySocket)
	gw, err := modelgw.Listen(t.Context(), sock, modelgw.Config{
		DispatchID: "01JTESTDISPATCH",
		Role:       "fixer@sha256:" + strings.Repeat("ab", 32),
		ModelAPI:   modelgw.APIAnthropic,
		Dialer:     egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:      a,
		// Each call is two reports; keep the rate limit out of these tests' way.
		RequestsPerSecond: 1000, RequestBurst: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return sock
}
