package modelgw

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agora-dev/agora/internal/secret/redact"
)

const (
	// maxFetchRequest caps a /fetch request body.
	maxFetchRequest = 16 << 10
	// maxURLLen caps the URL a /fetch request names.
	maxURLLen = 8 << 10
	// maxContentType caps the content type passed back.
	maxContentType = 256
	fetchUserAgent = "agora-gateway"
)

// fetchRequest is the body of POST /fetch.
type fetchRequest struct {
	URL    string `json:"url"`
	Method string `json:"method"`
}

// fetchReply is the body of a 200 answer to POST /fetch.
type fetchReply struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	BodyBase64  string `json:"body_base64"`
	// Truncated says the body was cut at [Config.MaxBody] bytes (a few bytes less when the
	// cut could fall inside the key, see maskTruncated).
	Truncated bool `json:"truncated"`
}

// badRequest is a malformed request: answered 400.
type badRequest struct{ msg string }

func (b *badRequest) Error() string { return b.msg }

// decodeFetch turns a /fetch body into the request the gateway will send, or refuses it: a
// *badRequest when the body is malformed, a *refusal or an egress denial when the URL is
// not http or https, has userinfo, or names a host that is not granted. The checks run on
// the parsed URL of the returned request, the one net/http will dial, and the request
// carries no header from the sandbox. host and path name the target for the audit record
// whenever the URL parsed, refused or not.
func (g *Gateway) decodeFetch(ctx context.Context, body []byte) (req *http.Request, host, path string, err error) {
	var fr fetchRequest
	if err := decodeFlat(body, []string{"url", "method"}, &fr); err != nil {
		return nil, host, path, &badRequest{msg: "fetch request: " + err.Error()}
	}
	switch {
	case fr.Method == "":
		fr.Method = http.MethodGet
	case fr.Method != http.MethodGet && fr.Method != http.MethodHead:
		return nil, host, path, &refusal{msg: fmt.Sprintf("method %s is not allowed (want GET or HEAD)", quoted(fr.Method, 16))}
	}
	switch {
	case fr.URL == "":
		return nil, host, path, &badRequest{msg: "fetch request: no url"}
	case len(fr.URL) > maxURLLen:
		return nil, host, path, &badRequest{msg: fmt.Sprintf("fetch request: url over %d bytes", maxURLLen)}
	}
	req, err = http.NewRequestWithContext(ctx, fr.Method, fr.URL, http.NoBody)
	if err != nil {
		return nil, host, path, &badRequest{msg: "fetch request: url does not parse"}
	}
	u := req.URL
	host, path = u.Hostname(), u.EscapedPath()
	if err := g.vetTarget(ctx, u, fr.Method); err != nil {
		return nil, host, path, err
	}
	u.Fragment, u.RawFragment = "", ""
	req.Header.Set("User-Agent", fetchUserAgent)
	// Plain bodies only (see checkCoding); net/http keeps the header on every redirect hop.
	req.Header.Set("Accept-Encoding", "identity")
	return req, host, path, nil
}

// vetTarget refuses a fetch or redirect target unless it is http or https, has no userinfo,
// names a granted host and passes the dialer's URL check.
func (g *Gateway) vetTarget(ctx context.Context, u *url.URL, method string) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		// url.Parse lowercases the scheme, and a lowercased secret is no form the redactor
		// knows: only a scheme too short to be a secret is repeated.
		return &refusal{msg: fmt.Sprintf("URL scheme %s is not http or https", quoted(u.Scheme, redact.MinLen-1))}
	case u.User != nil:
		return &refusal{msg: "URL has userinfo (credentials are not forwarded)"}
	case u.Opaque != "":
		return &refusal{msg: "URL is opaque"}
	}
	if err := g.grants.check(u, method); err != nil {
		// A learn dispatch's host in egress.learn_hosts: recorded, then fetched (fetchlearn.go).
		_, host, port, terr := fetchTarget(u)
		if terr != nil {
			return err
		}
		if ok, lerr := g.learnFetch(ctx, u, host, port, method, err); !ok {
			return lerr
		}
	}
	return g.dialer.CheckURL(u)
}

// serveFetch fetches a granted URL and answers with a fetchReply.
func (g *Gateway) serveFetch(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if r.Method != http.MethodPost {
		g.methodNotAllowed(w, ex, http.MethodPost)
		return
	}
	body, ok := g.readBody(w, r, ex, maxFetchRequest)
	if !ok {
		return
	}
	req, host, path, err := g.decodeFetch(r.Context(), body)
	ex.host, ex.path = host, path
	if err != nil {
		var br *badRequest
		if errors.As(err, &br) {
			g.refuse(w, ex, http.StatusBadRequest, br.msg)
			return
		}
		status, decision, msg := classify(err)
		g.fail(w, ex, status, decision, msg)
		return
	}
	resp, err := g.fetchClient.Do(req)
	if err != nil {
		status, decision, msg := classify(err)
		g.fail(w, ex, status, decision, msg)
		return
	}
	defer resp.Body.Close()
	if req.Method != http.MethodHead { // a HEAD answer has no body to be encoded
		if err := checkCoding(resp.Header); err != nil {
			g.refuse(w, ex, http.StatusBadGateway, err.Error())
			return
		}
	}
	data, truncated, err := readCapped(resp.Body, g.maxBody)
	if err != nil {
		status, decision, msg := classify(err)
		g.fail(w, ex, status, decision, "read fetched body: "+msg)
		return
	}
	ex.decision = decisionAllowed
	var masked []byte
	if truncated {
		ex.reason = fmt.Sprintf("body truncated at %d bytes", g.maxBody)
		masked = g.maskTruncated(data)
	} else {
		masked = g.red.Bytes(data)
	}
	writeJSON(w, http.StatusOK, fetchReply{
		Status:      resp.StatusCode,
		ContentType: g.mask(resp.Header.Get("Content-Type"), maxContentType),
		BodyBase64:  base64.StdEncoding.EncodeToString(masked),
		Truncated:   truncated,
	})
}
