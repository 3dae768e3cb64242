package dispatch_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/dispatch"
	"github.com/agora-dev/agora/internal/runtime/openairt/openaitest"
)

// TestLearn_HTTPFetchThroughGateway: a learn dispatch's model calls
// http_fetch (not granted, no host granted) on a host egress.learn_hosts names, and on one it
// does not. The first is reported as tool.would_deny by the worker, fetched by the gateway
// and recorded as net.would_deny (via fetch, GET and the path); the second stays refused by
// the gateway, nothing reaches it. Failed before: the gateway refused every host outside
// the grant, learn or not.
func TestLearn_HTTPFetchThroughGateway(t *testing.T) {
	e := newModelEnv(t)
	e.d.Egress.AllowPrivate = append(e.d.Egress.AllowPrivate, netip.MustParsePrefix("127.0.0.2/32"))
	var otherHits atomic.Int64
	learnPort := servePlain(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "learned:"+r.Method+":"+r.URL.Path)
	}))
	otherPort := servePlain(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		fmt.Fprint(w, "LEAKED")
	}))
	e.d.Config.Egress.LearnHosts = []string{"127.0.0.2:" + learnPort}
	e.capability("reader", "tools: [read_file]\n", nil)
	e.modelSubagent("learner", "openai", "reader")
	srv := e.model(testAPIKey,
		openaitest.CallTools(
			openaitest.Call{Name: "http_fetch", Arguments: `{"url":"http://127.0.0.2:` + learnPort + `/docs/a"}`},
			openaitest.Call{Name: "http_fetch", Arguments: `{"url":"http://127.0.0.2:` + otherPort + `/secret"}`},
		),
		openaitest.Say("done"),
	)
	r := e.run(dispatch.Request{Subagent: "learner", Envs: []string{"model"}, Learn: true, Input: []byte(`{"prompt":"fetch"}`)})
	wantFinished(t, r)
	results := toolResults(srv.Accepted()[1])
	if len(results) != 2 {
		t.Fatalf("got %d tool results, want 2", len(results))
	}
	if !strings.Contains(results[0], "learned:GET:/docs/a") {
		t.Errorf("the learn host's fetch: %q, want its answer", results[0])
	}
	if strings.Contains(results[1], "LEAKED") || otherHits.Load() != 0 {
		t.Errorf("the host outside learn_hosts: %q, %d requests; want refused", results[1], otherHits.Load())
	}
	var nets []string
	for _, a := range e.audited(r, entry.NetWouldDeny) {
		w, _ := entry.ReadWouldDeny(entry.NetWouldDeny, a.Details)
		nets = append(nets, fmt.Sprint(a.Details[entry.KeyVia], " ", w.Method, " ", w.Host, ":", w.Port, w.Path))
	}
	if want := "fetch GET 127.0.0.2:" + learnPort + "/docs/a"; len(nets) != 1 || nets[0] != want {
		t.Errorf("net.would_deny %q, want [%s]", nets, want)
	}
	var tools []string
	for _, a := range e.audited(r, entry.ToolWouldDeny) {
		w, _ := entry.ReadWouldDeny(entry.ToolWouldDeny, a.Details)
		tools = append(tools, w.Tool+" "+w.Reporter)
	}
	if len(tools) != 2 || tools[0] != "http_fetch worker" {
		t.Errorf("tool.would_deny %q, want the worker's report of each http_fetch", tools)
	}
}
