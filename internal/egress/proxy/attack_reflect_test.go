package proxy

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Attack: the host echoes the real secret (the bound value it received) back: in a header,
// a header's name, the status line, a trailer, a body split across writes, base64 and gzip.
// None of it reaches the sandbox in clear.
func TestAttack_ReflectedSecretNeverReachesTheSandbox(t *testing.T) {
	const value = "ghp_realTOKENvalue0123456789"
	const ph = "agora-placeholder-aaaabbbbccccdddd"
	var sawEncoding []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawEncoding = append(sawEncoding, r.Header.Get("Accept-Encoding"))
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		fl := w.(http.Flusher)
		switch r.URL.Path {
		case "/header":
			w.Header().Set("X-Echo", tok)
			w.Header().Set("Set-Cookie", "s="+tok)
			w.Header().Set("Location", "https://x.test/?t="+tok)
		case "/name":
			w.Header().Set("X-"+tok, "1")
		case "/status":
			c, bw, _ := w.(http.Hijacker).Hijack()
			fmt.Fprintf(bw, "HTTP/1.1 200 %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", tok)
			bw.Flush()
			c.Close()
		case "/trailer":
			w.Header().Set("Trailer", "X-T")
			io.WriteString(w, "body")
			w.Header().Set("X-T", tok)
		case "/split":
			for i := range len(tok) {
				io.WriteString(w, tok[i:i+1])
				fl.Flush()
			}
		case "/split-big":
			io.WriteString(w, strings.Repeat("a", 32<<10-3)+tok[:7])
			fl.Flush()
			time.Sleep(20 * time.Millisecond)
			io.WriteString(w, tok[7:])
		case "/base64":
			io.WriteString(w, base64.StdEncoding.EncodeToString([]byte("user:"+tok)))
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			gz := gzip.NewWriter(w)
			io.WriteString(gz, tok)
			gz.Close()
		}
	}))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	ca, err := NewCA("d-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, Config{
		Rules: rules(t, "127.0.0.1:"+port), CA: ca, Roots: poolOf(srv.Certificate()),
		Bindings: []Binding{{Key: "GITHUB_TOKEN", Placeholder: ph, Value: []byte(value), Hosts: []string{"127.0.0.1:" + port}}},
	}, nil)
	c := f.client(poolFromCA(ca))
	c.Transport.(*http.Transport).DisableCompression = true
	for _, path := range []string{"/header", "/name", "/status", "/trailer", "/split", "/split-big", "/base64", "/gzip"} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+ph)
		req.Header.Set("Accept-Encoding", "gzip, br")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var seen bytes.Buffer
		fmt.Fprintf(&seen, "%s\n%v\n%v\n%s", resp.Status, resp.Header, resp.Trailer, body)
		if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
			plain, _ := io.ReadAll(zr)
			seen.Write(plain)
		}
		if b, err := base64.StdEncoding.DecodeString(string(body)); err == nil {
			seen.Write(b)
		}
		if strings.Contains(strings.ToLower(seen.String()), strings.ToLower(value)) {
			t.Errorf("%s: the secret reached the sandbox:\n%s", path, seen.String())
		}
	}
	for _, e := range sawEncoding {
		if e != "identity" {
			t.Fatalf("the host was offered Accept-Encoding %q; a bound host must answer in clear", e)
		}
	}
	f.p.Close()
	if strings.Contains(f.audit.dump(), value) {
		t.Fatalf("the audit holds the secret:\n%s", f.audit.dump())
	}
}
