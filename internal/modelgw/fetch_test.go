package modelgw

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
)

func TestGateway_FetchGranted(t *testing.T) {
	type seen struct {
		method, path, query string
		header              http.Header
	}
	got := make(chan seen, 1)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone()}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Set-Cookie", "a=b")
		w.WriteHeader(http.StatusTeapot)
		io.WriteString(w, "hello, sandbox")
	})
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test"), APIKey: []byte(testKey)})
	target := up.at("GRANTED.test") + "/page?token=s3cr3t-query#frag"
	resp, b := h.do(t, http.MethodPost, "/fetch", http.Header{
		"Authorization": {"Bearer sk-sandbox-forged-key-0000"},
		"Cookie":        {"session=abc"},
	}, fmt.Sprintf(`{"url":%q,"method":"GET"}`, target))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %q, want 200", resp.StatusCode, b)
	}
	var reply fetchReply
	if err := json.Unmarshal(b, &reply); err != nil {
		t.Fatal(err)
	}
	want := fetchReply{Status: http.StatusTeapot, ContentType: "text/plain",
		BodyBase64: base64.StdEncoding.EncodeToString([]byte("hello, sandbox"))}
	if diff := cmp.Diff(want, reply); diff != "" {
		t.Errorf("fetch reply (-want +got):\n%s", diff)
	}
	s := <-got
	if s.method != http.MethodGet || s.path != "/page" || s.query != "token=s3cr3t-query" {
		t.Errorf("upstream got %s %s ?%s, want GET /page ?token=s3cr3t-query", s.method, s.path, s.query)
	}
	for _, hdr := range []string{"Authorization", "Cookie"} {
		if v := s.header.Get(hdr); v != "" {
			t.Errorf("upstream got %s %q, want no header from the sandbox", hdr, v)
		}
	}
	rec := h.audit.lastGateway(t, 1)
	wantRecord(t, rec, routeFetch, decisionAllowed, http.StatusOK, "")
	if rec["host"] != "GRANTED.test" || rec["path"] != "/page" {
		t.Errorf("got record host %v path %v, want GRANTED.test /page", rec["host"], rec["path"])
	}
	for _, e := range h.audit.all() {
		if s := fmt.Sprint(e.details); strings.Contains(s, "s3cr3t") || strings.Contains(s, "hello") {
			t.Errorf("audit record %v holds the query string or the body", e.details)
		}
	}
}

func TestGateway_FetchHeadAndTruncation(t *testing.T) {
	methods := make(chan string, 2)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		methods <- r.Method
		io.WriteString(w, strings.Repeat("0123456789", 10))
	})
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test"), MaxBody: 16})

	status, reply, _ := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/"))
	body, _ := base64.StdEncoding.DecodeString(reply.BodyBase64)
	if status != http.StatusOK || !reply.Truncated || string(body) != "0123456789012345" {
		t.Errorf("got %d truncated=%v body %q, want 200, truncated, the first 16 bytes", status, reply.Truncated, body)
	}
	if m := <-methods; m != http.MethodGet {
		t.Errorf("method omitted: upstream got %s, want GET", m)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeFetch, decisionAllowed, http.StatusOK, "truncated at 16 bytes")

	status, reply, _ = h.fetch(t, fmt.Sprintf(`{"url":%q,"method":"HEAD"}`, up.at("granted.test")+"/"))
	if status != http.StatusOK || reply.Truncated || reply.BodyBase64 != "" || reply.Status != http.StatusOK {
		t.Errorf("HEAD: got %d %+v, want 200 with status 200 and no body", status, reply)
	}
	if m := <-methods; m != http.MethodHead {
		t.Errorf("upstream got %s, want HEAD", m)
	}
}

func TestGateway_FetchRefused(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	port := strings.TrimPrefix(up.at(""), "http://:")
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test", "*.docs.test", "internal.test", "10.0.0.1")})
	// A policy refusal (403) has its own entry; a malformed request (400) is counted.
	var denied, malformed int
	for _, tc := range []struct {
		name   string
		body   string
		status int
		msg    string
		host   string
	}{
		{"UngrantedHost", `{"url":"http://evil.test:` + port + `/"}`, 403, `host "evil.test" is not granted`, "evil.test"},
		{"WildcardIsNotTheDomain", `{"url":"http://docs.test:` + port + `/"}`, 403, `host "docs.test" is not granted`, "docs.test"},
		{"SuffixIsNotASubdomain", `{"url":"http://evildocs.test/"}`, 403, `host "evildocs.test" is not granted`, "evildocs.test"},
		{"GrantedNameAsSuffix", `{"url":"http://granted.test.evil.test/"}`, 403, `is not granted`, "granted.test.evil.test"},
		{"PrivateAddressByName", `{"url":"http://internal.test/"}`, 403, "address 10.0.0.1 is private (RFC 1918)", "internal.test"},
		{"PrivateAddressLiteral", `{"url":"http://10.0.0.1/"}`, 403, "address 10.0.0.1 is private (RFC 1918)", "10.0.0.1"},
		{"FileScheme", `{"url":"file:///etc/passwd"}`, 403, `URL scheme "file" is not http or https`, ""},
		{"FTPScheme", `{"url":"ftp://granted.test/x"}`, 403, `URL scheme "ftp" is not http or https`, "granted.test"},
		{"Userinfo", `{"url":"http://user:pw@granted.test:` + port + `/"}`, 403, "URL has userinfo", "granted.test"},
		{"NoHost", `{"url":"http:///path"}`, 403, "URL has no host", ""},
		{"NonCanonicalIP", `{"url":"http://0x7f.1/"}`, 403, "is not granted", "0x7f.1"},
		{"POSTMethod", `{"url":"http://granted.test/","method":"POST"}`, 403, `method "POST" is not allowed`, ""},
		{"NotJSON", `url=http://granted.test/`, 400, "body is not a JSON object", ""},
		{"UnknownField", `{"url":"http://granted.test/","headers":{"A":"b"}}`, 400, `unknown field "headers"`, ""},
		{"DuplicateURL", `{"url":"http://granted.test/","url":"http://evil.test/"}`, 400, `field "url" given twice`, ""},
		{"CaseFoldedField", `{"url":"http://granted.test/","URL":"http://evil.test/"}`, 400, `unknown field "URL"`, ""},
		{"NoURL", `{"method":"GET"}`, 400, "no url", ""},
		{"TrailingData", `{"url":"http://granted.test/"} {}`, 400, "data after the JSON object", ""},
		{"BadUTF8", "{\"url\":\"http://granted.test/\xff\"}", 400, "not valid UTF-8", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, msg := h.fetch(t, tc.body)
			if status != tc.status || !strings.Contains(msg, tc.msg) {
				t.Errorf("got %d %q, want %d containing %q", status, msg, tc.status, tc.msg)
			}
			if tc.status == http.StatusBadRequest {
				malformed++
				wantRefused(t, h, routeFetch, tc.status, malformed)
				return
			}
			denied++
			rec := h.audit.lastGateway(t, denied)
			wantRecord(t, rec, routeFetch, decisionDenied, tc.status, tc.msg)
			if rec["host"] != tc.host {
				t.Errorf("got record host %q, want %q", rec["host"], tc.host)
			}
			if strings.Contains(fmt.Sprint(rec), "pw") {
				t.Errorf("record %v holds the URL's password", rec)
			}
		})
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
}

func TestGateway_FetchRedirects(t *testing.T) {
	evil := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "exfiltrated") })
	docs := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "docs") })
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-evil":
			http.Redirect(w, r, evil.at("evil.test")+"/x?leak=1", http.StatusFound)
		case "/to-docs":
			http.Redirect(w, r, docs.at("sub.docs.test")+"/", http.StatusMovedPermanently)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		}
	})
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test", "*.docs.test")})

	status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/to-evil"))
	if status != http.StatusForbidden || msg != `host "evil.test" is not granted` {
		t.Errorf("redirect to an ungranted host: got %d %q, want 403 naming evil.test", status, msg)
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("the ungranted redirect target got %d requests, want 0", n)
	}
	wantRecord(t, h.audit.lastGateway(t, 1), routeFetch, decisionDenied, http.StatusForbidden, "evil.test")

	status, _, msg = h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/to-file"))
	if status != http.StatusForbidden || !strings.Contains(msg, "not http or https") {
		t.Errorf("redirect to file://: got %d %q, want 403", status, msg)
	}
	wantRecord(t, h.audit.lastGateway(t, 2), routeFetch, decisionDenied, http.StatusForbidden, "")

	status, reply, _ := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/to-docs"))
	if body, _ := base64.StdEncoding.DecodeString(reply.BodyBase64); status != http.StatusOK || string(body) != "docs" {
		t.Errorf("redirect to a granted host: got %d %q, want 200 docs", status, body)
	}
	wantRecord(t, h.audit.lastGateway(t, 3), routeFetch, decisionAllowed, http.StatusOK, "")
}

func TestGateway_FetchLoopbackRefusedByDefault(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test", "127.0.0.1"), Dialer: defaultDialer()})
	for i, target := range []string{up.at("granted.test"), up.URL} {
		status, _, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, target+"/"))
		if status != http.StatusForbidden || msg != "address 127.0.0.1 is loopback" {
			t.Errorf("fetch %s: got %d %q, want 403 %q", target, status, msg, "address 127.0.0.1 is loopback")
		}
		wantRecord(t, h.audit.lastGateway(t, i+1), routeFetch, decisionDenied, http.StatusForbidden, "loopback")
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream got %d requests, want 0", n)
	}
}

func TestGateway_FetchRedactsKey(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; k="+testKey)
		io.WriteString(w, "the key is "+testKey)
	})
	h := start(t, Config{Egress: grant.MustEgressRules("granted.test"), APIKey: []byte(testKey)})
	status, reply, _ := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/"))
	body, _ := base64.StdEncoding.DecodeString(reply.BodyBase64)
	if status != http.StatusOK || string(body) != "the key is [REDACTED]" || reply.ContentType != "text/plain; k=[REDACTED]" {
		t.Errorf("got %d %+v (body %q), want the key masked in body and content type", status, reply, body)
	}
}

// TestGateway_RefusalsRepeatNoPartOfASecret: a refusal's reason is recorded, masked. It used
// to quote the sandbox's (or an upstream's) value cut to a few bytes, or lowercased, and the
// redactor, which runs over the whole message, knows neither the first part of a secret nor
// its lowercase: an agent could put 16 bytes of an env secret into the audit log as a fetch
// method, or 79 as a host. Now a value is repeated whole and as sent, or only its length.
func TestGateway_RefusalsRepeatNoPartOfASecret(t *testing.T) {
	const (
		envSecret    = "ghp_R3dT3amSecretValue0123456789abcdefXYZ"
		schemeSecret = "Sch3meSecretValue0123456789abcdefXYZ" // the alphabet of a URL scheme
		shortSecret  = "Sh0rtSecret01234"                     // a scheme within the old 16-byte cut
	)
	model := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "x"+envSecret) // an upstream the sandbox told the secret
		io.WriteString(w, "{}")
	})
	h := start(t, Config{ModelBaseURL: model.at("model.test"), Egress: grant.MustEgressRules("granted.test"),
		Secrets: [][]byte{[]byte(envSecret), []byte(schemeSecret), []byte(shortSecret)}})
	for _, body := range []string{
		`{"url":"http://granted.test/","method":"` + envSecret + `"}`,
		`{"url":"` + schemeSecret + `://granted.test/"}`,
		`{"url":"` + shortSecret + `://granted.test/"}`,
		`{"url":"http://` + envSecret + `.evil.test/"}`,
		`{"url":"http://` + strings.Repeat("a", 60) + `.` + envSecret + `.evil.test/"}`,
	} {
		if status, _, msg := h.fetch(t, body); status != http.StatusForbidden {
			t.Errorf("%s: got %d %q, want 403", body, status, msg)
		}
	}
	if resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("encoded model answer: got %d %s, want 502", resp.StatusCode, body)
	}
	h.audit.waitGateway(t, 6)
	for _, e := range h.audit.all() {
		b, _ := json.Marshal(e.details)
		for _, s := range []string{envSecret, schemeSecret, shortSecret} {
			for _, part := range []string{s[:12], strings.ToLower(s[:12])} {
				if strings.Contains(string(b), part) {
					t.Errorf("part of a secret (%q) is in a %s entry: %s", part, e.kind, b)
				}
			}
		}
	}
}
