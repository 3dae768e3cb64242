package gateway

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// passHeaders are the upstream response headers the sandbox sees (values redacted); every
// other header, Set-Cookie, authentication challenges and Content-Length (redaction may
// change the length) included, is dropped.
var passHeaders = []string{"Cache-Control", "Content-Type", "Retry-After", "X-Request-Id"}

// rateLimitPrefix admits the model endpoint's rate-limit headers, which clients back off on.
const rateLimitPrefix = "X-Ratelimit-"

// maxHeaderValue caps each passed header value.
const maxHeaderValue = 1024

// forwardHeaders are the only request headers taken from the sandbox. Accept-Encoding is not
// among them on purpose: net/http then asks for gzip itself and decompresses, so the
// redactor sees plain bytes.
var forwardHeaders = []string{"Content-Type", "Accept"}

// serveModel forwards a model request to ModelBaseURL/upstream with the gateway's key.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, ex *exchange, method, upstream string) {
	if g.model == nil {
		g.refuse(w, ex, http.StatusNotFound, "no model endpoint is configured for this dispatch")
		return
	}
	target := *g.model
	target.Path += "/" + upstream
	ex.host, ex.path = target.Hostname(), target.Path
	if r.Method != method {
		g.methodNotAllowed(w, ex, method)
		return
	}
	var body io.Reader = http.NoBody
	if method == http.MethodPost {
		b, ok := g.readBody(w, r, ex, maxRequestBody)
		if !ok {
			return
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, target.String(), body)
	if err != nil {
		g.fail(w, ex, http.StatusInternalServerError, decisionError, "build model request: "+describe(err))
		return
	}
	for _, h := range forwardHeaders {
		if vs := r.Header.Values(h); len(vs) > 0 {
			req.Header[h] = slices.Clone(vs)
		}
	}
	if len(g.key) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(g.key))
	}
	resp, err := g.modelClient.Do(req)
	if err != nil {
		status, decision, msg := classify(err)
		g.fail(w, ex, status, decision, msg)
		return
	}
	defer resp.Body.Close()
	copyHeaders(w.Header(), resp.Header, g.red.String)
	w.WriteHeader(resp.StatusCode)
	ex.decision = decisionAllowed
	if resp.StatusCode >= 300 {
		ex.reason = "model endpoint answered " + strconv.Itoa(resp.StatusCode)
	}
	if err := g.copyModelBody(w, resp); err != nil {
		// The status line is out; cutting the connection is the only way left to tell the
		// client the body is incomplete.
		ex.decision, ex.reason = decisionError, g.red.String(err.Error())
		panic(http.ErrAbortHandler)
	}
}

// copyHeaders copies the allowed headers of src to dst, each value passed through red.
func copyHeaders(dst, src http.Header, red func(string) string) {
	for name, vs := range src {
		if !slices.Contains(passHeaders, name) && !strings.HasPrefix(name, rateLimitPrefix) {
			continue
		}
		for _, v := range vs {
			dst.Add(name, red(clip(v, maxHeaderValue)))
		}
	}
}
