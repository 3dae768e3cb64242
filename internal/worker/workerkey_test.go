package worker

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/egress"
	"github.com/agora-dev/agora/internal/lifecycle"
	"github.com/agora-dev/agora/internal/modelgw"
	"github.com/agora-dev/agora/internal/runtime/agentrun"
	"github.com/agora-dev/agora/internal/worker/wire"
)

// startLearnGateway runs the real gateway of a learn dispatch on a fresh socket.
func startLearnGateway(t *testing.T, a *memAuditor) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), wire.GatewaySocket)
	gw, err := modelgw.Listen(t.Context(), sock, modelgw.Config{
		DispatchID: "01JTESTDISPATCH", Role: "learner@sha256:" + strings.Repeat("ab", 32), ModelAPI: modelgw.APIOpenAI,
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}, nil),
		Audit:  a, Learn: true, RequestsPerSecond: 1000, RequestBurst: 1000,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	return sock
}

// TestClaimGateway: a learn dispatch's worker claims its gateway with a key
// of its own before anything else runs and sends it with each report, which the gateway then
// records as the worker's; the key is on no request but /audit/tool's. The attack: something
// claimed the gateway first (an agent that beat the worker to it): the worker's claim fails,
// and so does the dispatch, rather than run with evidence the agent could have forged. A
// dispatch that is not a learn one claims nothing.
func TestClaimGateway(t *testing.T) {
	a := &memAuditor{}
	sock := startLearnGateway(t, a)
	r := &runner{man: wire.Manifest{Learn: true}, gateway: sock}
	if fl := r.claimGateway(t.Context()); fl != nil {
		t.Fatalf("claim: %s", fl.detail)
	}
	if len(r.workerKey) != 64 {
		t.Fatalf("worker key %q, want 64 hex digits", r.workerKey)
	}
	gw := agentrun.Invocation{GatewaySocket: sock, WorkerKey: r.workerKey}.Gateway()
	defer gw.Close()
	if err := gw.Report(t.Context(), agentrun.ToolReport{Tool: "run_command", Decision: agentrun.DecisionWouldDeny, Reason: "not granted",
		ArgsHash: "sha256:" + strings.Repeat("a", 64), Command: "make"}); err != nil {
		t.Fatal(err)
	}
	if err := gw.Report(t.Context(), agentrun.ToolReport{Tool: "Bash", Decision: agentrun.DecisionWouldDeny, Reason: "not granted",
		ArgsHash: "sha256:" + strings.Repeat("b", 64), Command: "ls", Via: agentrun.ViaHook}); err != nil {
		t.Fatal(err)
	}
	var reporters []string
	for _, d := range a.Records(entry.ToolWouldDeny) {
		reporters = append(reporters, d[entry.KeyReporter].(string))
	}
	if strings.Join(reporters, ",") != "worker,hook" {
		t.Errorf("reporters %q, want worker,hook", reporters)
	}

	// The key travels only to /audit/tool.
	var seen []string
	probe := (&agentrun.Gateway{HTTP: &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Header.Get(agentrun.WorkerKeyHeader) != "" {
			seen = append(seen, req.URL.Path)
		}
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}}, nil
	})}}).WithKey(r.workerKey)
	probe.Post(t.Context(), "/fetch", map[string]string{})
	probe.Post(t.Context(), "/audit/tool", map[string]string{})
	if strings.Join(seen, ",") != "/audit/tool" {
		t.Errorf("the key was sent on %q, want only /audit/tool", seen)
	}

	// Claimed before the worker: the worker fails, saying so.
	first := startLearnGateway(t, &memAuditor{})
	other := agentrun.Invocation{GatewaySocket: first}.Gateway()
	if st, _, err := other.Post(t.Context(), "/worker/claim", map[string]string{"key": strings.Repeat("c", 64)}); err != nil || st != http.StatusNoContent {
		t.Fatalf("the first claim: %d %v", st, err)
	}
	late := &runner{man: wire.Manifest{Learn: true}, gateway: first}
	if fl := late.claimGateway(t.Context()); fl == nil || fl.reason != lifecycle.ReasonWorkerFailed || !strings.Contains(fl.detail, "claimed this gateway already") || late.workerKey != "" {
		t.Errorf("a claim after another: %+v, key %q; want the dispatch failed", fl, late.workerKey)
	}

	// Not a learn dispatch: nothing is claimed.
	plainSock := startLearnGateway(t, &memAuditor{})
	plain := &runner{man: wire.Manifest{}, gateway: plainSock}
	if fl := plain.claimGateway(t.Context()); fl != nil || plain.workerKey != "" {
		t.Errorf("a plain dispatch claimed: %+v %q", fl, plain.workerKey)
	}
	later := agentrun.Invocation{GatewaySocket: plainSock}.Gateway()
	if st, _, err := later.Post(t.Context(), "/worker/claim", map[string]string{"key": strings.Repeat("d", 64)}); err != nil || st != http.StatusNoContent {
		t.Errorf("the plain dispatch's gateway was claimed: a later claim got %d %v", st, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClaimGateway_RemoteMode: in remote mode (a pod, a docker warm slot) the worker's
// claim goes through the network gateway's tunnel (dialHost), never the socket file, and only
// for a model runtime's learn dispatch (verify found its gateway socket): an exec learn
// dispatch has no model gateway, and its session no socket to tunnel to. Failed before: the
// exec learn dispatch's worker tried to claim through the tunnel, and every exec learn
// dispatch in a pod or a docker warm slot ended worker-failed ("the session has no host
// socket").
func TestClaimGateway_RemoteMode(t *testing.T) {
	sock := startLearnGateway(t, &memAuditor{})
	var dialed []string
	dial := func(ctx context.Context, name string) (net.Conn, error) {
		dialed = append(dialed, name)
		if name != wire.GatewaySocket {
			return nil, fmt.Errorf("the session has no host socket %q", name)
		}
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}
	execRun := &runner{man: wire.Manifest{Learn: true, Runtime: "exec"}, opts: options{dialHost: func(ctx context.Context, name string) (net.Conn, error) {
		dialed = append(dialed, name)
		return nil, fmt.Errorf("the session has no host socket %q", name)
	}}}
	if fl := execRun.claimGateway(t.Context()); fl != nil || execRun.workerKey != "" || len(dialed) != 0 {
		t.Fatalf("an exec learn dispatch in remote mode: %+v, key %q, dialed %q; want no claim", fl, execRun.workerKey, dialed)
	}
	// A model runtime's: the file the worker made is not what it talks to.
	model := &runner{man: wire.Manifest{Learn: true, Runtime: "openai"}, gateway: filepath.Join(t.TempDir(), "replaced.sock"), opts: options{dialHost: dial}}
	if fl := model.claimGateway(t.Context()); fl != nil || len(model.workerKey) != 64 {
		t.Fatalf("a model runtime's learn dispatch in remote mode: %+v, key %q", fl, model.workerKey)
	}
	if strings.Join(dialed, ",") != wire.GatewaySocket {
		t.Errorf("dialed %q, want the gateway's socket through the tunnel once", dialed)
	}
}
