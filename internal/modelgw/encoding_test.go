package modelgw

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/grant"
)

// compressed encodes b with the named content coding.
func compressed(t testing.TB, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		w, _ = flate.NewWriter(&buf, flate.BestSpeed)
	case "gzip", "x-gzip":
		w = gzip.NewWriter(&buf)
	default:
		return b // an unknown coding: the bytes as they are
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// decodings returns b and whatever each known decoder makes of it, so a key that reached the
// sandbox compressed is found too.
func decodings(b []byte) map[string][]byte {
	out := map[string][]byte{"raw": b}
	if r, err := zlib.NewReader(bytes.NewReader(b)); err == nil {
		out["zlib"], _ = io.ReadAll(r)
	}
	out["flate"], _ = io.ReadAll(flate.NewReader(bytes.NewReader(b)))
	if r, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		out["gzip"], _ = io.ReadAll(r)
	}
	return out
}

// wantNoKeyDecoded fails if any form of testKey is in b or in any decoding of it.
func wantNoKeyDecoded(t testing.TB, what string, b []byte) {
	t.Helper()
	for name, d := range decodings(b) {
		wantNoKey(t, what+" ("+name+")", d)
	}
}

// TestGateway_EncodedBodyRefused: a model endpoint that answered
// with "Content-Encoding: deflate", unasked, had its body passed to the sandbox unmasked, the
// key in it compressed. The gateway now asks for identity on every route and refuses, with a
// 502 it audits, any body in another coding; the sandbox gets none of it.
func TestGateway_EncodedBodyRefused(t *testing.T) {
	for _, tc := range []struct {
		name, route, coding, contentType string
	}{
		{"ModelDeflate", "model", "deflate", "application/json"},
		{"ModelRawDeflate", "model", "raw-deflate", "application/json"},
		{"ModelGzip", "model", "gzip", "application/json"},
		{"ModelDeflateStream", "model", "deflate", "text/event-stream"},
		{"ModelBrotliLabel", "model", "br", "application/json"},
		{"ModelUpperCase", "model", "DEFLATE", "application/json"},
		{"ModelIdentityThenGzip", "model", "identity, gzip", "application/json"},
		{"FetchDeflate", "fetch", "deflate", "text/plain"},
		{"FetchGzip", "fetch", "x-gzip", "text/plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := make(chan string, 1)
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				asked <- r.Header.Get("Accept-Encoding")
				coding := strings.ToLower(tc.coding)
				if coding == "raw-deflate" {
					w.Header().Set("Content-Encoding", "deflate")
				} else {
					w.Header().Set("Content-Encoding", tc.coding)
				}
				if strings.HasSuffix(coding, "gzip") && strings.Contains(coding, ",") {
					coding = "gzip"
				}
				w.Header().Set("Content-Type", tc.contentType)
				echo := fmt.Sprintf(`{"error":"bad key %s"}`+"\n", testKey) // as the key was sent: a model endpoint echoing it
				w.Write(compressed(t, coding, []byte(echo)))
			})
			h := start(t, Config{ModelBaseURL: up.at("model.test"), Egress: grant.MustEgressRules("granted.test"), APIKey: []byte(testKey)})
			var out []byte
			var route string
			if tc.route == "model" {
				out = h.raw(t, "POST /model/chat/completions HTTP/1.1\r\nHost: gateway\r\nAccept-Encoding: deflate, gzip\r\nConnection: close\r\nContent-Length: 13\r\n\r\n{\"model\":\"m\"}")
				route = routeModelChat
			} else {
				out = h.raw(t, fmt.Sprintf("POST /fetch HTTP/1.1\r\nHost: gateway\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
					len(`{"url":"`+up.at("granted.test")+`/"}`), `{"url":"`+up.at("granted.test")+`/"}`))
				route = routeFetch
			}
			if ae := <-asked; ae != "identity" {
				t.Errorf("upstream was asked for Accept-Encoding %q, want identity", ae)
			}
			head, body, _ := bytes.Cut(out, []byte("\r\n\r\n"))
			wantNoKeyDecoded(t, "response", body)
			if tc.route == "fetch" {
				// The fetch reply carries the body in base64: look inside it too.
				if i := bytes.Index(body, []byte(`"body_base64":"`)); i >= 0 {
					enc, _, _ := bytes.Cut(body[i+len(`"body_base64":"`):], []byte(`"`))
					dec, _ := base64.StdEncoding.DecodeString(string(enc))
					wantNoKeyDecoded(t, "fetched body", dec)
				}
			}
			if !bytes.HasPrefix(head, []byte("HTTP/1.1 502")) || bytes.Contains(bytes.ToLower(head), []byte("content-encoding")) {
				t.Fatalf("got response %q, want a 502 without the upstream's coding", out)
			}
			if msg := string(body); !strings.Contains(msg, "content coding") {
				t.Errorf("got body %q, want it to name the refused content coding", msg)
			}
			wantRecord(t, h.audit.lastGateway(t, 1), route, decisionDenied, http.StatusBadGateway, "content coding")
			wantNoKeyInAudit(t, h.audit)
		})
	}
}

// TestGateway_IdentityBodyPasses: an upstream that answers with "Content-Encoding: identity"
// (or an empty list element) is served as usual.
func TestGateway_IdentityBodyPasses(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Encoding"] = []string{"Identity", " , identity"}
		io.WriteString(w, `{"ok":true}`)
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey)})
	if resp, body := h.do(t, http.MethodPost, "/model/chat/completions", nil, `{"model":"m"}`); resp.StatusCode != http.StatusOK || string(body) != `{"ok":true}` {
		t.Errorf("got %d %q, want 200 and the body", resp.StatusCode, body)
	}
}

// keyEncodings are the forms of testKey the redactor knows, as a hostile or careless
// upstream might send them, with the base64 of the key inside a longer blob at each of the
// three byte alignments. (testKey's URL and JSON escapings are the key itself.)
func keyEncodings() map[string]string {
	k := []byte(testKey)
	out := map[string]string{
		"raw":           testKey,
		"base64":        base64.StdEncoding.EncodeToString(k),
		"base64url raw": base64.RawURLEncoding.EncodeToString(k),
		"hex":           hex.EncodeToString(k),
		"hex upper":     strings.ToUpper(hex.EncodeToString(k)),
	}
	for align := range 3 {
		blob := append(append(bytes.Repeat([]byte{0xfe}, align), k...), 0x01, 0x02)
		out[fmt.Sprintf("base64 align %d", align)] = base64.StdEncoding.EncodeToString(blob)
	}
	return out
}

// base64Inside returns the characters of the base64 of blob that hold only bytes of the key,
// which starts align bytes into blob: what must not survive masking.
func base64Inside(align int) string {
	blob := append(bytes.Repeat([]byte{0xfe}, align), []byte(testKey)...)
	enc := base64.RawStdEncoding.EncodeToString(blob)
	return enc[(8*align+5)/6 : 8*(align+len(testKey))/6]
}

// TestGateway_KeyFormsMasked: every encoding of the key the redactor knows is masked in what
// the sandbox receives, in a plain body, an event stream (each form split across two
// upstream writes) and a fetched body.
func TestGateway_KeyFormsMasked(t *testing.T) {
	forms := keyEncodings()
	var plain strings.Builder
	for name, f := range forms {
		fmt.Fprintf(&plain, "%s=%s\n", strings.ReplaceAll(name, " ", "_"), f)
	}
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, plain.String()) })
	stream := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for _, f := range forms {
			io.WriteString(w, "data: "+f[:len(f)/2])
			rc.Flush()
			io.WriteString(w, f[len(f)/2:]+"\n\n")
			rc.Flush()
		}
	})
	h := start(t, Config{ModelBaseURL: up.at("model.test"), Egress: grant.MustEgressRules("granted.test"), APIKey: []byte(testKey)})
	check := func(t *testing.T, what string, b []byte) {
		t.Helper()
		wantNoKey(t, what, b)
		for align := range 3 {
			if in := base64Inside(align); bytes.Contains(b, []byte(in)) {
				t.Errorf("%s holds the key's base64 at alignment %d (%.12s...)", what, align, in)
			}
		}
		if n := bytes.Count(b, []byte("[REDACTED]")); n < len(forms) {
			t.Errorf("%s has %d masks, want one for each of the %d forms:\n%s", what, n, len(forms), b)
		}
	}
	t.Run("Plain", func(t *testing.T) {
		resp, body := h.do(t, http.MethodGet, "/model/models", nil, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d, want 200", resp.StatusCode)
		}
		check(t, "plain body", body)
	})
	t.Run("Fetch", func(t *testing.T) {
		status, reply, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/"))
		body, _ := base64.StdEncoding.DecodeString(reply.BodyBase64)
		if status != http.StatusOK {
			t.Fatalf("got %d %q, want 200", status, msg)
		}
		check(t, "fetched body", body)
	})
	t.Run("EventStream", func(t *testing.T) {
		hs := start(t, Config{ModelBaseURL: stream.at("model.test"), APIKey: []byte(testKey)})
		resp, body := hs.do(t, http.MethodGet, "/model/models", nil, "")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("got %d, want 200", resp.StatusCode)
		}
		check(t, "event stream", body)
	})
}

// TestGateway_KeyNotCutInHalf: where the gateway shortens what an upstream sent (a header
// value over its cap, a fetched body over MaxBody), it masks first and cuts after, so the cut
// never leaves the first part of the key unmasked.
func TestGateway_KeyNotCutInHalf(t *testing.T) {
	prefix := testKey[:12]
	t.Run("Header", func(t *testing.T) {
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", strings.Repeat("a", maxHeaderValue-20)+testKey)
			io.WriteString(w, "{}")
		})
		h := start(t, Config{ModelBaseURL: up.at("model.test"), APIKey: []byte(testKey)})
		resp, _ := h.do(t, http.MethodGet, "/model/models", nil, "")
		if v := resp.Header.Get("X-Request-Id"); strings.Contains(v, prefix) {
			t.Errorf("got X-Request-Id ending %q, want no part of the key", v[len(v)-40:])
		}
	})
	t.Run("FetchTruncated", func(t *testing.T) {
		const limit = 300
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, strings.Repeat("x", limit-20)+testKey+" and more")
		})
		h := start(t, Config{Egress: grant.MustEgressRules("granted.test"), APIKey: []byte(testKey), MaxBody: limit})
		status, reply, msg := h.fetch(t, fmt.Sprintf(`{"url":%q}`, up.at("granted.test")+"/"))
		body, _ := base64.StdEncoding.DecodeString(reply.BodyBase64)
		if status != http.StatusOK || !reply.Truncated {
			t.Fatalf("got %d %q truncated=%v, want 200 truncated", status, msg, reply.Truncated)
		}
		if bytes.Contains(body, []byte(prefix)) || len(body) > limit {
			t.Errorf("got truncated body ending %q (%d bytes), want at most %d bytes and no part of the key", body[max(0, len(body)-40):], len(body), limit)
		}
		// What is dropped is less than the longest form of the key (its 66 hex digits).
		if !bytes.HasPrefix(body, []byte(strings.Repeat("x", limit-20-2*len(testKey)))) {
			t.Errorf("got truncated body of %d bytes, want the bytes before the key kept", len(body))
		}
	})
}
