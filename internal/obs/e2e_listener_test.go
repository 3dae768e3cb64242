package obs_test

import (
	"net/http"
	"net/url"
	"testing"
)

// TestServe_MetricsRefusesForeignHostAndOrigin asks the real binary's token-less --metrics
// listener for each of its paths as a DNS-rebinding page would (a Host naming another
// site, a cross-site Origin or Sec-Fetch-Site): each is refused with 403 and reads nothing,
// while the same request addressed to the listener is answered (a listener that answers
// any Host and Origin gives its series to a rebound name).
func TestServe_MetricsRefusesForeignHostAndOrigin(t *testing.T) {
	h := newHome(t)
	s := h.serve()
	u, err := url.Parse(s.metrics)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
		for _, tc := range []struct {
			name, host, origin, fetch string
			want                      int
		}{
			{name: "addressed to it", want: http.StatusOK},
			{name: "by localhost", host: "localhost:" + port, want: http.StatusOK},
			{name: "same origin", origin: s.metrics, want: http.StatusOK},
			{name: "rebound host", host: "rebound.example:" + port, want: http.StatusForbidden},
			{name: "rebound host, no port", host: "rebound.example", want: http.StatusForbidden},
			{name: "cross-site origin", origin: "http://evil.example", want: http.StatusForbidden},
			{name: "null origin", origin: "null", want: http.StatusForbidden},
			{name: "cross-site fetch", fetch: "cross-site", want: http.StatusForbidden},
		} {
			req, _ := http.NewRequest("GET", s.metrics+path, nil)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.fetch != "" {
				req.Header.Set("Sec-Fetch-Site", tc.fetch)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s %s: status %d, want %d", path, tc.name, resp.StatusCode, tc.want)
			}
		}
	}
}
