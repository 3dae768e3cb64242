package builtin

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

const (
	// Audit reasons of http_fetch refusals.
	ReasonHostNotGranted = "host not granted"
	ReasonSchemeRefused  = "scheme not allowed"
	ReasonUserinfo       = "userinfo in url"
	ReasonNoHost         = "url has no host"
	// maxFetchBody caps the response body returned to the model.
	maxFetchBody = 1 << 20
)

func httpFetchTool(fetch FetchFunc) toolreg.Tool {
	return toolreg.Tool{
		Name: "http_fetch",
		Description: "Fetch an http or https URL with GET (default) or HEAD and return the status, content type and body " +
			"(at most 1 MiB). Only hosts granted to you can be reached; credentials in the URL are refused.",
		Schema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"url":    {"type": "string", "minLength": 1, "maxLength": 8192, "description": "Absolute http or https URL."},
				"method": {"type": "string", "enum": ["GET", "HEAD"], "description": "GET (default) or HEAD."}
			},
			"required": ["url"],
			"additionalProperties": false
		}`),
		ReadOnly: true,
		Handler: func(ctx context.Context, c toolreg.Call) (toolreg.Result, error) {
			var a struct {
				URL    string `json:"url"`
				Method string `json:"method"`
			}
			if err := decodeArgs(c.Args, &a); err != nil {
				return toolreg.Result{}, err
			}
			return httpFetch(ctx, fetch, c.Grants.Egress, c.Learn, a.URL, a.Method)
		},
	}
}

// checkURL parses rawURL and checks it, with method, against the egress grant: the host and
// port (80 or 443 by scheme when the URL names none), and the method and path where a rule
// restricts them. It returns the URL to request, re-serialised, so the gateway parses what
// was checked. In a learn view (learn) the host, method and path are left to the gateway,
// which records a host of egress.learn_hosts as net.would_deny and refuses every other one
// the grant does not hold (docs/learn.md): the sandbox's own check is not the boundary.
func checkURL(egress []grant.EgressRule, learn bool, rawURL, method string) (string, error) {
	const tool = "http_fetch"
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", errors.New(tool + ": malformed url")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonSchemeRefused, Hint: "only http and https URLs can be fetched"}
	}
	if u.User != nil {
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonUserinfo,
			Hint: "credentials in URLs are refused; the gateway adds any credentials a host needs"}
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonNoHost, Hint: "give an absolute URL such as https://host/path"}
	}
	port := uint16(443)
	if strings.EqualFold(u.Scheme, "http") {
		port = 80
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return "", errors.New(tool + ": malformed url: bad port")
		}
		port = uint16(n)
	}
	if learn {
		return u.String(), nil
	}
	if !grant.HostGranted(egress, u.Hostname(), port) {
		hint := "no hosts are granted"
		if len(egress) > 0 {
			hint = "the granted hosts are " + quoteCapped(ruleStrings(egress))
		}
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonHostNotGranted, Hint: hint}
	}
	path := cmp.Or(u.Path, "/")
	if !grant.RequestAllowed(egress, u.Hostname(), port, method, path) {
		return "", &toolreg.DeniedError{Tool: tool, Reason: ReasonHostNotGranted,
			Hint: "the grant does not allow " + method + " on this path of the host; its rules are " + quoteCapped(ruleStrings(egress))}
	}
	return u.String(), nil
}

func ruleStrings(rules []grant.EgressRule) []string {
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = r.String()
	}
	return out
}

func httpFetch(ctx context.Context, fetch FetchFunc, egress []grant.EgressRule, learn bool, rawURL, method string) (toolreg.Result, error) {
	const tool = "http_fetch"
	method = cmp.Or(method, "GET")
	if method != "GET" && method != "HEAD" {
		return toolreg.Result{}, errors.New(tool + ": method must be GET or HEAD")
	}
	target, err := checkURL(egress, learn, rawURL, method)
	if err != nil {
		return toolreg.Result{}, err
	}
	if fetch == nil {
		return toolreg.Result{}, errors.New(tool + ": no fetcher is configured in this sandbox")
	}
	status, ctype, body, err := fetch(ctx, target, method)
	if err != nil {
		// A refusal further on (the gateway's egress dialer) is a denial like the tool's own.
		var de *toolreg.DeniedError
		if errors.As(err, &de) {
			return toolreg.Result{}, de
		}
		// A *url.Error repeats the URL; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return toolreg.Result{}, errors.New(tool + ": request failed: " + err.Error())
	}
	var b strings.Builder
	b.WriteString("status: " + strconv.Itoa(status) + "\ncontent-type: " + strings.ToValidUTF8(ctype, "") + "\n\n")
	shown := body
	shown = shown[:min(len(shown), maxFetchBody)]
	if isBinary(shown) {
		b.WriteString("[binary body: " + itoa(len(body)) + " bytes; not shown]")
	} else {
		b.Write(shown)
		if len(body) > len(shown) {
			b.WriteString("\n[body truncated: " + itoa(len(shown)) + " of " + itoa(len(body)) + " bytes shown]")
		}
	}
	return toolreg.Result{Content: b.String()}, nil
}
