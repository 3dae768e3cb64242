package selftest

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest"
	"go.yaml.in/yaml/v3"
)

// TestDecideHost covers each observation of fixtures.go with the canary present, and
// without it: an attack that never ran is never blocked, whatever its record says.
func TestDecideHost(t *testing.T) {
	r := &run{secret: "s3cret", fx: &fixtures{envSecret: "env-secret"}}
	ran := func(report string, raw string, h hostSeen) seen {
		h.raw = []byte(raw)
		return seen{canary: []byte("n\n"), report: []byte(report), host: h}
	}
	refusedRec := `{"id":"d1","state":"finished","net":{"refused":{"10.0.0.1:80":1}}}`
	reachedRec := `{"id":"d1","state":"finished","net":{"refused":{"a:1":1},"reached":{"10.0.0.1:80":1}}}`
	entry := func(kind, decision, s string) logEntry {
		return logEntry{Kind: kind, Subject: "dispatch/d1", Details: map[string]any{"decision": decision, "x": s}}
	}
	for _, tc := range []struct {
		name string
		a    Attack
		s    seen
		want string
	}{
		{"refused", Attack{Observe: ObserveRefused}, ran("refused\t403", refusedRec, hostSeen{}), Blocked},
		{"refused but reached", Attack{Observe: ObserveRefused}, ran("done\tok", reachedRec, hostSeen{}), Allowed},
		{"no proxy", Attack{Observe: ObserveRefused}, ran("done\tok", `{"id":"d1"}`, hostSeen{}), Allowed},
		{"no report", Attack{Observe: ObserveRefused}, ran("", refusedRec, hostSeen{}), NotRun},
		{"fixture reached", Attack{Observe: ObserveFixture}, ran("done\tok", `{}`, hostSeen{fixture: "the granted host got it"}), Allowed},
		{"fixture quiet", Attack{Observe: ObserveFixture}, ran("refused\t403", `{}`, hostSeen{}), Blocked},
		{"model quiet", Attack{Observe: ObserveModel}, ran("refused\t400", `{}`, hostSeen{}), Blocked},
		{"approval asked", Attack{Observe: ObserveApproval}, ran("done\t{}", `{"approvals":[{"call_id":"mark-n","tool":"write_file","state":"pending"}]}`, hostSeen{}), Allowed},
		{"approval refused", Attack{Observe: ObserveApproval}, ran("refused\t403", `{"approvals":[]}`, hostSeen{}), Blocked},
		{"audit holds mark", Attack{Observe: ObserveAudit}, ran("done\t", `{}`, hostSeen{entries: []logEntry{entry("tool.call", "denied", "mark-n")}}), Allowed},
		{"audit lacks mark", Attack{Observe: ObserveAudit}, ran("done\t", `{}`, hostSeen{entries: []logEntry{entry("tool.call", "denied", "x")}}), Blocked},
		{"audit allowed only", Attack{Observe: ObserveAudit, Arg: "allowed"}, ran("refused\t400", `{}`, hostSeen{entries: []logEntry{entry("tool.call", "denied", "mark-n")}}), Blocked},
		{"audit allowed", Attack{Observe: ObserveAudit, Arg: "allowed"}, ran("done\t", `{}`, hostSeen{entries: []logEntry{entry("tool.call", "allowed", "mark-n")}}), Allowed},
		{"audit secret", Attack{Observe: ObserveAudit, Arg: "secret"}, ran("done\t", `{}`, hostSeen{entries: []logEntry{entry("tool.call", "allowed", "env-secret")}}), Allowed},
		{"entries few", Attack{Observe: ObserveEntries, Arg: "3"}, ran("done\t", `{}`, hostSeen{entries: []logEntry{{}, {}}}), Blocked},
		{"entries many", Attack{Observe: ObserveEntries, Arg: "1"}, ran("done\t", `{}`, hostSeen{entries: []logEntry{{}, {}}}), Allowed},
		{"entries none", Attack{Observe: ObserveEntries, Arg: "1"}, ran("done\t", `{}`, hostSeen{}), NotRun},
		{"verdict red as named", Attack{Observe: ObserveVerdict, Arg: "protected-path"}, ran("done\t", `{"verdict":{"passed":false,"reason":"protected-path"}}`, hostSeen{}), Blocked},
		{"verdict green", Attack{Observe: ObserveVerdict, Arg: "protected-path"}, ran("done\t", `{"verdict":{"passed":true}}`, hostSeen{}), Allowed},
		{"verdict red otherwise", Attack{Observe: ObserveVerdict, Arg: "protected-path"}, ran("done\t", `{"verdict":{"passed":false,"reason":"exit-status"}}`, hostSeen{}), NotRun},
		{"no verdict", Attack{Observe: ObserveVerdict, Arg: "protected-path"}, ran("done\t", `{"state":"failed"}`, hostSeen{}), NotRun},
		{"verify failed", Attack{Observe: ObserveVerify, Arg: "drop-last"}, ran("done\t", `{}`, hostSeen{verify: &verifyAnswer{code: 5}}), Blocked},
		{"verify passed", Attack{Observe: ObserveVerify, Arg: "drop-last"}, ran("done\t", `{}`, hostSeen{verify: &verifyAnswer{code: 0}}), Allowed},
		{"verify usage", Attack{Observe: ObserveVerify, Arg: "drop-last"}, ran("done\t", `{}`, hostSeen{verify: &verifyAnswer{code: 2}}), NotRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ev := r.decide(tc.a, "n", tc.s); got != tc.want {
				t.Errorf("seen %s (%s), want %s", got, ev, tc.want)
			}
			tc.s.canary = []byte("an-older-run\n")
			if got, _ := r.decide(tc.a, "n", tc.s); got != NotRun {
				t.Errorf("without this run's canary: seen %s, want %s", got, NotRun)
			}
		})
	}
}

// TestValidHostObservation keeps the header's observations and their arguments to what
// decideHost knows.
func TestValidHostObservation(t *testing.T) {
	for _, ok := range [][2]string{{"refused", ""}, {"audit", "secret"}, {"entries", "40"}, {"verdict", "no-evidence"}, {"verify", "reorder"}} {
		if err := validHostObservation(ok[0], ok[1]); err != nil {
			t.Errorf("%s %s: %v", ok[0], ok[1], err)
		}
	}
	for _, bad := range [][2]string{{"refused", "x"}, {"audit", "all"}, {"entries", "0"}, {"verdict", "green"}, {"verify", "shred"}, {"vibes", ""}} {
		if err := validHostObservation(bad[0], bad[1]); err == nil {
			t.Errorf("%s %s: accepted", bad[0], bad[1])
		}
	}
}

// TestFixtures_Config admits the granted address, and only it, in the throw-away home's
// egress, keeping what the person's agora.yaml says.
func TestFixtures_Config(t *testing.T) {
	fx := &fixtures{grantedPort: 8080}
	for _, tc := range []struct{ name, in, want string }{
		{"default target", "# the default local target\n", "egress:\n    allow_private:\n        - 127.0.0.2/32\n"},
		{"egress kept", "egress:\n  ca_certs: [/ca.pem]\n  allow_private: [10.1.0.0/16]\ntargets:\n  local: {}\n",
			"egress:\n    ca_certs: [/ca.pem]\n    allow_private: [10.1.0.0/16, 127.0.0.2/32]\ntargets:\n    local: {}\n"},
		{"already admitted", "egress:\n  allow_private: [127.0.0.2/32]\n", "egress:\n  allow_private: [127.0.0.2/32]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fx.config([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := yaml.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			yaml.Unmarshal([]byte(tc.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if !bytes.Equal(gb, wb) {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	if got, _ := (&fixtures{}).config([]byte("a: 1\n")); string(got) != "a: 1\n" {
		t.Errorf("without a granted host the config changed: %s", got)
	}
}

// TestTamperings: each tampering changes the bundle's entries, and recomputes the leaf hash
// of what it rewrites, as a forger would.
func TestTamperings(t *testing.T) {
	bundle := func() []map[string]any {
		var es []map[string]any
		for i, s := range []string{`{"seq":0,"subject":"catalog/x"}`, `{"seq":1,"subject":"dispatch/D1"}`, `{"seq":2,"subject":"dispatch/D1"}`} {
			e := map[string]any{"index": json.Number(string(rune('0' + i))), "inclusion_proof": []any{}}
			setEntry(e, []byte(s))
			es = append(es, e)
		}
		return es
	}
	for name, tamper := range tamperings {
		t.Run(name, func(t *testing.T) {
			before := bundle()
			after, err := tamper(bundle(), "D1")
			if err != nil {
				t.Fatal(err)
			}
			same := len(after) == len(before)
			for i := 0; same && i < len(after); i++ {
				b, _ := entryBytes(after[i])
				a, _ := entryBytes(before[i])
				same = bytes.Equal(a, b)
				sum := sha256.Sum256(append([]byte{0}, b...))
				if after[i]["leaf_hash"] != base64.StdEncoding.EncodeToString(sum[:]) {
					t.Errorf("entry %d: the leaf hash is not the entry's", i)
				}
			}
			if same != (name == "none") {
				t.Errorf("the entries changed: %v, want %v", !same, name != "none")
			}
		})
	}
	if _, err := tamperings["drop-entry"](bundle(), "D9"); err == nil {
		t.Error("drop-entry of a dispatch the bundle does not name: no error")
	}
}

// TestServeModel speaks to the scripted model as the openai runtime does: a first request
// gets a run_command call of run.sh, one holding the call's result a final answer, in JSON
// and as an event stream; a wrong key is refused as the API refuses it.
func TestServeModel(t *testing.T) {
	fx := &fixtures{modelKey: "selftest-key"}
	srv := httptest.NewServer(http.HandlerFunc(fx.handle))
	defer srv.Close()
	post := func(key, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	first := `{"model":"selftest-model","messages":[{"role":"user","content":"mark-abc"}]}`
	resp, body := post("selftest-key", first)
	if resp.StatusCode != 200 || !strings.Contains(body, `"name":"run_command"`) || !strings.Contains(body, `run.sh`) {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	if fx.modelSaw("mark-abc") == "" {
		t.Error("the model did not keep the request")
	}
	second := `{"model":"selftest-model","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_selftest","type":"function","function":{"name":"run_command","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_selftest","content":"ok"}]}`
	if resp, body := post("selftest-key", second); resp.StatusCode != 200 || !strings.Contains(body, `"finish_reason":"stop"`) {
		t.Fatalf("second request: %d %s", resp.StatusCode, body)
	}
	stream := `{"model":"selftest-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`
	if resp, body := post("selftest-key", stream); resp.Header.Get("Content-Type") != "text/event-stream" ||
		!strings.Contains(body, `"delta"`) || !strings.Contains(body, `"usage"`) || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream: %s %s", resp.Header.Get("Content-Type"), body)
	}
	if resp, body := post("wrong", first); resp.StatusCode != 401 || !strings.Contains(body, `"error"`) {
		t.Fatalf("wrong key: %d %s", resp.StatusCode, body)
	}
}

// TestFixtures_Saw finds a nonce in what the granted host got, and a redirect points at the
// host's loopback.
func TestFixtures_Saw(t *testing.T) {
	fx := &fixtures{}
	srv := httptest.NewServer(http.HandlerFunc(fx.handle))
	defer srv.Close()
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Get(srv.URL + "/selftest/redirect/4242/abc123")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Location"); got != "http://127.0.0.1:4242/abc123" {
		t.Errorf("redirect to %q", got)
	}
	if fx.saw("abc123") == "" || fx.saw("zzz") != "" {
		t.Errorf("saw(abc123) = %q, saw(zzz) = %q", fx.saw("abc123"), fx.saw("zzz"))
	}
}

// TestStartFixtures starts the fixtures on this host and reaches each one as an attack that
// crossed a boundary would: what it sends is found by its nonce, and close ends them all.
func TestStartFixtures(t *testing.T) {
	fx, err := startFixtures(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fx.close()
	send := func(network, addr, nonce string) {
		t.Helper()
		c, err := net.Dial(network, addr)
		if err != nil {
			t.Fatalf("dial %s %s: %v", network, addr, err)
		}
		defer c.Close()
		io.WriteString(c, "GET /"+nonce+" HTTP/1.0\r\n\r\n")
	}
	wait := func(nonce string) {
		t.Helper()
		if !agoratest.Poll(10*time.Second, func() bool { return fx.saw(nonce) != "" }) {
			t.Errorf("no fixture saw %s", nonce)
		}
	}
	send("udp", "127.0.0.1:"+portString(fx.dnsPort), "n-dns")
	wait("n-dns")
	if fx.sock != "" {
		send("unix", fx.sock, "n-sock")
		wait("n-sock")
	}
	if fx.abstract != "" {
		send("unix", "@"+fx.abstract, "n-abstract")
		wait("n-abstract")
	}
	if fx.port6 != 0 {
		send("tcp", "[::1]:"+portString(fx.port6), "n-six")
		wait("n-six")
	}
	if fx.grantedPort != 0 {
		send("tcp", grantedAddr+":"+portString(fx.grantedPort), "n-granted")
		wait("n-granted")
	}
	if fx.saw("n-none") != "" {
		t.Error("a nonce nobody sent was seen")
	}
}
