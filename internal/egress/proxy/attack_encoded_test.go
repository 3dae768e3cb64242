package proxy

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// Attack (HIGH): the placeholder, encoded, sent to a host it is not bound to: base64 (std
// and URL-safe, inside a longer blob at any alignment), percent-encoded (once, twice, every
// byte), hex, in a custom header, the query or Basic credentials. Each is found and refused.
func TestAttack_EncodedPlaceholderToUnboundHost(t *testing.T) {
	const ph = "agora-placeholder-0123456789abcdef"
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	f := start(t, Config{
		Rules:    rules(t, "127.0.0.1:"+port),
		Bindings: []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte("secret-value-123456"), Hosts: []string{"api.github.com"}}},
	}, nil)
	every := func(s string) string {
		var b strings.Builder
		for i := range len(s) {
			b.WriteString("%" + hex.EncodeToString([]byte{s[i]}))
		}
		return b.String()
	}
	b64 := base64.StdEncoding.EncodeToString
	cases := map[string]string{
		"base64 header":         "X-Auth: " + b64([]byte(ph)),
		"base64 header, offset": "X-Auth: " + b64([]byte("k="+ph+"&x=1")),
		"base64 bearer":         "Authorization: Bearer " + b64([]byte("u:"+ph)),
		"base64url query":       "?t=" + base64.RawURLEncoding.EncodeToString([]byte("xy"+ph)),
		"basic, base64 inside":  "Authorization: Basic " + b64([]byte("u:"+b64([]byte(ph)))),
		"percent every byte":    "?t=" + every(ph),
		"percent twice":         "?t=" + url.QueryEscape(every(ph)),
		"percent in a header":   "X-Token: " + every(ph),
		"hex":                   "X-Token: " + hex.EncodeToString([]byte(ph)),
		"upper case":            "X-Token: " + strings.ToUpper(ph),
	}
	for name, c := range cases {
		head := "GET http://127.0.0.1:" + port + "/ HTTP/1.1\r\n"
		if strings.HasPrefix(c, "?") {
			head = "GET http://127.0.0.1:" + port + "/" + c + " HTTP/1.1\r\n"
		} else {
			head += c + "\r\n"
		}
		resp, body := rawExchange(t, f.url.Host, head+"Host: 127.0.0.1:"+port+"\r\n\r\n")
		if resp.StatusCode != 403 || !strings.Contains(body, "not bound to this host") {
			t.Errorf("%s: %d %q", name, resp.StatusCode, body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host got %d requests carrying an encoded placeholder", n)
	}
}
