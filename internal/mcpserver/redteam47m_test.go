package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/mcpserver"
)

// The SDK server holds every tool with the bare schema
// {"type":"object"}; tools/list publishes the whole one and agora's decodeArgs checks the
// arguments. These tests send, through the SDK client over real HTTP (the newest protocol)
// and stdio, arguments each tool's published schema refuses, and require every one refused
// with a message, audited as invalid, and never reaching a port.

// rt47Valid is one valid call of every tool.
var rt47Valid = map[string]string{
	"agora_capabilities_list":           `{}`,
	"agora_subagents_list":              `{}`,
	"agora_envs_list":                   `{}`,
	"agora_orchestrator_schedules_list": `{}`,
	"agora_dispatch":                    `{"subagent":"writer","wait_seconds":0}`,
	"agora_dispatch_describe":           `{"id":"` + dispatchID + `"}`,
	"agora_dispatch_cancel":             `{"id":"` + dispatchID + `"}`,
	"agora_orchestrator_submit":         `{"plan":{"version":1,"name":"p","tasks":[{"id":"a","subagent":"s"}]}}`,
	"agora_orchestrator_status":         `{"run_id":"run-1"}`,
	"agora_orchestrator_watch":          `{"run_id":"run-1"}`,
	"agora_orchestrator_schedule_show":  `{"name":"nightly"}`,
}

const rt47Resume = `"resume":{"dispatch":"` + dispatchID + `","answer":"blue"}`

// rt47Bad are, by tool, arguments the tool's published input schema refuses.
var rt47Bad = map[string][]string{
	"agora_capabilities_list": {`{"x":1}`, `{"X":null}`, `{"":0}`, `[]`, `"x"`, `7`},
	"agora_subagents_list":    {`{"name":"w"}`, `{"subagent":"w"}`},
	"agora_envs_list":         {`{"envs":[]}`},
	"agora_orchestrator_schedules_list": {
		`{"name":"nightly"}`, `{"run_id":"run-1"}`,
	},
	"agora_dispatch": {
		`{"subagent":"writer","extra":1}`,
		`{"Subagent":"writer"}`,
		`{"subagent":"\u017fubagent"}`,
		`{"\u017fubagent":"writer"}`,
		`{"subagent":""}`,
		`{"subagent":"Writer"}`,
		`{"subagent":"writer\n"}`,
		`{"subagent":"` + strings.Repeat("a", 65) + `"}`,
		`{"subagent":7}`,
		`{"subagent":null}`,
		`{"subagent":["writer"]}`,
		`{"subagent":"writer","envs":"demo"}`,
		`{"subagent":"writer","envs":[null]}`,
		`{"subagent":"writer","envs":[""]}`,
		`{"subagent":"writer","envs":["a","a"]}`,
		`{"subagent":"writer","envs":[` + strings.TrimSuffix(strings.Repeat(`"e",`, 17), ",") + `]}`,
		`{"subagent":"writer","envs":{"a":"b"}}`,
		`{"subagent":"writer","target":""}`,
		`{"subagent":"writer","target":"-x"}`,
		`{"subagent":"writer","target":"` + strings.Repeat("t", 65) + `"}`,
		`{"subagent":"writer","target":5}`,
		`{"subagent":"writer","input":[]}`,
		`{"subagent":"writer","input":"{}"}`,
		`{"subagent":"writer","input":null}`,
		`{"subagent":"writer","input":5}`,
		`{"subagent":"writer","timeout_seconds":0}`,
		`{"subagent":"writer","timeout_seconds":86401}`,
		`{"subagent":"writer","timeout_seconds":1.5}`,
		`{"subagent":"writer","timeout_seconds":"60"}`,
		`{"subagent":"writer","timeout_seconds":-9223372036854775808}`,
		`{"subagent":"writer","wait_seconds":-1}`,
		`{"subagent":"writer","wait_seconds":301}`,
		`{"subagent":"writer","wait_seconds":true}`,
		`{"subagent":"writer","wait_seconds":{}}`,
		`{"subagent":"writer","Wait_Seconds":300}`,
		`{"subagent":"writer","workspace":""}`,
		`{"subagent":"writer","workspace":"App"}`,
		`{"subagent":"writer","workspace":"app","revision":"-x"}`,
		`{"subagent":"writer","workspace":"app","revision":""}`,
		`{"subagent":"writer","workspace":"app","revision":"` + strings.Repeat("r", 300) + `"}`,
		// resume: an object of exactly dispatch and answer, with only wait_seconds beside it
		`{"resume":{}}`,
		`{"resume":[]}`,
		`{"resume":"` + dispatchID + `"}`,
		`{"resume":{"dispatch":"` + dispatchID + `"}}`,
		`{"resume":{"answer":"blue"}}`,
		`{"resume":{"dispatch":"` + dispatchID + `","answer":""}}`,
		`{"resume":{"dispatch":"` + dispatchID + `","answer":"blue","extra":1}}`,
		`{"resume":{"dispatch":"` + dispatchID + `","Answer":"blue"}}`,
		`{"resume":{"dispatch":"` + dispatchID + `","answer":null}}`,
		`{"resume":{"dispatch":"short","answer":"blue"}}`,
		`{"resume":{"dispatch":"` + strings.ToLower(dispatchID) + `","answer":"blue"}}`,
		`{"resume":{"dispatch":"` + dispatchID + `","answer":"` + strings.Repeat("a", 16<<10+1) + `"}}`,
		`{` + rt47Resume + `,"wait_seconds":301}`,
		// An empty subagent beside resume: its pattern refuses "" as it does alone.
		`{` + rt47Resume + `,"subagent":""}`,
	},
	"agora_dispatch_describe": {
		`{}`,
		`{"id":""}`,
		`{"id":null}`,
		`{"id":7}`,
		`{"id":"` + dispatchID + `X"}`,
		`{"id":"` + strings.ToLower(dispatchID) + `"}`,
		`{"id":"` + dispatchID + `\n"}`,
		`{"ID":"` + dispatchID + `"}`,
		`{"id":"` + dispatchID + `","wait_seconds":-1}`,
		`{"id":"` + dispatchID + `","wait_seconds":301}`,
		`{"id":"` + dispatchID + `","wait_seconds":0.5}`,
		`{"id":"` + dispatchID + `","wait_seconds":null}`,
		`{"id":"` + dispatchID + `","timeout_seconds":5}`, // watch's field, not describe's
		`{"id":"` + dispatchID + `","extra":1}`,
	},
	"agora_dispatch_cancel": {
		`{}`,
		`{"id":"` + dispatchID + `","wait_seconds":5}`, // describe's field, not cancel's
		`{"Id":"` + dispatchID + `"}`,
		`{"id":["` + dispatchID + `"]}`,
	},
	"agora_orchestrator_submit": {
		`{}`,
		`{"plan":null}`,
		`{"plan":[]}`,
		`{"plan":"{}"}`,
		`{"plan":{"version":1,"name":"p","tasks":[]},"new_run":1}`,
		`{"plan":{"version":1,"name":"p","tasks":[]},"new_run":"true"}`,
		`{"plan":{"version":1,"name":"p","tasks":[]},"New_Run":true}`,
		`{"plan":{"version":1,"name":"p","tasks":[]},"run_id":"run-1"}`,
	},
	"agora_orchestrator_status": {
		`{}`,
		`{"run_id":""}`,
		`{"run_id":"-r"}`,
		`{"run_id":"` + strings.Repeat("r", 97) + `"}`,
		`{"run_id":"run-1","timeout_seconds":5}`, // watch's field, not status's
		`{"Run_Id":"run-1"}`,
	},
	"agora_orchestrator_watch": {
		`{"run_id":"run-1","timeout_seconds":0}`,
		`{"run_id":"run-1","timeout_seconds":301}`,
		`{"run_id":"run-1","wait_seconds":5}`, // describe's field, not watch's
		`{"run_id":"run-1","timeout_seconds":"5"}`,
	},
	"agora_orchestrator_schedule_show": {
		`{}`,
		`{"name":""}`,
		`{"name":"Nightly"}`,
		`{"name":"` + strings.Repeat("n", 64) + `"}`,
		`{"name":"nightly","run_id":"run-1"}`,
	},
}

// rt47Stricter are arguments the published schema accepts (it cannot say them: duplicate
// keys, resume beside a new dispatch's fields, a revision without a workspace, no subagent)
// but agora's decoder refuses, by tool: the value it would use is never a guess.
var rt47Stricter = map[string][]string{
	"agora_dispatch": {
		`{}`,
		`{"subagent":"writer","subagent":"other"}`,
		`{"subagent":"writer","sub\u0061gent":"other"}`,
		`{"subagent":"writer","revision":"main"}`,
		`{"resume":{"dispatch":"` + dispatchID + `","answer":"blue","answer":"red"}}`,
		`{"resume":{"dispatch":"` + dispatchID + `","answer":"   "}}`,
		`{` + rt47Resume + `,"subagent":"writer"}`,
		`{` + rt47Resume + `,"envs":[]}`,
		`{` + rt47Resume + `,"input":{}}`,
		`{` + rt47Resume + `,"target":"local"}`,
		`{` + rt47Resume + `,"timeout_seconds":5}`,
		`{` + rt47Resume + `,"workspace":"app"}`,
		`{"subagent":"writer","input":{"n":1.5}}`,
		`{"subagent":"writer","timeout_seconds":60.0}`,
		`{"subagent":"writer","wait_seconds":1e1}`,
	},
	"agora_dispatch_describe": {
		`{"id":"` + dispatchID + `","id":"01ARZ3NDEKTSV4RRFFQ69G5FAW"}`,
		`{"id":"01ARZ3NDEKTSV4RRFFQ69G5FAW","i\u0064":"` + dispatchID + `"}`,
	},
	"agora_orchestrator_submit": {
		`{"plan":{"version":1,"name":"p","tasks":[]},"plan":{"version":1,"name":"q","tasks":[]}}`,
	},
	"agora_orchestrator_watch": {
		`{"run_id":"run-1","timeout_seconds":1,"timeout_seconds":300}`,
	},
}

// rt47Ports are fakes that count every call reaching a port.
type rt47Ports struct {
	f     *fixture
	calls atomic.Int64
	last  sync.Map // port -> what it was given
}

func newRT47Ports() *rt47Ports {
	p := &rt47Ports{f: newFixture()}
	p.f.orch = &rt47Orch{p: p}
	p.f.disp.dispatch = func(_ context.Context, r mcpserver.DispatchRequest) (*mcpserver.Record, error) {
		p.calls.Add(1)
		p.last.Store("dispatch", r)
		return record(dispatchID, "finished"), nil
	}
	p.f.disp.resume = func(_ context.Context, id, answer, _ string) (*mcpserver.Record, error) {
		p.calls.Add(1)
		p.last.Store("resume", id+"|"+answer)
		return record(dispatchID, "finished"), nil
	}
	p.f.disp.get = func(_ context.Context, id string) (*mcpserver.Record, error) {
		p.calls.Add(1)
		p.last.Store("get", id)
		return record(id, "finished"), nil
	}
	p.f.disp.cancel = func(_ context.Context, id string) (*mcpserver.Record, error) {
		p.calls.Add(1)
		p.last.Store("cancel", id)
		return record(id, "cancelled"), nil
	}
	return p
}

type rt47Orch struct {
	p    *rt47Ports
	fake fakeOrchestrator
	mu   sync.Mutex
}

func (o *rt47Orch) Submit(ctx context.Context, actor string, plan json.RawMessage, newRun bool) (json.RawMessage, error) {
	o.p.calls.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.p.last.Store("submit", string(plan))
	return o.fake.Submit(ctx, actor, plan, newRun)
}

func (o *rt47Orch) Status(ctx context.Context, id string) (json.RawMessage, error) {
	o.p.calls.Add(1)
	o.p.last.Store("status", id)
	return o.fake.Status(ctx, id)
}

func (o *rt47Orch) Watch(ctx context.Context, id string, d time.Duration) (json.RawMessage, error) {
	o.p.calls.Add(1)
	o.p.last.Store("watch", fmt.Sprintf("%s|%s", id, d))
	return o.fake.Watch(ctx, id, d)
}

func (o *rt47Orch) Schedules(ctx context.Context) (json.RawMessage, error) {
	o.p.calls.Add(1)
	return o.fake.Schedules(ctx)
}

func (o *rt47Orch) Schedule(ctx context.Context, name string) (json.RawMessage, error) {
	o.p.calls.Add(1)
	o.p.last.Store("schedule", name)
	return o.fake.Schedule(ctx, name)
}

var rt47Limits = mcpserver.Limits{Rate: 1e6, Burst: 1e6, MaxInFlight: 64}

// rt47Sessions are an SDK client over real HTTP (the SDK's newest protocol, whose calls the
// SDK checks against the called tool's schema as the server holds it) and one over stdio.
func rt47Sessions(t *testing.T, p *rt47Ports) map[string]*mcp.ClientSession {
	t.Helper()
	tok := newToken(t)
	addr := p.f.http(t, mcpserver.HTTPConfig{Limits: rt47Limits, Clients: []mcpserver.Client{{Name: "orch", Token: tok, Ceiling: mcpserver.CeilingOrchestrate}}})
	hs := httpSession(t, "http://"+addr+"/mcp", tok)
	// stdio gets its own fixture's server, over the same ports
	ss := p.f.stdio(t, mcpserver.Principal{Client: "orch", Ceiling: mcpserver.CeilingOrchestrate}, rt47Limits)
	return map[string]*mcp.ClientSession{"http": hs, "stdio": ss}
}

// rt47Published resolves every tool's published input schema, as tools/list gives it.
func rt47Published(t *testing.T, cs *mcp.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Resolved{}
	for _, tl := range res.Tools {
		b, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", tl.Name, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: %v", tl.Name, err)
		}
		out[tl.Name] = r
	}
	return out
}

// rt47Violates reports whether the published schema refuses raw (its decoded value).
func rt47Violates(r *jsonschema.Resolved, raw string) bool {
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return true
	}
	return r.Validate(&v) != nil
}

// rt47Call sends raw as the call's arguments, byte for byte as written (duplicate keys,
// escapes and all).
func rt47Call(t *testing.T, cs *mcp.ClientSession, name, raw string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(raw)})
	if err != nil {
		t.Fatalf("tools/call %s %.80s: %v", name, raw, err)
	}
	return res
}

// TestRedTeam47M_EveryToolRefusesWhatItsSchemaRefuses: for every tool tools/list lists, each
// argument object its published schema refuses (unknown and case-folded keys, duplicates,
// wrong types, null, out-of-range numbers, over-long strings, pattern and required
// violations, too many or repeated items, resume's nested constraints, another tool's field)
// is refused with a message, audited as invalid, and reaches no port, over HTTP and stdio;
// the valid call of each tool is allowed. Every case of rt47Bad is first checked to be one the
// published schema refuses, so the table cannot drift into testing nothing; rt47Stricter, the
// cases the schema cannot refuse (duplicate keys, resume's exclusivity), are refused too.
func TestRedTeam47M_EveryToolRefusesWhatItsSchemaRefuses(t *testing.T) {
	p := newRT47Ports()
	sessions := rt47Sessions(t, p)
	published := rt47Published(t, sessions["http"])
	if len(published) != len(rt47Valid) {
		t.Fatalf("tools/list lists %d tools, the attack covers %d", len(published), len(rt47Valid))
	}
	for name := range published {
		if _, ok := rt47Bad[name]; !ok {
			t.Errorf("no attack on %s", name)
		}
	}
	for _, tr := range []string{"http", "stdio"} {
		cs := sessions[tr]
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for n := range rt47Bad {
				if !yield(n) {
					return
				}
			}
		}) {
			r := published[name]
			if rt47Violates(r, rt47Valid[name]) {
				t.Fatalf("%s: the valid call %s violates the published schema", name, rt47Valid[name])
			}
			before := p.calls.Load()
			if res := rt47Call(t, cs, name, rt47Valid[name]); res.IsError {
				t.Errorf("%s %s: valid call refused: %s", tr, name, text(res))
			}
			catalogOnly := slices.Contains([]string{"agora_capabilities_list", "agora_subagents_list", "agora_envs_list"}, name)
			if p.calls.Load() == before && !catalogOnly {
				t.Errorf("%s %s: valid call reached no port", tr, name)
			}
			if d := lastDecision(p.f.audit); d != "allowed" {
				t.Errorf("%s %s: valid call audited %q", tr, name, d)
			}
			for i, raw := range append(slices.Clone(rt47Bad[name]), rt47Stricter[name]...) {
				if i < len(rt47Bad[name]) && !rt47Violates(r, raw) {
					t.Errorf("%s: the case %.120s is one the published schema accepts", name, raw)
					continue
				}
				before := p.calls.Load()
				n := len(p.f.audit.all())
				res := rt47Call(t, cs, name, raw)
				if !res.IsError {
					t.Errorf("%s %s %.120s: accepted, though the published schema refuses it: %s", tr, name, raw, text(res))
				} else if msg := text(res); !strings.HasPrefix(msg, name) || len(msg) < len(name)+10 {
					t.Errorf("%s %s %.120s: refused without a clear message: %q", tr, name, raw, msg)
				}
				if p.calls.Load() != before {
					t.Errorf("%s %s %.120s: reached a port", tr, name, raw)
				}
				all := p.f.audit.all()
				if len(all) != n+1 {
					t.Errorf("%s %s %.120s: %d audit entries, want 1", tr, name, raw, len(all)-n)
				} else if d := all[n].Details["decision"]; d != "invalid" {
					t.Errorf("%s %s %.120s: audited %v, want invalid", tr, name, raw, d)
				}
			}
		}
	}
}

func lastDecision(a *auditLog) string {
	all := a.all()
	if len(all) == 0 {
		return ""
	}
	d, _ := all[len(all)-1].Details["decision"].(string)
	return d
}

// TestRedTeam47M_ResumeWithEmptySubagentRefused (hole): agora_dispatch with resume and
// "subagent":"" was accepted, audited allowed and resumed the dispatch, though the published
// schema refuses it (subagent's pattern needs a first character) and resume admits no
// subagent at all: an empty string read as "absent". It is refused as invalid, reaching no
// port, over HTTP and stdio.
func TestRedTeam47M_ResumeWithEmptySubagentRefused(t *testing.T) {
	p := newRT47Ports()
	sessions := rt47Sessions(t, p)
	raw := `{` + rt47Resume + `,"subagent":""}`
	if !rt47Violates(rt47Published(t, sessions["http"])["agora_dispatch"], raw) {
		t.Fatalf("the published schema accepts %s", raw)
	}
	for _, tr := range []string{"http", "stdio"} {
		res := rt47Call(t, sessions[tr], "agora_dispatch", raw)
		if !res.IsError || !strings.Contains(text(res), "subagent") {
			t.Errorf("%s: %s was not refused naming subagent: %s", tr, raw, text(res))
		}
		if d := lastDecision(p.f.audit); d != "invalid" {
			t.Errorf("%s: audited %q, want invalid", tr, d)
		}
	}
	if n := p.calls.Load(); n != 0 {
		t.Errorf("%d calls reached a port", n)
	}
	// Without subagent, the same answer resumes the dispatch.
	if res := rt47Call(t, sessions["http"], "agora_dispatch", `{`+rt47Resume+`}`); res.IsError {
		t.Fatalf("resume refused: %s", text(res))
	}
	if v, _ := p.last.Load("resume"); v != dispatchID+"|blue" {
		t.Errorf("resumed %v", v)
	}
}

// TestRedTeam47M_ValueUsedIsValueChecked: keys spelled with escapes, whitespace around the
// object, and a nested resume with escaped keys are accepted and reach the port with exactly
// the values checked; the audit hash is the canonical form of those arguments.
func TestRedTeam47M_ValueUsedIsValueChecked(t *testing.T) {
	p := newRT47Ports()
	sessions := rt47Sessions(t, p)
	for _, tr := range []string{"http", "stdio"} {
		cs := sessions[tr]
		cases := []struct{ tool, raw, port, want string }{
			{"agora_dispatch_describe", ` {"\u0069d" : "` + dispatchID + `"} `, "get", dispatchID},
			{"agora_dispatch_cancel", `{"id":"` + dispatchID + `"}`, "cancel", dispatchID},
			{"agora_dispatch", `{"resume":{"dispatc\u0068":"` + dispatchID + `","\u0061nswer":"red"},"wait_seconds":0}`, "resume", dispatchID + "|red"},
			{"agora_orchestrator_watch", `{"run_\u0069d":"run-1","timeout_seconds":7}`, "watch", "run-1|7s"},
			{"agora_orchestrator_schedule_show", `{"n\u0061me":"nightly"}`, "schedule", "nightly"},
		}
		for _, c := range cases {
			p.last.Delete(c.port)
			res := rt47Call(t, cs, c.tool, c.raw)
			if res.IsError {
				t.Errorf("%s %s %s: refused: %s", tr, c.tool, c.raw, text(res))
				continue
			}
			if got, _ := p.last.Load(c.port); got != c.want {
				t.Errorf("%s %s %s: port %s got %v, want %s", tr, c.tool, c.raw, c.port, got, c.want)
			}
		}
		p.last.Delete("dispatch")
		res := rt47Call(t, cs, "agora_dispatch", `{"subagent":"writer","envs":["a","b"],"target":"local","input":{"k":"v"},"timeout_seconds":60,"wait_seconds":0}`)
		if res.IsError {
			t.Fatalf("%s dispatch refused: %s", tr, text(res))
		}
		got, _ := p.last.Load("dispatch")
		r, _ := got.(mcpserver.DispatchRequest)
		if r.Subagent != "writer" || !slices.Equal(r.Envs, []string{"a", "b"}) || r.Target != "local" || string(r.Input) != `{"k":"v"}` || r.Timeout != time.Minute {
			t.Errorf("%s dispatch reached the port as %+v", tr, r)
		}
	}
}

// TestRedTeam47M_FieldCachePerToolConcurrent: the decoder's field names are found once per
// tool; tools that share names (id, run_id, wait_seconds, timeout_seconds) never take one
// another's. Many concurrent calls, each tool given its own fields and its neighbour's, over
// one HTTP endpoint and one stdio session, are each answered as that tool alone would.
func TestRedTeam47M_FieldCachePerToolConcurrent(t *testing.T) {
	p := newRT47Ports()
	sessions := rt47Sessions(t, p)
	type c struct {
		tool, raw string
		ok        bool
	}
	cases := []c{
		{"agora_dispatch_describe", `{"id":"` + dispatchID + `","wait_seconds":0}`, true},
		{"agora_dispatch_describe", `{"id":"` + dispatchID + `","timeout_seconds":1}`, false},
		{"agora_dispatch_cancel", `{"id":"` + dispatchID + `"}`, true},
		{"agora_dispatch_cancel", `{"id":"` + dispatchID + `","wait_seconds":0}`, false},
		{"agora_orchestrator_watch", `{"run_id":"run-1","timeout_seconds":1}`, true},
		{"agora_orchestrator_watch", `{"run_id":"run-1","wait_seconds":1}`, false},
		{"agora_orchestrator_status", `{"run_id":"run-1"}`, true},
		{"agora_orchestrator_status", `{"run_id":"run-1","timeout_seconds":1}`, false},
		{"agora_capabilities_list", `{}`, true},
		{"agora_capabilities_list", `{"id":"` + dispatchID + `"}`, false},
		{"agora_orchestrator_schedule_show", `{"name":"nightly"}`, true},
		{"agora_orchestrator_schedule_show", `{"run_id":"run-1"}`, false},
		{"agora_dispatch", `{"subagent":"writer","wait_seconds":0}`, true},
		{"agora_dispatch", `{"subagent":"writer","id":"` + dispatchID + `"}`, false},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails []string
	for _, tr := range []string{"http", "stdio"} {
		cs := sessions[tr]
		for w := range 8 {
			wg.Go(func() {
				for i := range 3 * len(cases) {
					k := cases[(i+w*5)%len(cases)]
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: k.tool, Arguments: json.RawMessage(k.raw)})
					if err != nil || res.IsError == k.ok {
						mu.Lock()
						fails = append(fails, fmt.Sprintf("%s %s %s: err %v, result %v", tr, k.tool, k.raw, err, res != nil && res.IsError))
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for _, f := range fails {
		t.Error(f)
	}
}

// TestRedTeam47M_NoBareSchemaIsPublished: whatever the ceiling and transport, tools/list
// gives each tool it shows its whole published schema (closed: additionalProperties false),
// never the bare {"type":"object"} the SDK server holds; a read client sees only read tools.
func TestRedTeam47M_NoBareSchemaIsPublished(t *testing.T) {
	published := mcpserver.PublishedSchemasForTest()
	for _, c := range mcpserver.Ceilings {
		f := newFixture()
		tok := newToken(t)
		addr := f.http(t, mcpserver.HTTPConfig{Clients: []mcpserver.Client{{Name: "c", Token: tok, Ceiling: c}}})
		for tr, cs := range map[string]*mcp.ClientSession{
			"http":  httpSession(t, "http://"+addr+"/mcp", tok),
			"stdio": f.stdio(t, mcpserver.Principal{Client: "c", Ceiling: c}, mcpserver.Limits{}),
		} {
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) == 0 {
				t.Fatalf("%s %s: no tools", tr, c)
			}
			for _, tl := range res.Tools {
				b, _ := json.Marshal(tl.InputSchema)
				var s struct {
					Type                 string
					Properties           map[string]any
					AdditionalProperties any
				}
				if err := json.Unmarshal(b, &s); err != nil {
					t.Fatal(err)
				}
				if s.AdditionalProperties == nil || s.Properties == nil {
					t.Errorf("%s %s: %s listed with an open schema %s", tr, c, tl.Name, b)
				}
				if tl.Name != "agora_dispatch" && !jsonEqual(b, published[tl.Name]) {
					t.Errorf("%s %s: %s listed with %s, want %s", tr, c, tl.Name, b, published[tl.Name])
				}
				if c == mcpserver.CeilingRead && (tl.Name == "agora_dispatch" || tl.Name == "agora_dispatch_cancel" || tl.Name == "agora_orchestrator_submit") {
					t.Errorf("%s read: lists %s", tr, tl.Name)
				}
			}
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestRedTeam47M_NullArgumentsReadAsAbsent pins a deliberate leniency: "arguments": null,
// which the published object schema does not describe, is read as no arguments at all (as
// decodeArgs documents and FuzzToolArguments assumes): a tool that
// takes none runs, one that needs an argument is refused as invalid.
func TestRedTeam47M_NullArgumentsReadAsAbsent(t *testing.T) {
	p := newRT47Ports()
	for tr, cs := range rt47Sessions(t, p) {
		if res := rt47Call(t, cs, "agora_orchestrator_schedules_list", `null`); res.IsError {
			t.Errorf("%s: schedules_list with null arguments refused: %s", tr, text(res))
		}
		if d := lastDecision(p.f.audit); d != "allowed" {
			t.Errorf("%s: audited %q", tr, d)
		}
		before := p.calls.Load()
		if res := rt47Call(t, cs, "agora_dispatch_describe", `null`); !res.IsError || !strings.Contains(text(res), `"id" is required`) {
			t.Errorf("%s: describe with null arguments: %s", tr, text(res))
		}
		if d := lastDecision(p.f.audit); d != "invalid" || p.calls.Load() != before {
			t.Errorf("%s: describe with null arguments audited %q, reached a port: %v", tr, d, p.calls.Load() != before)
		}
	}
}

// TestRedTeam47M_WorkspaceEnumIsTheDispatchersToJudge pins a gap the published schema has:
// with workspaces registered, tools/list gives agora_dispatch's workspace
// an enum of their bare names, which refuses a workspace not listed and every pinned
// NAME@sha256:HEX the description offers. agora's decoder checks the reference's form only;
// such a call is audited allowed and reaches the dispatcher with exactly the reference given,
// and the dispatcher (which resolves workspaces, beyond the 256 the enum lists) is the judge.
func TestRedTeam47M_WorkspaceEnumIsTheDispatchersToJudge(t *testing.T) {
	p := newRT47Ports()
	p.f.cat[catalog.KindWorkspace] = []catalog.Version{{Kind: catalog.KindWorkspace, Name: "app",
		Meta: catalog.Meta{Revisions: []string{"main"}, DefaultRevision: "main"}}}
	sessions := rt47Sessions(t, p)
	r := rt47Published(t, sessions["http"])["agora_dispatch"]
	for _, ws := range []string{"ghost", "app@sha256:" + hex64} {
		raw := `{"subagent":"writer","workspace":"` + ws + `","wait_seconds":0}`
		if !rt47Violates(r, raw) {
			t.Fatalf("the published schema accepts workspace %q: the enum is gone, update this test", ws)
		}
		for tr, cs := range sessions {
			p.last.Delete("dispatch")
			if res := rt47Call(t, cs, "agora_dispatch", raw); res.IsError {
				t.Errorf("%s %s: %s", tr, ws, text(res))
			}
			got, _ := p.last.Load("dispatch")
			if req, _ := got.(mcpserver.DispatchRequest); req.Workspace != ws {
				t.Errorf("%s: the dispatcher got workspace %q, want %q", tr, req.Workspace, ws)
			}
			if d := lastDecision(p.f.audit); d != "allowed" {
				t.Errorf("%s %s: audited %q", tr, ws, d)
			}
		}
	}
}
