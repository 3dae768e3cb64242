package s3_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/s3"
)

// TestClient_HostileServer: what a hostile or compromised endpoint answers cannot move agora
// outside its prefix or into its reports. A listing naming keys outside the prefix is refused;
// an error message with control characters, an echoed access key id or a huge body is cleaned,
// scrubbed and cut; a redirect is refused, never followed (TestRedTeam31_RedirectToAnotherHost:
// not even to a host the egress policy allows), and the error names where it pointed.
func TestClient_HostileServer(t *testing.T) {
	creds := s3.Credentials{AccessKeyID: "AKIDHOSTILETEST", SecretAccessKey: "hostile-secret-value"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("list-type") == "2":
			w.Write([]byte(`<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>agora/anchors/agora/1</Key></Contents><Contents><Key>other/../../secrets</Key></Contents></ListBucketResult>`))
		case strings.HasSuffix(r.URL.Path, "/redirect"):
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
		default:
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte("<Error><Code>Bad\x1b[31m</Code><Message>key AKIDHOSTILETEST said\nFORGED ROW\tpass " + strings.Repeat("x", 5000) + "</Message></Error>"))
		}
	}))
	defer srv.Close()
	c, err := s3.New(s3.Config{Endpoint: srv.URL, Bucket: "bkt", Prefix: "agora/"}, creds, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if _, err := c.List(t.Context(), "anchors/agora/"); err == nil || !strings.Contains(err.Error(), "outside the prefix") {
		t.Errorf("a listing with a key outside the prefix: %v", err)
	}
	_, _, err = c.Get(t.Context(), "x", "", 100)
	if err == nil {
		t.Fatal("an error reply was accepted")
	}
	msg := err.Error()
	if strings.Contains(msg, "AKIDHOSTILETEST") || strings.Contains(msg, "hostile-secret") || strings.ContainsAny(msg, "\n\t\x1b") || len(msg) > 1000 {
		t.Errorf("the server's error reached agora's report unclean: %q", msg)
	}
	if _, _, err := c.Get(t.Context(), "redirect", "", 100); err == nil || !strings.Contains(err.Error(), "169.254.169.254") {
		t.Errorf("a redirect to the metadata address: %v, want egress's refusal", err)
	}
}
