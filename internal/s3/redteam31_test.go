package s3_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agora-dev/agora/internal/agoratest/s3test"
	"github.com/agora-dev/agora/internal/s3"
)

// TestRedTeam31_RedirectToAnotherHost: an S3 endpoint that answers 307 to
// another host the egress policy allows. Go's client re-sends a 307's body and every header
// but Authorization to the new host: the blob (a patch, a transcript), the session token
// (X-Amz-Security-Token) and the signed date would reach a host agora was never configured to
// talk to. S3 clients do not follow redirects (the AWS SDK reports PermanentRedirect and the
// like); agora's must not either, and must say where it was sent.
func TestRedTeam31_RedirectToAnotherHost(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, r.Method+" "+r.Header.Get("X-Amz-Security-Token")+" "+string(body))
		mu.Unlock()
	}))
	defer other.Close()
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer hostile.Close()
	creds := s3.Credentials{AccessKeyID: "AKIDREDIRECT", SecretAccessKey: "redirect-secret", SessionToken: "SESSION-TOKEN-redteam31"}
	c, err := s3.New(s3.Config{Endpoint: hostile.URL, Bucket: "bkt", Prefix: "agora/"}, creds, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, putErr := c.Put(t.Context(), "blobs/sha256/ab/abcd", []byte("a patch with a secret in it"), false, nil)
	_, _, getErr := c.Get(t.Context(), "blobs/sha256/ab/abcd", "", 100)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > 0 {
		t.Errorf("the redirect was followed; the other host received %q", seen)
	}
	for _, err := range []error{putErr, getErr} {
		if err == nil || !strings.Contains(err.Error(), "redirect") || strings.Contains(err.Error(), "SESSION-TOKEN") {
			t.Errorf("a redirected request: %v, want an error saying the server redirected", err)
		}
	}
}

// TestRedTeam31_SessionTokenEchoed: a server that echoes the request's session
// token (X-Amz-Security-Token: a credential, like the keys) in its error message must not put
// it into agora's error, which reaches logs, doctor rows and verify reports, whole or cut. The
// access key id and secret are scrubbed; the session token is a credential too.
func TestRedTeam31_SessionTokenEchoed(t *testing.T) {
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte("<Error><Code>InvalidToken</Code><Message>The provided token is malformed: " + r.Header.Get("X-Amz-Security-Token") + "</Message></Error>"))
	}))
	defer hostile.Close()
	// As long as STS's: the server's message is cut at 200 characters, mid-token.
	session := "FwoGZXIvYXdzE" + strings.Repeat("redteam31+/", 80)
	creds := s3.Credentials{AccessKeyID: "AKIDECHO", SecretAccessKey: "echo-secret", SessionToken: session}
	c, err := s3.New(s3.Config{Endpoint: hostile.URL, Bucket: "bkt", Prefix: "agora/"}, creds, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	_, _, err = c.Get(t.Context(), "x", "", 100)
	if err == nil {
		t.Fatal("an error reply was accepted")
	}
	if strings.Contains(err.Error(), session[:24]) || !strings.Contains(err.Error(), "InvalidToken: The provided token is malformed: [session-token]") {
		t.Errorf("the session token reached agora's error: %q", err)
	}
}

// TestRedTeam31_EndlessListing: a server that answers every list page as
// truncated with a fresh continuation token would keep agora's anchoring (which lists the
// log's anchors before each write) looping and growing forever: no request is slow, so no
// timeout ends it. List gives up after a bounded number of pages, saying so.
func TestRedTeam31_EndlessListing(t *testing.T) {
	var pages atomic.Int64
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		fmt.Fprintf(w, `<ListBucketResult><IsTruncated>true</IsTruncated><NextContinuationToken>t%d</NextContinuationToken><Contents><Key>agora/anchors/agora/%020d</Key></Contents></ListBucketResult>`, n, n)
	}))
	defer hostile.Close()
	c, err := s3.New(s3.Config{Endpoint: hostile.URL, Bucket: "bkt", Prefix: "agora/"}, s3.Credentials{AccessKeyID: "AKIDLIST", SecretAccessKey: "list-secret"}, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = c.List(ctx, "anchors/agora/")
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "more than 1000 pages") || pages.Load() != 1000 {
		t.Errorf("an endless listing: %v after %d pages (context: %v), want List to stop by itself", err, pages.Load(), ctx.Err())
	}
}

// TestRedTeam31_NamesOutsideTheCharset: names an anchor's evidence or a blob
// digest could smuggle past the prefix: percent-encoded separators, Unicode look-alikes of '.'
// and '/', NUL, backslash, an over-long name. Each call refuses the name before any request.
func TestRedTeam31_NamesOutsideTheCharset(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	c, err := s3.New(s3.Config{Endpoint: srv.URL, Bucket: "bkt", Prefix: "agora/"}, s3.Credentials{AccessKeyID: "AKIDNAMES", SecretAccessKey: "names-secret"}, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	for _, name := range []string{"a%2F..%2F..%2Fx", "%2e%2e/x", "\u2024\u2024/x", "a\uff0f..\uff0fx", "a\u2215b", "a\x00b", "a\\..\\x",
		"anchors/agora/\u0030\u0301", "a/b/", ".", "..", strings.Repeat("a", 513), "a\nb", "a\u202eb"} {
		if _, _, err := c.Get(t.Context(), name, "", 10); err == nil || !strings.Contains(err.Error(), "object name") {
			t.Errorf("get %+q: %v", name, err)
		}
		if _, err := c.Versions(t.Context(), name); err == nil || !strings.Contains(err.Error(), "object name") {
			t.Errorf("versions %+q: %v", name, err)
		}
		if err := c.Delete(t.Context(), name, ""); err == nil {
			t.Errorf("delete %+q accepted", name)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d requests reached the server", n)
	}
}

// TestRedTeam31_HugeReplies: a hostile endpoint's endless bodies are read only
// up to each call's cap: an object of unannounced length past the caller's limit, a retention
// reply, an Object Lock reply and a versions listing that never end. Each call fails, having
// read at most its cap (a few MiB), never the stream.
func TestRedTeam31_HugeReplies(t *testing.T) {
	var served atomic.Int64
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amz-Version-Id", "v1")
		chunk := []byte(strings.Repeat("<a>", 1<<14))
		if r.URL.Query().Has("retention") || r.URL.Query().Has("object-lock") || r.URL.Query().Has("versions") {
			w.Write([]byte("<Retention><Mode>"))
		}
		for i := 0; i < 1<<12; i++ { // up to 192 MiB
			n, err := w.Write(chunk)
			served.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer hostile.Close()
	c, err := s3.New(s3.Config{Endpoint: hostile.URL, Bucket: "bkt", Prefix: "agora/"}, s3.Credentials{AccessKeyID: "AKIDHUGE", SecretAccessKey: "huge-secret"}, s3test.Policy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if _, _, err := c.Get(t.Context(), "blobs/x", "", 1<<20); err == nil || !strings.Contains(err.Error(), "over the 1048576-byte limit") {
		t.Errorf("an endless object: %v", err)
	}
	if _, err := c.Retention(t.Context(), "anchors/agora/1", "v1"); err == nil {
		t.Error("an endless retention reply was accepted")
	}
	if err := c.CheckObjectLock(t.Context()); err == nil {
		t.Error("an endless Object Lock reply was accepted")
	}
	if _, err := c.Versions(t.Context(), "anchors/agora/1"); err == nil {
		t.Error("an endless versions reply was accepted")
	}
	c.CloseIdleConnections()
	// Four calls; the server may have written ahead into socket buffers, not 4 x 192 MiB.
	if n := served.Load(); n > 64<<20 {
		t.Errorf("the server wrote %d MiB before the client stopped reading", n>>20)
	}
}
