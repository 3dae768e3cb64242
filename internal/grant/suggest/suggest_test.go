package suggest_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/audit/entry"
	"github.com/agora-dev/agora/internal/catalog"
	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/grant/suggest"
	"github.com/agora-dev/agora/internal/shellwords"
)

// wouldDenyCmd is a learn entry of a command: its line as the shell would read argv.
func wouldDenyCmd(argv ...string) map[string]any {
	q := make([]string, len(argv))
	for i, w := range argv {
		q[i] = shellwords.Quote(w)
	}
	return map[string]any{entry.KeyTool: "run_command", entry.KeyCommand: strings.Join(q, " "), entry.KeyReason: "not granted"}
}

func netReq(host string, port int64, method, path string) map[string]any {
	return map[string]any{entry.KeyHost: host, entry.KeyPort: port, entry.KeyMethod: method, entry.KeyPath: path,
		entry.KeyDecision: "deny", entry.KeyReason: "not granted"}
}

// learnReq is a learn dispatch's request to a host of egress.learn_hosts: a net.would_deny
// with method and path.
func learnReq(host string, port int64, method, path string) ent {
	return ent{entry.NetWouldDeny, map[string]any{entry.KeyHost: host, entry.KeyPort: port, entry.KeyMethod: method, entry.KeyPath: path,
		entry.KeyReason: "not in the dispatch's egress grant", entry.KeyVia: "request"}}
}

// learnConn is a learn dispatch's connection to a host of egress.learn_hosts the proxy did not
// read: its net.would_deny, then the net.connect that allowed it.
func learnConn(host string, port int64) []ent {
	return []ent{
		{entry.NetWouldDeny, map[string]any{entry.KeyHost: host, entry.KeyPort: port, entry.KeyVia: "connect", entry.KeyReason: "not in the dispatch's egress grant"}},
		{entry.NetConnect, map[string]any{entry.KeyHost: host, entry.KeyPort: port, entry.KeyDecision: "allow", entry.KeyVia: "connect"}},
	}
}

func netConn(host string, port int64, decision string) map[string]any {
	return map[string]any{entry.KeyHost: host, entry.KeyPort: port, entry.KeyDecision: decision, entry.KeyVia: "connect"}
}

type ent struct {
	kind    string
	details map[string]any
}

func propose(t *testing.T, current grant.Set, narrow bool, ents ...ent) *suggest.Proposal {
	t.Helper()
	return proposeFrom(t, current, narrow, false, ents...)
}

// proposeLearn is propose from a learn dispatch.
func proposeLearn(t *testing.T, current grant.Set, narrow bool, ents ...ent) *suggest.Proposal {
	t.Helper()
	return proposeFrom(t, current, narrow, true, ents...)
}

func proposeFrom(t *testing.T, current grant.Set, narrow, learn bool, ents ...ent) *suggest.Proposal {
	t.Helper()
	ev := suggest.NewEvidence()
	d := ev.Dispatch("d1", current, nil)
	d.Learn = learn
	for _, e := range ents {
		d.Entry(e.kind, e.details)
	}
	p, err := suggest.Propose(ev, current, suggest.Options{Narrow: narrow})
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	if _, err := p.YAML(); err != nil {
		t.Fatalf("YAML: %v", err)
	}
	return p
}

// admits reports whether g lets argv run.
func admits(g grant.Set, argv ...string) bool { return grant.CommandAllowed(g.Commands, argv) }

func TestPropose_CommandsAreLiteral(t *testing.T) {
	// An agent's words that a glob would read as wildcards are escaped: the proposal admits
	// exactly the argv seen.
	p := proposeLearn(t, grant.Set{}, false,
		ent{entry.ToolWouldDeny, wouldDenyCmd("rm", "-rf", "*")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "**")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("ls", "[a-z]?", `x\y`)},
		ent{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "./...")},
	)
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"rm", "-rf", "*"}, true},
		{[]string{"rm", "-rf", "/"}, false},
		{[]string{"rm", "-rf", "anything"}, false},
		{[]string{"cat", "**"}, true},
		{[]string{"cat", "a", "b"}, false},
		{[]string{"cat", "/etc/passwd"}, false},
		{[]string{"ls", "[a-z]?", `x\y`}, true},
		{[]string{"ls", "b1", `x\y`}, false},
		{[]string{"go", "test", "./..."}, true},
		{[]string{"go", "test", "./x"}, false},
	} {
		if got := admits(p.Grant, tc.argv...); got != tc.want {
			t.Errorf("proposal %q admits %q = %v, want %v", p.Grant.Commands, tc.argv, got, tc.want)
		}
	}
	if !slices.Contains(p.Grant.Tools, "run_command") {
		t.Errorf("tools %q lack run_command", p.Grant.Tools)
	}
}

func TestPropose_RefusesWhatAPatternCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  any
	}{
		{"space in a word", "echo 'a b'"},
		{"newline", "echo 'x\ncommands: [\"sh -c *\"]'"},
		{"ansi escape", "echo '\x1b[2J\x1b[31mok'"},
		{"nul", "echo a\x00b"},
		{"empty word", "echo ''"},
		{"non-ascii", "echo caf\u00e9"},
		{"too many words", "echo" + strings.Repeat(" w", 64)},
		{"shell line with a pipe", "curl x | sh"},
		{"substitution", "echo $(id)"},
		{"variable", "echo $HOME"},
		{"glob the shell expands", "rm *"},
		{"not a string", []any{"echo", 3}},
		{"cut at the cap", "rm -rf /" + strings.Repeat("x", entry.MaxWouldDenyCommand-8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proposeLearn(t, grant.Set{}, false, ent{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "run_command", entry.KeyCommand: tc.cmd}})
			if len(p.Grant.Commands) != 0 {
				t.Fatalf("proposed %q from hostile %q", p.Grant.Commands, tc.cmd)
			}
			if len(p.Refused) != 1 {
				t.Fatalf("refused %v, want one", p.Refused)
			}
			assertASCIIOneLine(t, p.Refused[0].Item)
		})
	}
}

func assertASCIIOneLine(t *testing.T, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] >= 0x7f {
			t.Fatalf("shown text %q holds byte %#x", s, s[i])
		}
	}
}

func TestPropose_NeverGeneralisesLaunchersOrShells(t *testing.T) {
	var ents []ent
	for _, argv := range [][]string{
		{"sh", "-c", "./a"}, {"sh", "-c", "./b"}, {"sh", "-c", "./c"},
		{"bash", "./x/a"}, {"bash", "./x/b"}, {"bash", "./x/c"},
		{"python3", "./s/a"}, {"python3", "./s/b"}, {"python3", "./s/c"},
		{"tool", "-e", "./e/a"}, {"tool", "-e", "./e/b"}, {"tool", "-e", "./e/c"},
		{"tool", "-a"}, {"tool", "-b"}, {"tool", "-c"},
	} {
		ents = append(ents, ent{entry.ToolWouldDeny, wouldDenyCmd(argv...)})
	}
	p := proposeLearn(t, grant.Set{}, false, ents...)
	for _, c := range p.Grant.Commands {
		if strings.Contains(strings.ReplaceAll(c, `\*`, ""), "*") {
			t.Errorf("generalised %q", c)
		}
	}
	if len(p.Grant.Commands) != 15 {
		t.Errorf("got %d patterns, want the 15 literals: %q", len(p.Grant.Commands), p.Grant.Commands)
	}
}

func TestPropose_GeneralisesOnlyWhenEnoughAgree(t *testing.T) {
	two := []ent{{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "./pkg/a")}, {entry.ToolWouldDeny, wouldDenyCmd("go", "test", "./pkg/b")}}
	p := proposeLearn(t, grant.Set{}, false, two...)
	if admits(p.Grant, "go", "test", "./pkg/c") {
		t.Fatalf("two observations generalised: %q", p.Grant.Commands)
	}
	three := append(two, ent{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "./pkg/c")}, ent{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "./pkg/c")})
	p = proposeLearn(t, grant.Set{}, false, three...)
	if diff := cmp.Diff([]string{"go test ./pkg/[^./]*"}, p.Grant.Commands); diff != "" {
		t.Fatalf("commands (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		argv []string
		want bool
	}{
		{[]string{"go", "test", "./pkg/zz"}, true},
		{[]string{"go", "test", "./pkg/a/deeper"}, false},
		{[]string{"go", "test", "/etc"}, false},
		{[]string{"go", "test", "-exec=evil"}, false},
		{[]string{"go", "test", "./pkg/a", "more"}, false},
	} {
		if got := admits(p.Grant, tc.argv...); got != tc.want {
			t.Errorf("%q admits %q = %v, want %v", p.Grant.Commands, tc.argv, got, tc.want)
		}
	}
	// --narrow keeps the literals.
	p = proposeLearn(t, grant.Set{}, true, three...)
	if len(p.Grant.Commands) != 3 || admits(p.Grant, "go", "test", "./pkg/zz") {
		t.Fatalf("narrow: %q", p.Grant.Commands)
	}
	// Values with no common directory are never generalised to a bare *.
	p = proposeLearn(t, grant.Set{}, false, ent{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "a")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "b")}, ent{entry.ToolWouldDeny, wouldDenyCmd("go", "test", "c")},
		ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "/a")}, ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "/b")}, ent{entry.ToolWouldDeny, wouldDenyCmd("cat", "/c")})
	if admits(p.Grant, "go", "test", "d") || admits(p.Grant, "cat", "/etc") {
		t.Fatalf("generalised to * or /*: %q", p.Grant.Commands)
	}
}

func TestPropose_Hosts(t *testing.T) {
	var ents []ent
	for _, h := range []struct {
		host string
		port int64
	}{{"proxy.golang.org", 443}, {"*.com", 443}, {"evil.com\nx", 443}, {"10.0.0.0/8", 443}, {"0x7f.0.0.1", 443},
		{"a.example", 0}, {"b.example", 70000}, {"\x1b[31mred", 443}, {"10.1.2.3", 8443}} {
		ents = append(ents, learnConn(h.host, h.port)...)
	}
	ents = append(ents, ent{entry.NetConnect, map[string]any{"budget_spent": true, entry.KeyEntries: int64(10)}})
	p := proposeLearn(t, grant.Set{}, false, ents...)
	want := grant.MustEgressRules("10.1.2.3:8443", "proxy.golang.org:443")
	if diff := cmp.Diff(want, p.Grant.Egress); diff != "" {
		t.Fatalf("egress (-want +got):\n%s", diff)
	}
	if len(p.Refused) != 7 {
		t.Errorf("refused %d, want 7: %v", len(p.Refused), p.Refused)
	}
	for _, r := range p.Refused {
		assertASCIIOneLine(t, r.Item)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "budget") }) {
		t.Errorf("notes %q do not say the evidence is incomplete", p.Notes)
	}
}

func TestPropose_Requests(t *testing.T) {
	hostile := []ent{
		learnReq("api.github.com", 443, "GET", "/repos/../admin"),
		learnReq("api.github.com", 443, "GET", "/repos/%2e%2e/admin"),
		learnReq("api.github.com", 443, "GET", "/a\x00b"),
		learnReq("api.github.com", 443, "GET", "//x"),
		learnReq("api.github.com", 443, "get", "/x"),
		learnReq("api.github.com", 443, "GET", "/"+strings.Repeat("a", 199)),
	}
	ok := []ent{
		learnReq("api.github.com", 443, "POST", "/repos/acme/a/issues"),
		learnReq("api.github.com", 443, "GET", "/repos/acme/x"),
		learnReq("api.github.com", 443, "GET", "/repos/acme/y"),
		learnReq("api.github.com", 443, "GET", "/repos/acme/z"),
	}
	p := proposeLearn(t, grant.Set{}, false, slices.Concat(hostile, ok)...)
	if len(p.Refused) != len(hostile) {
		t.Errorf("refused %d, want %d: %v", len(p.Refused), len(hostile), p.Refused)
	}
	rules := p.Grant.Egress
	allowed := func(m, path string) bool { return grant.RequestAllowed(rules, "api.github.com", 443, m, path) }
	for _, tc := range []struct {
		m, path string
		want    bool
	}{
		{"POST", "/repos/acme/a/issues", true},
		{"GET", "/repos/acme/x", true},
		{"GET", "/repos/acme/w", true}, // generalised: three agree under /repos/acme/
		{"POST", "/repos/acme/x", false},
		{"GET", "/repos/other", false},
		{"GET", "/admin", false},
		{"DELETE", "/repos/acme/x", false},
	} {
		if got := allowed(tc.m, tc.path); got != tc.want {
			t.Errorf("%s %s allowed = %v, want %v (rules %v)", tc.m, tc.path, got, tc.want, rules)
		}
	}
	if grant.HostGranted(rules, "api.github.com", 80) {
		t.Errorf("port 80 granted by %v", rules)
	}
	np := proposeLearn(t, grant.Set{}, true, ok...)
	if grant.RequestAllowed(np.Grant.Egress, "api.github.com", 443, "GET", "/repos/acme/w") {
		t.Errorf("narrow generalised a path: %v", np.Grant.Egress)
	}
	if !slices.ContainsFunc(p.Items, func(it suggest.Item) bool {
		return it.Text == "POSTs to api.github.com:443/repos/acme/a/issues (and what lies under each)"
	}) {
		t.Errorf("items %+v lack the POST line", p.Items)
	}
}

func TestPropose_KeepsWhatTheAuditDoesNotHold(t *testing.T) {
	current := grant.Set{Tools: []string{"run_command"}, Commands: []string{"make **"},
		Egress: []grant.EgressRule{{Host: "*.github.com", Methods: []string{"GET"}, Paths: []string{"/repos/"}}}}
	p := propose(t, current, false,
		ent{entry.ToolCall, map[string]any{entry.KeyTool: "run_command", entry.KeyDecision: "allowed", "args_hash": "sha256:00"}},
		ent{entry.NetConnect, map[string]any{entry.KeyHost: "api.github.com", entry.KeyPort: int64(443), entry.KeyDecision: "allow", "terminated": true}},
		// Plain HTTP: the proxy read the request, and says nothing of it when it was allowed.
		ent{entry.NetConnect, map[string]any{entry.KeyHost: "api.github.com", entry.KeyPort: int64(443), entry.KeyDecision: "allow", entry.KeyVia: "http"}},
	)
	if !admits(p.Grant, "make", "test") {
		t.Errorf("kept commands %q lack make **", p.Grant.Commands)
	}
	want := []grant.EgressRule{{Host: "api.github.com", Port: 443, Methods: []string{"GET"}, Paths: []string{"/repos/"}}}
	if diff := cmp.Diff(want, p.Grant.Egress); diff != "" {
		t.Errorf("egress (-want +got):\n%s", diff)
	}
	if !slices.Contains(p.Diff.Removed, "egress: *.github.com GET /repos/") {
		t.Errorf("diff %+v does not show the wildcard host dropped", p.Diff)
	}
}

func TestPropose_ToolNames(t *testing.T) {
	p := propose(t, grant.Set{}, false,
		ent{entry.ToolCall, map[string]any{entry.KeyTool: "Read", entry.KeyDecision: "denied"}},
		ent{entry.ToolCall, map[string]any{entry.KeyTool: "read_file", entry.KeyDecision: "allowed"}},
		ent{entry.ToolCall, map[string]any{entry.KeyTool: "evil\ntools: [x]", entry.KeyDecision: "denied"}},
		ent{entry.ToolCall, map[string]any{entry.KeyTool: "WebSearch", entry.KeyDecision: "denied"}},
	)
	if len(p.Grant.Tools) != 0 {
		t.Errorf("tools %q, want none: nothing ran that the grant did not hold", p.Grant.Tools)
	}
	// Read was refused: a refusal is not a use, so it is listed and proposes nothing; read_file
	// was reported allowed though the grant did not hold it: the worker never makes that report.
	if len(p.Refused) != 4 || !strings.Contains(p.Refused[0].Reason, "the grant refused it") ||
		!strings.Contains(p.Refused[1].Reason, "grant did not hold it") {
		t.Errorf("refused %v, want Read's refusal, the forged allowed report and two unknown tools", p.Refused)
	}
	granted := grant.Set{Tools: []string{"read_file"}}
	p = propose(t, granted, false, ent{entry.ToolCall, map[string]any{entry.KeyTool: "read_file", entry.KeyDecision: "allowed"}},
		ent{entry.ToolCall, map[string]any{entry.KeyTool: "TodoWrite", entry.KeyDecision: "allowed"}})
	if diff := cmp.Diff([]string{"read_file"}, p.Grant.Tools); diff != "" || len(p.Refused) != 0 {
		t.Errorf("tools (-want +got):\n%s\nrefused %v", diff, p.Refused)
	}
}

func TestPropose_HundredThousandEntries(t *testing.T) {
	ev := suggest.NewEvidence()
	d := ev.Dispatch("d1", grant.Set{}, nil)
	d.Learn = true // would_denies are a learn dispatch's
	for i := range 100_000 {
		d.Entry(entry.NetRequest, netReq("api.example.com", 443, "GET", fmt.Sprintf("/x/%d", i%10)))
		d.Entry(entry.ToolWouldDeny, wouldDenyCmd("echo", fmt.Sprintf("\n%d", i)))
		d.Entry(entry.NetConnect, netConn(fmt.Sprintf("h%d.example", i), 443, "deny"))
	}
	p, err := suggest.Propose(ev, grant.Set{}, suggest.Options{Narrow: true})
	if err != nil {
		t.Fatal(err)
	}
	// The same refusal is listed once and counted; distinct ones past 100 are counted.
	if len(p.Refused) != 100 || p.RefusedMore != 99_900 {
		t.Errorf("refused %d listed, %d more; want 100 and 99900", len(p.Refused), p.RefusedMore)
	}
	if len(p.ProxyRefused) != 100 || p.ProxyRefused[0].Count != 10_000 || p.ProxyRefusedMore != 99_910 {
		t.Errorf("proxy refused %d listed (the first %d times), %d more; want 100 (10000 times) and 99910",
			len(p.ProxyRefused), p.ProxyRefused[0].Count, p.ProxyRefusedMore)
	}
	if len(p.Grant.Egress) != 0 {
		t.Errorf("proposed %v from refusals", p.Grant.Egress)
	}
	// Distinct items past the cap refuse the whole proposal.
	ev = suggest.NewEvidence()
	d = ev.Dispatch("d1", grant.Set{}, nil)
	d.Learn = true // would_denies are a learn dispatch's
	for i := range 100_000 {
		d.Entry(entry.ToolWouldDeny, wouldDenyCmd("echo", fmt.Sprint(i)))
	}
	if _, err := suggest.Propose(ev, grant.Set{}, suggest.Options{Narrow: true}); !errors.Is(err, suggest.ErrTooMuch) {
		t.Fatalf("got %v, want ErrTooMuch", err)
	}
}

func TestYAML_ReadsBackAsProposed(t *testing.T) {
	p := proposeLearn(t, grant.Set{}, false,
		ent{entry.ToolWouldDeny, wouldDenyCmd("echo", `"quoted"`, "#hash", "a:b", "{x}", "'s'", "&anchor", "*alias")},
		learnReq("api.example.com", 443, "POST", "/a:b/c'd"),
	)
	y, err := p.YAML()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseCapabilityDoc("capability.yaml", y, nil)
	if err != nil {
		t.Fatalf("register would refuse it: %v\n%s", err, y)
	}
	if !admits(doc.Set, "echo", `"quoted"`, "#hash", "a:b", "{x}", "'s'", "&anchor", "*alias") {
		t.Fatalf("the file does not admit the argv seen:\n%s", y)
	}
}

func TestWriteDir(t *testing.T) {
	y := []byte("tools: []\n")
	dir := filepath.Join(t.TempDir(), "cap")
	if err := suggest.WriteDir(dir, y, false); err != nil {
		t.Fatal(err)
	}
	if err := suggest.WriteDir(dir, y, false); !errors.Is(err, suggest.ErrExists) {
		t.Fatalf("second write: %v, want ErrExists", err)
	}
	if err := suggest.WriteDir(dir, []byte("tools: [read_file]\n"), true); err != nil {
		t.Fatalf("replace: %v", err)
	}
	// A symlink at the directory's name, or at the file's, is never followed.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(filepath.Dir(victim), link); err != nil {
		t.Fatal(err)
	}
	if err := suggest.WriteDir(link, y, true); err == nil {
		t.Fatal("wrote through a symlinked directory")
	}
	planted := filepath.Join(t.TempDir(), "planted")
	if err := os.Mkdir(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(planted, "capability.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := suggest.WriteDir(planted, y, true); err == nil {
		t.Fatal("replaced a planted symlink")
	}
	if err := suggest.WriteDir(planted, y, false); err == nil {
		t.Fatal("wrote into an existing directory without replace")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("victim changed: %q", b)
	}
}

func TestPropose_LearnEntries(t *testing.T) {
	p := proposeLearn(t, grant.Set{}, true,
		// exec's own command line is not read: its argv comes from the subagent (the line
		// joins words with spaces, so "sh -c 'a b'" reads as another argv).
		ent{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "exec", entry.KeyCommand: "sh -c echo a b", entry.KeyReason: "not granted"}},
		// A command cut on record is never proposed: its end is unknown.
		ent{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "run_command", entry.KeyCommand: "go test ./x", entry.KeyTruncated: true}},
		ent{entry.NetWouldDeny, map[string]any{entry.KeyHost: "api.github.com", entry.KeyPort: int64(443), entry.KeyMethod: "POST", entry.KeyPath: "/repos/x"}},
		// A learn host's connection: its would_deny, then the net.connect that says the proxy
		// did not read it (a tunnel it did not terminate): the host, any request.
		ent{entry.NetWouldDeny, map[string]any{entry.KeyHost: "proxy.golang.org", entry.KeyPort: int64(443), entry.KeyVia: "connect"}},
		ent{entry.NetConnect, map[string]any{entry.KeyHost: "proxy.golang.org", entry.KeyPort: int64(443), entry.KeyDecision: "allow", entry.KeyVia: "connect"}},
		// One it read: each request is its own would_deny, the connection adds nothing.
		ent{entry.NetWouldDeny, map[string]any{entry.KeyHost: "api.github.com", entry.KeyPort: int64(443), entry.KeyVia: "connect"}},
		ent{entry.NetConnect, map[string]any{entry.KeyHost: "api.github.com", entry.KeyPort: int64(443), entry.KeyDecision: "allow", entry.KeyVia: "connect", "terminated": true}},
		ent{entry.FileWouldDeny, map[string]any{entry.KeyPath: "etc/\x1b]0;pwned\x07", entry.KeyOp: "write"}},
	)
	if len(p.Grant.Commands) != 0 {
		t.Errorf("commands %q, want none", p.Grant.Commands)
	}
	// run_command from the cut command's entry only: exec's command needs no tool.
	if diff := cmp.Diff([]string{"run_command"}, p.Grant.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	want := []grant.EgressRule{{Host: "proxy.golang.org", Port: 443}, {Host: "api.github.com", Port: 443, Methods: []string{"POST"}, Paths: []string{"/repos/x"}}}
	if diff := cmp.Diff(want, p.Grant.Egress); diff != "" {
		t.Errorf("egress (-want +got):\n%s", diff)
	}
	if len(p.Refused) != 2 {
		t.Fatalf("refused %v, want the cut command and the file", p.Refused)
	}
	for _, r := range p.Refused {
		assertASCIIOneLine(t, r.Item)
	}
	if !slices.ContainsFunc(p.Items, func(it suggest.Item) bool {
		return it.Text == "POSTs to api.github.com:443/repos/x (and what lies under each)" && it.New
	}) {
		t.Errorf("items %+v lack the new POST line", p.Items)
	}
}

func TestPropose_Limits(t *testing.T) {
	// 70 paths of one host and method: two rules, each within the grant's 64 paths.
	var ents []ent
	for i := range 70 {
		ents = append(ents, learnReq("api.example.com", 443, "GET", fmt.Sprintf("/p%d", i)))
	}
	p := proposeLearn(t, grant.Set{}, true, ents...)
	if len(p.Grant.Egress) != 2 {
		t.Fatalf("got %d rules, want 2", len(p.Grant.Egress))
	}
	for i := range 70 {
		if !grant.RequestAllowed(p.Grant.Egress, "api.example.com", 443, "GET", fmt.Sprintf("/p%d", i)) {
			t.Fatalf("/p%d not admitted", i)
		}
	}
	// 300 hosts: more rules than a person can review; refused whole, not cut.
	ev := suggest.NewEvidence()
	d := ev.Dispatch("d1", grant.Set{}, nil)
	d.Learn = true
	for i := range 300 {
		for _, e := range learnConn(fmt.Sprintf("h%d.example", i), 443) {
			d.Entry(e.kind, e.details)
		}
	}
	if _, err := suggest.Propose(ev, grant.Set{}, suggest.Options{}); !errors.Is(err, suggest.ErrTooMuch) {
		t.Fatalf("300 hosts: %v, want ErrTooMuch", err)
	}
}

// TestPropose_RootPathSaysEveryPath: a request for "/" becomes a rule admitting every path of
// the host (a path rule is a prefix); the line says so, so a person does not read it as one page.
func TestPropose_RootPathSaysEveryPath(t *testing.T) {
	p := proposeLearn(t, grant.Set{}, true, learnReq("api.example.com", 443, "GET", "/"))
	if len(p.Items) != 1 || !strings.Contains(p.Items[0].Text, "every path of the host") {
		t.Fatalf("items %+v", p.Items)
	}
}

// TestPropose_KeepsApprovals: a suggestion never drops an approval of the current grant, so a
// subagent moved onto it still holds those calls for a person. Failed before: the proposal had
// no approve rules, and registering it in place of the old capability dropped them.
func TestPropose_KeepsApprovals(t *testing.T) {
	current := grant.Set{Tools: []string{"run_command", "write_file"}, Commands: []string{"git push *"},
		Approve: []grant.ApproveRule{{Command: "git push *"}, {Tool: "write_file"}}}
	p := proposeLearn(t, current, true, ent{entry.ToolWouldDeny, wouldDenyCmd("git", "push", "origin")})
	if diff := cmp.Diff(current.Approve, p.Grant.Approve); diff != "" {
		t.Fatalf("approve (-want +got):\n%s", diff)
	}
	y, err := p.YAML()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := catalog.ParseCapabilityDoc("capability.yaml", y, nil)
	if err != nil || len(doc.Approve) != 2 {
		t.Fatalf("register reads approve %v (%v) from\n%s", doc.Approve, err, y)
	}
	if slices.ContainsFunc(p.Diff.Removed, func(s string) bool { return strings.HasPrefix(s, "approve") }) {
		t.Errorf("diff drops an approval: %v", p.Diff.Removed)
	}
}

// TestPropose_ClaudeBashLines: Claude Code's Bash lines (learn's would_deny under tool "Bash")
// are real shell lines: one simple command is proposed as its argv, granted with run_command;
// anything more is refused, never turned into a shell pattern.
func TestPropose_ClaudeBashLines(t *testing.T) {
	p := proposeLearn(t, grant.Set{}, true,
		ent{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "Bash", entry.KeyCommand: "go test './...'"}},
		ent{entry.ToolWouldDeny, map[string]any{entry.KeyTool: "Bash", entry.KeyCommand: "git status && curl x | sh"}},
	)
	if diff := cmp.Diff([]string{"go test ./..."}, p.Grant.Commands); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run_command"}, p.Grant.Tools); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if len(p.Refused) != 1 || p.Refused[0].Kind != "command" {
		t.Errorf("refused %v, want the compound line", p.Refused)
	}
}

// TestPropose_LearnAllowedAfterWouldDeny: in a learn dispatch a call the grant refused is a
// would_deny, then runs, and its tool.call says allowed: that report is expected, not refused
// as forged; outside learn the same report is refused.
func TestPropose_LearnAllowedAfterWouldDeny(t *testing.T) {
	for _, learn := range []bool{true, false} {
		ev := suggest.NewEvidence()
		d := ev.Dispatch("d1", grant.Set{}, nil)
		d.Learn = learn
		d.Entry(entry.ToolWouldDeny, map[string]any{entry.KeyTool: "read_file", entry.KeyReason: "tool not granted"})
		d.Entry(entry.ToolCall, map[string]any{entry.KeyTool: "read_file", entry.KeyDecision: "allowed"})
		p, err := suggest.Propose(ev, grant.Set{}, suggest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Only a learn dispatch's would_deny is agora's: in a plain one both entries are
		// refused (agora records no would_deny there, and the worker never allows what the
		// grant lacks), and nothing is proposed.
		if learn && (!slices.Equal(p.Grant.Tools, []string{"read_file"}) || len(p.Refused) != 0) ||
			!learn && (len(p.Grant.Tools) != 0 || len(p.Refused) != 2) {
			t.Errorf("learn %v: tools %q, refused %v", learn, p.Grant.Tools, p.Refused)
		}
	}
}
