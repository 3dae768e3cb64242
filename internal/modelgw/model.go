package modelgw

import (
	"bytes"

	"github.com/agora-dev/agora/internal/budget"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// passHeaders are the upstream response headers the sandbox sees (values redacted); every
// other header, Set-Cookie, authentication challenges and Content-Length (redaction may
// change the length) included, is dropped.
var passHeaders = []string{"Cache-Control", "Content-Type", "Retry-After", "X-Request-Id", "Request-Id"}

// rateLimitPrefixes admit the model endpoint's rate-limit headers, which clients back off on.
var rateLimitPrefixes = []string{"X-Ratelimit-", "Anthropic-Ratelimit-"}

// maxHeaderValue caps each passed header value.
const maxHeaderValue = 1024

// forwardHeaders are the only request headers taken from the sandbox. Accept-Encoding is not
// among them: the gateway asks for identity itself (see checkCoding).
var forwardHeaders = []string{"Content-Type", "Accept"}

// anthropicHeaders are also taken from the sandbox on the Anthropic routes: the API version
// and the beta features the client speaks. Their values are checked by checkHeaderToken.
var anthropicHeaders = []string{"Anthropic-Version", "Anthropic-Beta"}

// maxForwardedValue caps an anthropic-* header value taken from the sandbox.
const maxForwardedValue = 512

// serveModel forwards a model request of api to ModelBaseURL/upstream with the gateway's key.
// shape is the wire format of a model call's response, whose usage is counted against the
// dispatch's budget; 0 marks a route that is no model call (the model list, token counts).
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, ex *exchange, api, method, upstream string, shape budget.Shape) {
	if g.model == nil {
		g.refuse(w, ex, http.StatusNotFound, "no model endpoint is configured for this dispatch")
		return
	}
	if api != g.api {
		g.refuse(w, ex, http.StatusNotFound, "this dispatch's model endpoint speaks the "+g.api+" API, not "+api)
		return
	}
	target := *g.model
	target.Path += "/" + upstream
	ex.host, ex.path = target.Hostname(), target.Path
	if r.Method != method {
		g.methodNotAllowed(w, ex, method)
		return
	}
	if shape != 0 {
		// Before the body is read: the check costs the same whatever the request. The call
		// is taken just before it is sent (a request refused on the way costs none).
		if spent := g.meter.Spent(); spent != "" {
			g.refuseBudget(w, ex, api, spent)
			return
		}
	}
	var body io.Reader = http.NoBody
	var model string
	if method == http.MethodPost {
		b, ok := g.readBody(w, r, ex, maxRequestBody)
		if !ok {
			return
		}
		// Every POST model route's body names its model: read exactly, pinned, priced.
		mr, err := decodeModelRequest(b, upstream == "responses")
		if err != nil {
			g.refuse(w, ex, http.StatusBadRequest, "model request: "+err.Error())
			return
		}
		if !g.checkModel(w, ex, api, *mr.Model, shape != 0) || !g.checkReach(w, ex, api, mr, r.Header, shape != 0) {
			return
		}
		model = *mr.Model
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
	if api == APIAnthropic {
		for _, h := range anthropicHeaders {
			vs := r.Header.Values(h)
			for _, v := range vs {
				if !checkHeaderToken(v) {
					g.refuse(w, ex, http.StatusBadRequest, "header "+h+" is not a short list of visible ASCII tokens")
					return
				}
			}
			if len(vs) > 0 {
				req.Header[h] = slices.Clone(vs)
			}
		}
	}
	// An explicit Accept-Encoding also stops net/http asking for gzip and decoding it
	// unseen; a body in any coding is refused below.
	req.Header.Set("Accept-Encoding", "identity")
	if len(g.key) > 0 {
		switch api {
		case APIAnthropic:
			req.Header.Set("X-Api-Key", string(g.key))
		default:
			req.Header.Set("Authorization", "Bearer "+string(g.key))
		}
	}
	if shape != 0 {
		// Taken atomically with a second check, so concurrent requests cannot pass the
		// call limit together (see budget.Meter.Reserve).
		if spent := g.meter.Reserve(); spent != "" {
			g.refuseBudget(w, ex, api, spent)
			return
		}
	}
	resp, err := g.modelClient.Do(req)
	if err != nil {
		status, decision, msg := classify(err)
		g.fail(w, ex, status, decision, msg)
		return
	}
	defer resp.Body.Close()
	if err := checkCoding(resp.Header); err != nil {
		g.refuse(w, ex, http.StatusBadGateway, err.Error())
		return
	}
	copyHeaders(w.Header(), resp.Header, func(v string) string { return g.mask(v, maxHeaderValue) })
	w.WriteHeader(resp.StatusCode)
	ex.decision = decisionAllowed
	if resp.StatusCode >= 300 {
		ex.reason = "model endpoint answered " + strconv.Itoa(resp.StatusCode)
	}
	var count *budget.Response
	if shape != 0 && resp.StatusCode >= 200 && resp.StatusCode < 300 {
		count = budget.NewResponse(shape, isEventStream(resp.Header.Get("Content-Type")))
		// Counted even when the copy fails: what the model sent was spent.
		defer g.countUsage(ex, count, model)
	}
	if err := g.copyModelBody(w, resp, count); err != nil {
		// The status line is out; cutting the connection is the only way left to tell the
		// client the body is incomplete.
		ex.decision, ex.reason = decisionError, g.red.String(err.Error())
		panic(http.ErrAbortHandler)
	}
}

// copyHeaders copies the allowed headers of src to dst, each value passed through mask
// (which redacts, then caps the length).
func copyHeaders(dst, src http.Header, mask func(string) string) {
	for name, vs := range src {
		if !slices.Contains(passHeaders, name) && !slices.ContainsFunc(rateLimitPrefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		for _, v := range vs {
			dst.Add(name, mask(v))
		}
	}
}

// checkHeaderToken accepts a header value of at most maxForwardedValue bytes of visible ASCII,
// spaces and commas ("2023-06-01", "beta-a,beta-b"): nothing that could carry a credential
// in another syntax or break the request line.
func checkHeaderToken(v string) bool {
	if v == "" || len(v) > maxForwardedValue {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == ',' || c == ' '
		if !ok {
			return false
		}
	}
	return true
}
