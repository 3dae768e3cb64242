package modelgw

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/egress"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/strictjson"
)

// fuzzGrants are the grants FuzzFetchRequest runs under; refGranted is an independent
// statement of what they allow.
var fuzzGrants = []grant.EgressRule{{Host: "granted.test"}, {Host: "*.docs.test"}, {Host: "10.1.2.3"}, {Host: "2001:db8::1"}}

func refGranted(host string) bool {
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 || host[i] >= 'A' && host[i] <= 'Z' {
			return false // what is dialed is ASCII; compare it lowercase
		}
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.String() == host && (host == "10.1.2.3" || host == "2001:db8::1")
	}
	return host == "granted.test" || strings.HasSuffix(host, ".docs.test") && len(host) > len(".docs.test")
}

// noLookup fails every resolution: the fuzz target must never reach the network.
type noLookup struct{}

func (noLookup) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return nil, errors.New("no lookups in the fuzz target")
}

// FuzzFetchRequest checks that decoding a /fetch body never panics and never yields a
// request to a host the grants do not allow, nor one with userinfo, another scheme or
// another method; and that the redirect vetting agrees on arbitrary URLs.
func FuzzFetchRequest(f *testing.F) {
	for _, seed := range []string{
		`{"url":"http://granted.test/a?b=c"}`,
		`{"url":"https://x.docs.test:8443/","method":"HEAD"}`,
		`{"url":"http://GRANTED.test/"}`,
		`{"url":"http://docs.test/"}`,
		`{"url":"http://evil.test/"}`,
		`{"url":"http://granted.test.evil.test/"}`,
		`{"url":"http://evil.test\\@granted.test/"}`,
		`{"url":"http://granted.test@evil.test/"}`,
		`{"url":"http://user:pw@granted.test/"}`,
		`{"url":"http://10.1.2.3/"}`,
		`{"url":"http://10.1.2.4/"}`,
		`{"url":"http://[2001:db8::1]:80/"}`,
		`{"url":"http://[::ffff:10.1.2.3]/"}`,
		`{"url":"http://0x0a.1.2.3/"}`,
		`{"url":"http://gr%61nted.test/"}`,
		`{"url":"file:///etc/passwd"}`,
		`{"url":"//granted.test/"}`,
		`{"url":"http://granted.test/","url":"http://evil.test/"}`,
		`{"url":"http://granted.test/","URL":"http://evil.test/"}`,
		`{"url":"http://granted.test/","method":"POST"}`,
		`{"url":"http://xn--grnted-cua.test/"}`,
		"{\"url\":\"http://gr\u0430nted.test/\"}",
		`{"url":"http://[fe80::1%25eth0]/"}`,
		`[]`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	g, err := newGateway(Config{
		DispatchID: testDispatchID, Role: testRole, Egress: fuzzGrants,
		// The dialer admits the private ranges, so only the grants stand between an IP
		// literal and a request.
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"),
		}}, noLookup{}),
		Audit: &fakeAuditor{},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _, _, err := g.decodeFetch(context.Background(), body)
		if err == nil {
			u := req.URL
			switch {
			case !refGranted(u.Hostname()) && !refGranted(strings.ToLower(u.Hostname())):
				t.Fatalf("decoded a request to ungranted host %q from %q", u.Hostname(), body)
			case u.Scheme != "http" && u.Scheme != "https":
				t.Fatalf("decoded a %q request from %q", u.Scheme, body)
			case u.User != nil:
				t.Fatalf("decoded a request with userinfo from %q", body)
			case req.Method != http.MethodGet && req.Method != http.MethodHead:
				t.Fatalf("decoded a %s request from %q", req.Method, body)
			case len(req.Header) != 2 || req.Header.Get("User-Agent") != fetchUserAgent || req.Header.Get("Accept-Encoding") != "identity":
				t.Fatalf("decoded request carries headers %v", req.Header)
			}
		}
		// The same vetting guards every redirect hop.
		if u, err := url.Parse(string(body)); err == nil && g.vetTarget(context.Background(), u, "GET") == nil {
			if !refGranted(strings.ToLower(u.Hostname())) || u.User != nil {
				t.Fatalf("redirect vetting admitted %q", body)
			}
		}
	})
}

// TestGateway_DecodeFetch pins what the fuzz target's grants admit, so the fuzz target is not
// vacuous: granted names, subdomains and IP literals decode to a request.
func TestGateway_DecodeFetch(t *testing.T) {
	g, err := newGateway(Config{
		DispatchID: testDispatchID, Role: testRole, Egress: fuzzGrants,
		Dialer: egress.NewDialer(egress.Policy{AllowPrivate: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32"),
		}}, noLookup{}),
		Audit: &fakeAuditor{},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body, wantURL, wantErr string
	}{
		{`{"url":"http://granted.test/a?b=c#f"}`, "http://granted.test/a?b=c", ""},
		{`{"url":"https://X.Docs.test:8443/","method":"HEAD"}`, "https://X.Docs.test:8443/", ""},
		{`{"url":"http://10.1.2.3/"}`, "http://10.1.2.3/", ""},
		{`{"url":"http://[2001:db8::1]:80/"}`, "http://[2001:db8::1]:80/", ""},
		{`{"url":"http://gr%61nted.test/"}`, "", "does not parse"},
		{`{"url":"http://10.1.2.4/"}`, "", `host "10.1.2.4" is not granted`},
		{`{"url":"http://[::ffff:10.1.2.3]/"}`, "", `host "::ffff:10.1.2.3" is not granted`},
		{`{"url":"http://evil.test\\@granted.test/"}`, "", "does not parse"},
		{`{"url":"http://granted.test@evil.test/"}`, "", "URL has userinfo"},
		{"{\"url\":\"http://gr\u0430nted.test/\"}", "", "not ASCII"},
		{`{"url":"http://[fe80::1%25eth0]/"}`, "", "has a zone"},
	} {
		t.Run(tc.body, func(t *testing.T) {
			req, _, _, err := g.decodeFetch(t.Context(), []byte(tc.body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v, want a request", err)
			}
			if req.URL.String() != tc.wantURL {
				t.Errorf("got URL %s, want %s", req.URL, tc.wantURL)
			}
		})
	}
}

// FuzzCheckCoding checks that the Content-Encoding check passes a body only when every
// element of every header value is identity (or empty), never one that names a coding, and
// that its refusal repeats a bounded part of the header.
func FuzzCheckCoding(f *testing.F) {
	for _, seed := range [][2]string{
		{"identity", ""}, {"Identity", " , IDENTITY"}, {"", ""}, {",", "\t"},
		{"deflate", ""}, {"gzip", ""}, {"identity, gzip", ""}, {"identity", "br"},
		{"identityidentity", ""}, {"identity;q=1", ""}, {"x-gzip", ""}, {"zstd, identity", ""},
		{"ıdentity", ""}, {"identity\x00", ""}, {strings.Repeat("a", 300), ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, v1, v2 string) {
		h := http.Header{}
		h.Add("Content-Encoding", v1)
		if v2 != "" {
			h.Add("Content-Encoding", v2)
		}
		err := checkCoding(h)
		if err != nil {
			if n := len(err.Error()); n > 300 { // 35 bytes quoted at most 4 to a byte, and the sentence
				t.Fatalf("refusal is %d bytes, want the coding clipped", n)
			}
			return
		}
		for _, v := range []string{v1, v2} {
			for _, el := range strings.Split(v, ",") {
				el = strings.ToLower(strings.Trim(el, " \t"))
				if el != "" && el != "identity" {
					t.Fatalf("passed a body in coding %q (header %q, %q)", el, v1, v2)
				}
			}
		}
	})
}

// FuzzModelRequest reads arbitrary bodies as a model request: never a panic, and a model it
// accepts is the one every case-sensitive reader of the body sees at its top level, with no
// other key there that a case-insensitive reader (encoding/json into a struct) could take
// for "model".
func FuzzModelRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o-mini","messages":[]}`, `{"model":"a","model":"b"}`, `{"model":"a","Model":"b"}`,
		`{"Model":"a"}`, `{"MODEL":"a"}`, `{"model":["a"]}`, `{"model":null}`, `{}`, `[]`, `{"model":"\u0061"}`,
		`{"model":"a","prompt":{"id":"p"}}`, `{"model":"a","x":{"k":1,"K":2}}`, `{"model":"a"} {}`, `{"model":"a","n":1e999}`,
		`{"model":"a","tools":[{"type":"function"},{"Type":"web_search"}]}`, `{"model":"a","tools":[{"type":"mcp"}],"background":true}`,
		`{"model":"a","service_tier":"priority","speed":"fast","inference_geo":"us","modalities":["audio"]}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, responses bool) {
		mr, err := decodeModelRequest(body, responses)
		if err != nil {
			return
		}
		model := *mr.Model
		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body encoding/json refuses: %q", body)
		}
		var seen string
		if json.Unmarshal(top["model"], &seen) != nil || seen != model {
			t.Fatalf("accepted model %q, a case-sensitive reader sees %s", model, top["model"])
		}
		for k := range top {
			if k != "model" && strings.EqualFold(k, "model") {
				t.Fatalf("accepted %q beside model in %q", k, body)
			}
		}
		if responses && len(top["prompt"]) > 0 && string(top["prompt"]) != "null" {
			t.Fatalf("accepted a stored prompt: %q", body)
		}
		// What the gateway judges of "tools" is what a case-sensitive reader sees there.
		_ = dearerRate(APIAnthropic, mr, http.Header{"Anthropic-Beta": {string(body)}})
		_ = dearerRate(APIOpenAI, mr, nil)
		_ = providerActs(APIAnthropic, mr)
		if providerActs(APIOpenAI, mr) == "" {
			var tools []map[string]json.RawMessage
			_ = json.Unmarshal(top["tools"], &tools)
			for _, tl := range tools {
				var typ string
				if json.Unmarshal(tl["type"], &typ) != nil || !slices.Contains(openAIClientTools, typ) {
					t.Fatalf("forwarded a tool of type %s: %q", tl["type"], body)
				}
			}
		}
	})
}

// FuzzApprovalRequest decodes arbitrary /approval bodies as the gateway does and asks which
// rule holds the call: never a panic; a call is held only by one of the grant's rules, only
// for a tool an approve rule can name, and never by the rule text the body carries.
func FuzzApprovalRequest(f *testing.F) {
	for _, s := range []string{
		`{"tool":"write_file","call_id":"c","rule":"x","args":{"path":"a"}}`,
		`{"tool":"run_command","call_id":"c","rule":"x","args":{"argv":["git","push","o"]}}`,
		`{"tool":"Bash","call_id":"c","rule":"x","args":{"command":"git push o; rm -rf /"}}`,
		`{"tool":"deploy_production","call_id":"c","rule":"pre-approved","args":{}}`,
		`{"tool":"run_command","call_id":"c","rule":"x","args":{"argv":["git","push"],"ARGV":["ls"]}}`,
		`{"tool":"write_file","Tool":"x","call_id":"c","rule":"x","args":{}}`,
	} {
		f.Add([]byte(s))
	}
	rules := []grant.ApproveRule{{Tool: "write_file"}, {Command: "git push *"}}
	g, err := newGateway(Config{DispatchID: testDispatchID, Role: testRole, Dialer: defaultDialer(), Audit: &fakeAuditor{}, Approve: rules})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req approvalRequest
		if strictjson.Unmarshal(body, &req) != nil || g.checkApproval(&req) != nil {
			return
		}
		if _, _, err := ArgsDigest(req.Args); err != nil {
			return
		}
		r, err := g.holdingRule(req.Tool, req.Args)
		if err != nil {
			return
		}
		if !slices.Contains(rules, r) {
			t.Fatalf("held by %+v, not a rule of the grant", r)
		}
		if grant.ApprovalTool(req.Tool) == "" {
			t.Fatalf("tool %q held although no approve rule can name it", req.Tool)
		}
		if r.Tool != "" && grant.ApprovalTool(req.Tool) != r.Tool {
			t.Fatalf("tool %q held by the rule for %q", req.Tool, r.Tool)
		}
	})
}

// FuzzToolAuditDecode decodes arbitrary /audit/tool bodies: never a panic, and a report it
// accepts says what every case-sensitive reader of the body reads, field by field.
func FuzzToolAuditDecode(f *testing.F) {
	for _, s := range []string{
		`{"tool":"read_file","decision":"allowed","reason":"","args_hash":"sha256:` + strings.Repeat("a", 64) + `","duration_ms":3}`,
		`{"tool":"read_file","Tool":"x","decision":"allowed"}`, `{"tool":"a","tool":"b"}`, `{"duration_ms":1e400}`,
		`{"tool":"read_file","decision":"denied","phase":"pre","call_id":"toolu_1","args_hash":"sha256:` + strings.Repeat("b", 64) + `"}`,
		`{"tool":{"x":1}}`, `{"\u0074ool":"x"}`, `{}`, `[]`,
		`{"tool":"run_command","decision":"would_deny","reason":"command not granted","args_hash":"sha256:` + strings.Repeat("c", 64) + `","duration_ms":0,"command":"rm -rf /"}`,
		`{"tool":"x","decision":"would_deny","command":"a","Command":"b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var r toolAuditRequest
		if decodeFlat(body, toolAuditFields, &r) != nil {
			return
		}
		r.validate() // must not panic
		var top map[string]any
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatalf("accepted a body encoding/json refuses: %q", body)
		}
		for k, got := range map[string]string{"tool": r.Tool, "decision": r.Decision, "reason": r.Reason, "phase": r.Phase, "call_id": r.CallID, "args_hash": r.ArgsHash, "command": r.Command} {
			if v, ok := top[k].(string); ok && v != got || !ok && got != "" {
				t.Fatalf("field %s decoded %q, a case-sensitive reader sees %v in %q", k, got, top[k], body)
			}
		}
	})
}
