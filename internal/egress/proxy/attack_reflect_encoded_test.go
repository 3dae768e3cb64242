package proxy

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/secret/redact/redacttest"
)

// reflections are what a bound host that echoes request headers may write back, by path:
// the Authorization header it received (the real value, swapped in by the proxy) in every
// form a host may echo it in.
func reflections(auth string) map[string]string {
	b64 := base64.StdEncoding.EncodeToString
	var uesc, every strings.Builder
	for _, c := range []byte(auth) {
		fmt.Fprintf(&uesc, `\u%04x`, c)
		fmt.Fprintf(&every, "%%%02X", c)
	}
	var spaced []string
	for _, c := range []byte(auth) {
		spaced = append(spaced, hex.EncodeToString([]byte{c}))
	}
	headers, _ := json.Marshal(map[string]map[string]string{"headers": {"Authorization": auth}})
	return map[string]string{
		"/b64-76":        redacttest.Wrap(b64([]byte(auth)), 76, "\n") + "\n",
		"/b64-64":        redacttest.Wrap(b64([]byte(auth)), 64, "\n") + "\n",
		"/b64-76-crlf":   redacttest.Wrap(b64([]byte(auth)), 76, "\r\n") + "\r\n",
		"/b64-headers":   redacttest.Wrap(b64([]byte("Host: x\r\nAuthorization: "+auth+"\r\n\r\n")), 76, "\n"),
		"/b64url":        base64.URLEncoding.EncodeToString([]byte(auth)),
		"/b64url-wrap":   redacttest.Wrap(base64.RawURLEncoding.EncodeToString([]byte("a="+auth)), 50, "\n  "),
		"/hex-spaced":    strings.Join(spaced, " "),
		"/hex-upper":     redacttest.Wrap(strings.ToUpper(hex.EncodeToString([]byte(auth))), 32, "\r\n"),
		"/hexdump":       hex.Dump([]byte(auth)),
		"/cut40":         auth[:40],
		"/cut40-b64":     redacttest.Wrap(b64([]byte(auth[:40])), 76, "\n"),
		"/cut20":         auth[:20],
		"/suffix":        auth[len(auth)-30:],
		"/middle":        auth[20:40],
		"/urlenc":        url.QueryEscape(auth),
		"/urlenc-every":  every.String(),
		"/json":          string(headers),
		"/json-u":        `{"authorization":"` + uesc.String() + `"}`,
		"/spaced-raw":    redacttest.Wrap(auth, 10, " "),
		"/b64-of-b64-76": redacttest.Wrap(b64([]byte(b64([]byte(auth)))), 76, "\n"),
	}
}

// Attack: a bound host reflects the Authorization header it received, with
// the real value the proxy swapped in, in every encoding a reader can undo: base64 wrapped at
// 76 or 64 characters (LF or CRLF), base64url, hex with spaces, a hex dump, cut to 40 or 20
// characters, a suffix, a middle piece, URL-encoded, JSON with \u escapes, and base64 twice;
// each as one write and split across two writes. Bearer and Basic credentials (the proxy
// base64-encodes Basic itself). The sandbox never reads back a piece of the value long
// enough to matter: [redacttest.Leak] tries every decoding a sandbox would, and finds no
// piece of [redacttest.MinPiece] bytes (8 of this 64-byte value). What the host wrote around
// the value reaches the sandbox.
func TestAttack_ReflectedSecretInAnyEncoding(t *testing.T) {
	const value = "ghp_R3aLs3cr3tVALUEs64charsLONGabcdefghijKLMNOPqrstuvw0123456789"
	const ph = "agora-placeholder-aaaabbbbccccdddd"
	if len(value) != 64 {
		t.Fatalf("value is %d bytes, want 64", len(value))
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, split := strings.CutSuffix(r.URL.Path, "/split")
		body, ok := reflections(r.Header.Get("Authorization"))[path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "<<")
		if split {
			// Two writes, each flushed: the proxy reads (and masks) them as they come.
			io.WriteString(w, body[:len(body)/2])
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
			body = body[len(body)/2:]
		}
		io.WriteString(w, body+">>")
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
	min := redacttest.MinPiece(len(value))
	for _, auth := range []string{"Bearer " + ph, "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+ph))} {
		for path := range reflections(auth) {
			for _, suffix := range []string{"", "/split"} {
				req, _ := http.NewRequest("GET", srv.URL+path+suffix, nil)
				req.Header.Set("Authorization", auth)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("%s%s: %v", path, suffix, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "<<") || !strings.HasSuffix(string(body), ">>") {
					t.Errorf("%s%s (%s): %d %q, want the host's answer", path, suffix, auth[:5], resp.StatusCode, body)
					continue
				}
				if piece, how := redacttest.Leak(body, []byte(value), min); piece != nil {
					t.Errorf("%s%s (%s): the sandbox reads %d bytes of the value back (%s): %q\nbody: %q",
						path, suffix, auth[:5], len(piece), how, piece, body)
				}
			}
		}
	}
}
