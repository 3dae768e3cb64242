package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// placeholderFinder finds one placeholder in request text: raw in any case, and in every
// encoding the redactor knows (base64 at any alignment, hex, URL and JSON escaping), also
// after up to three rounds of percent-decoding.
type placeholderFinder struct {
	lower string
	enc   *redact.Redactor
}

func newPlaceholderFinder(ph string) *placeholderFinder {
	return &placeholderFinder{lower: strings.ToLower(ph), enc: redact.New([][]byte{[]byte(ph)})}
}

// in reports whether s holds the placeholder.
func (f *placeholderFinder) in(s string) bool {
	for range 4 {
		if strings.Contains(strings.ToLower(s), f.lower) || f.enc.String(s) != s {
			return true
		}
		d, changed := percentDecode(s)
		if !changed {
			return false
		}
		s = d
	}
	return false
}

// percentDecode decodes every valid %XX (and "+" as a space) in s, leaving the rest.
func percentDecode(s string) (string, bool) {
	if !strings.ContainsAny(s, "%+") {
		return s, false
	}
	b := make([]byte, 0, len(s))
	changed := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '+' {
			b, changed = append(b, ' '), true
			continue
		}
		if c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v, _ := hex.DecodeString(s[i+1 : i+3])
			b, changed = append(b, v[0]), true
			i += 2
			continue
		}
		b = append(b, c)
	}
	return string(b), changed
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// containsPlaceholder reports whether f's placeholder appears, raw or encoded, in the
// request's target or any header's name or value (basic credentials decoded too).
func containsPlaceholder(req *http.Request, f *placeholderFinder) bool {
	if f.in(req.RequestURI) || f.in(req.URL.String()) {
		return true
	}
	for k, vs := range req.Header {
		if f.in(k) {
			return true
		}
		for _, v := range vs {
			if f.in(v) {
				return true
			}
			if u, pw, ok := basicCredentials(v); ok && (f.in(u) || f.in(pw)) {
				return true
			}
		}
	}
	return false
}

// basicCredentials decodes an Authorization value of the Basic scheme.
func basicCredentials(v string) (user, pass string, ok bool) {
	scheme, cred, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// swap replaces each bound secret's placeholder with its value in the Authorization header
// (any scheme; inside Basic credentials too) and in the binding's named headers. The value
// never passes through a string the proxy logs, and never into a plain-HTTP request.
func (s *session) swap(req *http.Request) {
	if !s.tls {
		return
	}
	for _, b := range s.bound {
		used := false
		if vs := req.Header.Values("Authorization"); len(vs) > 0 {
			out := make([]string, len(vs))
			for i, v := range vs {
				nv := swapAuthorization(v, b)
				used = used || nv != v
				out[i] = nv
			}
			req.Header["Authorization"] = out
		}
		for _, name := range b.Headers {
			vs := req.Header.Values(name)
			if len(vs) == 0 {
				continue
			}
			out := make([]string, len(vs))
			for i, v := range vs {
				out[i] = strings.ReplaceAll(v, b.Placeholder, string(b.Value))
				used = used || out[i] != v
			}
			req.Header[http.CanonicalHeaderKey(name)] = out
		}
		if used {
			s.keys[b.Key] = true
		}
	}
}

func swapAuthorization(v string, b Binding) string {
	if u, pw, ok := basicCredentials(v); ok && (strings.Contains(u, b.Placeholder) || strings.Contains(pw, b.Placeholder)) {
		u = strings.ReplaceAll(u, b.Placeholder, string(b.Value))
		pw = strings.ReplaceAll(pw, b.Placeholder, string(b.Value))
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+pw))
	}
	return strings.ReplaceAll(v, b.Placeholder, string(b.Value))
}

// maskResponse masks the bound values in the response's headers and body. The body's length
// may change, so it goes chunked.
//
// The status line's text is masked too; a header whose name holds a value or a piece of one
// (in any case: names are canonicalized) is dropped; trailers are dropped, as they arrive
// after the head is sent.
func maskResponse(resp *http.Response, r *redact.Redactor, values [][]byte) {
	resp.Status = r.String(resp.Status)
	for k, vs := range resp.Header {
		if low := strings.ToLower(k); nameHolds(k, values) || r.String(low) != low {
			delete(resp.Header, k)
			continue
		}
		for i, v := range vs {
			vs[i] = r.String(v)
		}
		resp.Header[k] = vs
	}
	resp.Header.Del("Trailer")
	resp.Trailer = nil
	if resp.Body == nil || resp.Body == http.NoBody || resp.ContentLength == 0 {
		return
	}
	resp.Header.Del("Content-Length")
	resp.ContentLength = -1
	resp.TransferEncoding = []string{"chunked"}
	resp.Body = &maskedBody{src: resp.Body, w: nil, r: r}
}

// nameHolds reports whether a header name holds one of values, case-insensitively.
func nameHolds(name string, values [][]byte) bool {
	for _, v := range values {
		if len(v) >= redact.MinLen && bytes.Contains(bytes.ToLower([]byte(name)), bytes.ToLower(v)) {
			return true
		}
	}
	return false
}

// maskedBody reads its source through a streaming redactor.
type maskedBody struct {
	src io.ReadCloser
	r   *redact.Redactor
	w   io.WriteCloser
	buf bytes.Buffer
	eof bool
	tmp []byte
}

func (m *maskedBody) Read(p []byte) (int, error) {
	if m.w == nil {
		m.w = m.r.Writer(&m.buf)
		m.tmp = make([]byte, 32<<10)
	}
	for m.buf.Len() == 0 {
		if m.eof {
			return 0, io.EOF
		}
		n, err := m.src.Read(m.tmp)
		if n > 0 {
			m.w.Write(m.tmp[:n])
		}
		if err == io.EOF {
			m.w.Close()
			m.eof = true
		} else if err != nil {
			return 0, err
		}
	}
	return m.buf.Read(p)
}

func (m *maskedBody) Close() error { return m.src.Close() }
