package modelgw

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/audit/entry"
)

// TestRedTeam2_SecretAsToolNameReachesAudit: an env secret put in a tool.call report's tool
// name is stored in the audit log unmasked.
//
// Attack: anything in the sandbox can POST /audit/tool on the bound socket (the worker's
// reports, Claude Code's hook, or an agent's own shell). The gateway masks the dispatch's
// secrets in `reason`, `call_id`, `host` and `path`, but copies `tool` verbatim: it only
// checks that the name is a letter followed by letters, digits, '_', '.' or '-', which is
// exactly the alphabet of most API tokens (GitHub ghp_..., Stripe sk_live_..., OpenAI sk-...).
// So an agent holding a secret of its env bundle (or a model told to call a tool named after
// one, through the openai tool view or a hook report) gets it into agora.db's audit log, into
// `agora audit log --output json`, and into every exported bundle, which are meant to travel.
//
// Impact: a secret of the dispatch's env bundles in plain text in the append-only audit log,
// which cannot be scrubbed without breaking every checkpoint after it. So every string the
// agent controls is redacted before it is stored.
//
// Now: a report whose tool name, call id, phase, decision or args_hash holds a form of the key
// or of an env secret (the gateway's redactor would change it) is refused with 400 and only
// counted (bad-request), never recorded; the name is not masked instead, since a masked name
// or call id would no longer say which tool or call it was.
func TestRedTeam2_SecretAsToolNameReachesAudit(t *testing.T) {
	const envSecret = "ghp_R3dT3amSecretValue0123456789abcdefXYZ"
	h := start(t, Config{APIKey: []byte(testKey), Secrets: [][]byte{[]byte(envSecret)}, RefusalInterval: forever})
	report := func(tool, callID, argsHash string) string {
		return `{"tool":"` + tool + `","decision":"allowed","reason":"r","args_hash":"` + argsHash + `","duration_ms":1,"call_id":"` + callID + `"}`
	}
	// Every form the redactor knows that fits a field's alphabet: raw, hex, unpadded
	// URL-safe base64 (a letter first, for the tool name).
	var bodies []string
	for _, s := range []string{envSecret, testKey} {
		forms := []string{s, "x" + hex.EncodeToString([]byte(s)), "x" + base64.RawURLEncoding.EncodeToString([]byte(s))}
		for _, f := range forms {
			bodies = append(bodies,
				report(f, "toolu_1", testArgsHash), // the tool name
				report("Bash", f, testArgsHash),    // the call id
			)
		}
	}
	// A 64-hex-digit secret as the args_hash.
	hexSecret := strings.Repeat("c0ffee15deadbeef", 4)
	h2 := start(t, Config{Secrets: [][]byte{[]byte(hexSecret)}, RefusalInterval: forever})
	if resp, body := h2.do(t, http.MethodPost, "/audit/tool", nil, report("Bash", "toolu_1", "sha256:"+hexSecret)); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(errorOf(t, body), "args_hash: holds a secret of this dispatch") {
		t.Errorf("a secret as args_hash: got %d %s, want 400", resp.StatusCode, body)
	}
	if got := h2.audit.ofKind(entry.ToolCall); len(got) != 0 {
		t.Errorf("a secret as args_hash was recorded: %v", got)
	}
	for _, b := range bodies {
		resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, b)
		if msg := errorOf(t, body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(msg, "holds a secret of this dispatch") {
			t.Errorf("got %d %q, want 400 saying the report holds a secret", resp.StatusCode, msg)
		}
	}
	wantRefused(t, h, routeAuditTool, http.StatusBadRequest, len(bodies))
	if got := h.audit.ofKind(entry.ToolCall); len(got) != 0 {
		t.Errorf("got %d tool.call records of reports holding a secret, want 0: %v", len(got), got)
	}
	// The same report without the secret is recorded: each refusal above was the secret's.
	if resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, report("Bash", "toolu_1", testArgsHash)); resp.StatusCode != http.StatusNoContent {
		t.Errorf("the report without a secret: got %d %s, want 204", resp.StatusCode, body)
	}
	h.gw.Close()
	for _, a := range []*fakeAuditor{h.audit, h2.audit} {
		for _, e := range a.all() {
			b, _ := json.Marshal(e.details)
			for _, s := range []string{envSecret, testKey, hexSecret} {
				if strings.Contains(string(b), s) || strings.Contains(string(b), s[:12]) {
					t.Errorf("a secret (or its first 12 bytes) is in a %s entry: %s", e.kind, b)
				}
			}
		}
	}
}

// TestRedTeam2_RefusedCallRecordedAllowed: a process in the sandbox makes a call that agora's
// pre-tool hook refused read `allowed` in the audit.
//
// Attack: Claude Code's pre-tool hook reports a call the grant does not cover as phase `pre`,
// decision `denied`, with claude's call id (toolu_...). The agent, through any shell it has
// (a granted Bash, a process left running), then POSTs to the same socket a phase `post`,
// decision `allowed` report for that call id. The gateway keeps no state per call id: it
// checks each report alone and records both. docs/runtimes.md promises that such a process
// can "never erase an entry already recorded or make a refusal read `allowed`", and that
// "nothing is ever recorded `allowed` that did not run"; here both hold no longer, and a
// forged `pre requested` + `post allowed` pair for an id claude never issued is accepted the
// same way.
//
// Impact: the audit of a claude-code dispatch says a tool outside the grant ran (or that a
// call which never happened ran), with the call id of the real refused call: the audit can be
// made to lie in the agent's favour or to frame it, and an auditor cannot tell the forged
// outcome from the hook's.
//
// Now: the gateway remembers what is on record per call id (callstate.go). After the hook's
// pre/denied, a post (of any decision), a second pre and a report without a phase for that
// id are refused with 400 and counted (bad-request); so is a post for an id with no pre on
// record. The refused call stays on record as refused, and only as that. A forged pre
// "requested" for an id claude never issued is still accepted (the gateway cannot know
// claude's ids), but then claude's own hook for that id is refused, which blocks the call.
func TestRedTeam2_RefusedCallRecordedAllowed(t *testing.T) {
	h := start(t, Config{RefusalInterval: forever})
	report := func(decision, phase, id string) int {
		t.Helper()
		b := `{"tool":"Write","decision":"` + decision + `","reason":"r","args_hash":"` + testArgsHash + `","duration_ms":0`
		if phase != "" {
			b += `,"phase":"` + phase + `"`
		}
		resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, b+`,"call_id":"`+id+`"}`)
		if resp.StatusCode == http.StatusBadRequest && !strings.Contains(errorOf(t, body), "call_id: ") {
			t.Errorf("report %s/%s refused for another reason: %s", phase, decision, body)
		}
		return resp.StatusCode
	}
	// The hook's refusal.
	if s := report("denied", "pre", "toolu_01REFUSED"); s != http.StatusNoContent {
		t.Fatalf("the hook's pre/denied: got %d, want 204", s)
	}
	// The agent's forgeries, from its own shell: every one is refused.
	forged := []struct{ decision, phase, id string }{
		{"allowed", "post", "toolu_01REFUSED"},   // the refused call as run
		{"error", "post", "toolu_01REFUSED"},     // as run and failed
		{"requested", "pre", "toolu_01REFUSED"},  // a second, contradictory pre
		{"allowed", "", "toolu_01REFUSED"},       // a one-step report for the same id
		{"allowed", "post", "toolu_01NEVERSEEN"}, // an outcome with no pre on record
	}
	for _, f := range forged {
		if s := report(f.decision, f.phase, f.id); s != http.StatusBadRequest {
			t.Errorf("forged %s/%s for %s: got %d, want 400", f.phase, f.decision, f.id, s)
		}
	}
	wantRefused(t, h, routeAuditTool, http.StatusBadRequest, len(forged))
	var got []string
	for _, d := range h.audit.ofKind(entry.ToolCall) {
		got = append(got, fmt.Sprintf("%v %v/%v", d["call_id"], d["phase"], d["decision"]))
	}
	if want := []string{"toolu_01REFUSED pre/denied"}; !slices.Equal(got, want) {
		t.Errorf("tool.call records: got %v, want %v", got, want)
	}
}

// TestRedTeam2_UnboundedConnections: the sandbox makes the host-side supervisor hold as many
// connections (goroutines, buffers, file descriptors) as it likes.
//
// Attack: the gateway's http.Server serves the bound Unix socket with no cap on connections
// (agora mcp's HTTP server has one: 256). Its request rate limit, concurrency slots and audit
// budget count requests, not connections: a connection that sent one request (answered 404
// or 429, only counted in the tally, no budget spent) is kept idle for IdleTimeout (2 min)
// and renewed by one more request. The sandbox gets no RLIMIT_NOFILE from agora (only nproc,
// fsize, as and core), so its up to max_procs processes can each raise their descriptors to
// the hard limit and hold connections by the hundred thousand, for a request per connection
// every two minutes.
//
// Impact: the memory (a goroutine and its buffers per connection) and descriptors are the
// supervisor's, on the host, outside the sandbox's memory limit (RLIMIT_AS / memory.max):
// one dispatch can push its supervisor, and the host, to EMFILE or out of memory, while no
// audit entry and no limit notices. The test holds N connections and measures the cost.
//
// Now: the gateway accepts at most maxConns (64) connections at a time (connlimit.go); the
// others wait in the socket's listen queue, in the kernel, charged to the sandbox, until one
// closes, which an idle one does after 5 seconds (idleTimeout; readHeaderTimeout for one
// that sends no request). The supervisor holds about maxConns goroutines however many
// connections the sandbox opens, and serves again once it lets go. (Each sandbox process
// also has at most 4096 descriptors: RLIMIT_NOFILE, internal/compute/local.)
func TestRedTeam2_UnboundedConnections(t *testing.T) {
	const n = 3000
	h := start(t, Config{RequestsPerSecond: 1e9, RequestBurst: 1e9, RefusalInterval: forever})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < n; i++ {
		c, err := net.Dial("unix", h.sock)
		if err != nil {
			if i > maxConns {
				break // the listen queue is full: the kernel refuses more, which is a bound too
			}
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /nope HTTP/1.1\r\nHost: g\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The first maxConns connections are answered (404); the rest wait to be accepted.
	statuses := map[string]int{}
	for _, c := range conns[:maxConns] {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("read answer: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses[resp.Status]++
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	held := runtime.NumGoroutine() - g0
	grown := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
	t.Logf("%d connections opened: %d goroutines and %d KiB of heap+stack held (answers %v)", len(conns), held, grown>>10, statuses)
	// Before the cap: one goroutine per connection, 3000, and about 55 MiB.
	if held > maxConns+16 {
		t.Errorf("%d goroutines held for %d connections, want at most about %d", held, len(conns), maxConns)
	}
	if grown > 16<<20 {
		t.Errorf("%d KiB held for %d connections, want at most 16 MiB (the test's own %d client connections included)", grown>>10, len(conns), len(conns))
	}
	// Once the sandbox lets go, every slot is given back: the connections still queued are
	// served in turn, and then a new client.
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	resp, body := h.do(t, http.MethodPost, "/audit/tool", nil, validReport)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("a report after the connections closed: got %d %s, want 204", resp.StatusCode, body)
	}
	h.gw.Close()
	// 3000 connections are a handful of entries: the report and its request, and the
	// refusals counted as one entry per route and reason. Which reasons occur depends on the
	// machine's speed (a connection still queued at Close is refused as closing, which a
	// loaded CI machine saw), so the bound is per reason, not a total.
	entries := h.audit.all()
	reasons := map[string]int{}
	others := 0
	for _, e := range entries {
		if e.kind != entry.ToolGatewayRefused {
			others++
			continue
		}
		reasons[fmt.Sprint(e.details["route"], " ", e.details["reason"])]++
	}
	if others > 2 {
		t.Errorf("got %d audit entries besides the refusals, want at most 2 (the report, its request)", others)
	}
	for r, k := range reasons {
		if k > 1 {
			t.Errorf("refusals %q written as %d entries, want one (counted)", r, k)
		}
	}
	if len(reasons) > 3 {
		t.Errorf("refusals of %d routes and reasons %v, want at most 3 (not found, closing, too many)", len(reasons), reasons)
	}
}
