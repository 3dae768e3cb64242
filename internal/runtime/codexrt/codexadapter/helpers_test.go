package codexadapter

import (
	"context"
	"encoding/json"
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
	"go.uber.org/goleak"
)

// The codex adapter's tests run it against the real gateway (the host side, imported by
// tests only) and a fake codex or the real CLI; these helpers are the worker's tests' own.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSecret = "s3cret-value-0123456789"

// memAuditor keeps the gateway's records; failKind makes records of that kind fail.
type memAuditor struct {
	mu       sync.Mutex
	records  []map[string]any
	kinds    []string
	failKind string
}

func (a *memAuditor) Record(_ context.Context, kind string, details map[string]any) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if kind == a.failKind {
		return errors.New("audit log unavailable")
	}
	a.kinds = append(a.kinds, kind)
	a.records = append(a.records, details)
	return nil
}

// toolCalls returns "tool decision reason" of each tool.call record.
func (a *memAuditor) toolCalls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for i, k := range a.kinds {
		if k == entry.ToolCall {
			d := a.records[i]
			out = append(out, d["tool"].(string)+" "+d["decision"].(string)+" "+d["reason"].(string))
		}
	}
	return out
}

// calls returns "tool decision reason phase call_id args_hash" of each tool.call record.
func (a *memAuditor) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for i, k := range a.kinds {
		if k == entry.ToolCall {
			d := a.records[i]
			out = append(out, fmt.Sprintf("%s %s %s|%v|%v|%v", d["tool"], d["decision"], d["reason"], d["phase"], d["call_id"], d["args_hash"]))
		}
	}
	return out
}

// startGateway runs the real gateway (the host side, imported by tests only) on a socket in
// a fresh directory, recording into a.
func startGateway(t *testing.T, a *memAuditor) string {
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

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
