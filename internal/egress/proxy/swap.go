package proxy

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"strings"

	"github.com/agora-dev/agora/internal/secret/redact"
)

// containsPlaceholder reports whether ph appears, in any case, in the request's target or
// any header's name or value (basic credentials decoded too).
func containsPlaceholder(req *http.Request, ph string) bool {
	if ph == "" {
		return false
	}
	ph = strings.ToLower(ph)
	has := func(s string) bool { return strings.Contains(strings.ToLower(s), ph) }
	if has(req.RequestURI) || has(req.URL.String()) {
		return true
	}
	for k, vs := range req.Header {
		if has(k) {
			return true
		}
		for _, v := range vs {
			if has(v) {
				return true
			}
			if u, pw, ok := basicCredentials(v); ok && (has(u) || has(pw)) {
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
// never passes through a string the proxy logs.
func (s *session) swap(req *http.Request) {
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
// The status line's text is masked too; a header whose name holds a value (in any case: names
// are canonicalized) is dropped; trailers are dropped, as they arrive after the head is sent.
func maskResponse(resp *http.Response, r *redact.Redactor, values [][]byte) {
	resp.Status = r.String(resp.Status)
	for k, vs := range resp.Header {
		if nameHolds(k, values) {
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
